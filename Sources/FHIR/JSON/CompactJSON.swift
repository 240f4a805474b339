import JSON

/// JSON text without the whitespace between its tokens: what a reader that keeps a Bundle
/// entry's resource for later keeps (a pretty-printed Bundle's entries are mostly indentation).
/// The text has been parsed already, so its grammar is known to be sound.
enum CompactJSON {
    /// The text of `range` with the whitespace outside strings left out.
    static func text(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> [UInt8] {
        guard let base = text.baseAddress, !range.isEmpty else { return [] }
        return [UInt8](unsafeUninitializedCapacity: range.count) { out, count in
            var i = range.lowerBound, n = 0
            let end = range.upperBound
            while i < end {
                switch base[i] {
                case 0x20:
                    i += 1
                    // Indentation, eight spaces at a time.
                    while i + 8 <= end, JSONEscaping.word(base + i) == 0x2020_2020_2020_2020 { i += 8 }
                case 0x0A, 0x0D, 0x09:
                    i += 1
                case 0x22:
                    let start = i
                    i = endOfString(base, from: i + 1, end: end)
                    (out.baseAddress! + n).update(from: base + start, count: i - start)
                    n += i - start
                case let b:
                    out[n] = b
                    n += 1
                    i += 1
                }
            }
            count = n
        }
    }

    /// The offset just past the closing quote of the string whose text starts at `i`; plain
    /// text is passed eight bytes at a time.
    private static func endOfString(_ base: UnsafePointer<UInt8>, from start: Int, end: Int) -> Int {
        var i = start
        while i < end {
            while i + 8 <= end {
                let stops = JSONEscaping.stopBytes(JSONEscaping.word(base + i))
                if stops != 0 { i += stops.trailingZeroBitCount >> 3; break }
                i += 8
            }
            guard i < end else { break }
            let b = base[i]
            if b == 0x5C { i += 2; continue }
            i += 1
            if b == 0x22 { return i }
        }
        return min(i, end)
    }
}
