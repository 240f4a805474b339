/// Finds parts of the text of a JSON document that has already been parsed (so its grammar is
/// known to be sound), without parsing it again: the text of each `Bundle.entry.resource`, kept
/// by readers that hold resources for later instead of writing them again.
struct JSONTextCursor {
    let text: UnsafeBufferPointer<UInt8>
    var i: Int

    init(_ text: UnsafeBufferPointer<UInt8>) {
        self.text = text
        i = text.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
    }

    /// For a Bundle's text, the range of each entry's `resource` (nil for an entry without one),
    /// in order; nil when the text is not an object with an `entry` array as expected.
    static func entryResources(in text: UnsafeBufferPointer<UInt8>) -> [Range<Int>?]? {
        var cursor = JSONTextCursor(text)
        var result: [Range<Int>?]?
        let walked = cursor.members { cursor, key in
            guard key == "entry" else { return cursor.skipValue() }
            var entries: [Range<Int>?] = []
            let ok = cursor.items { cursor in
                var resource: Range<Int>?
                let ok = cursor.members { cursor, key in
                    let start = cursor.i
                    guard cursor.skipValue() else { return false }
                    if key == "resource" { resource = start..<cursor.i }
                    return true
                }
                entries.append(resource)
                return ok
            }
            result = entries
            return ok
        }
        return walked ? result : nil
    }

    /// The text of `range` without the whitespace between tokens (a pretty-printed Bundle's
    /// entries are mostly indentation).
    static func compacted(_ text: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(range.count)
        var i = range.lowerBound
        while i < range.upperBound {
            let b = text[i]
            i += 1
            switch b {
            case 0x20, 0x0A, 0x0D, 0x09: continue
            case 0x22:
                let start = i - 1
                while i < range.upperBound {
                    let c = text[i]
                    if c == 0x5C { i += 2; continue }
                    i += 1
                    if c == 0x22 { break }
                }
                result.append(contentsOf: UnsafeBufferPointer(rebasing: text[start..<min(i, range.upperBound)]))
            default: result.append(b)
            }
        }
        return result
    }

    mutating func skipSpace() {
        while i < text.count, text[i] == 0x20 || text[i] == 0x0A || text[i] == 0x0D || text[i] == 0x09 { i += 1 }
    }

    /// Walks an object's members, calling `body` at each value with the member's name (as
    /// written, escapes and all); false when the text is not as expected or `body` says so.
    mutating func members(_ body: (inout JSONTextCursor, Substring) -> Bool) -> Bool {
        delimited(0x7B, 0x7D) { cursor in
            let keyStart = cursor.i
            guard cursor.i < cursor.text.count, cursor.text[cursor.i] == 0x22, cursor.skipValue() else { return false }
            let key = Substring(decoding: UnsafeBufferPointer(rebasing: cursor.text[(keyStart + 1)..<(cursor.i - 1)]), as: UTF8.self)
            cursor.skipSpace()
            guard cursor.i < cursor.text.count, cursor.text[cursor.i] == 0x3A else { return false }
            cursor.i += 1
            cursor.skipSpace()
            return body(&cursor, key)
        }
    }

    /// Walks an array's items, calling `body` at each.
    mutating func items(_ body: (inout JSONTextCursor) -> Bool) -> Bool {
        delimited(0x5B, 0x5D, body)
    }

    /// Walks the comma-separated parts between `open` and `close`, calling `body` at each.
    mutating func delimited(_ open: UInt8, _ close: UInt8, _ body: (inout JSONTextCursor) -> Bool) -> Bool {
        skipSpace()
        guard i < text.count, text[i] == open else { return false }
        i += 1
        skipSpace()
        if i < text.count, text[i] == close { i += 1; return true }
        while true {
            skipSpace()
            guard body(&self) else { return false }
            skipSpace()
            guard i < text.count else { return false }
            if text[i] == close { i += 1; return true }
            guard text[i] == 0x2C else { return false }
            i += 1
        }
    }

    /// Moves past the value at the cursor.
    mutating func skipValue() -> Bool {
        guard i < text.count else { return false }
        switch text[i] {
        case 0x22:
            i += 1
            while i < text.count {
                let b = text[i]
                if b == 0x5C { i += 2; continue }
                i += 1
                if b == 0x22 { return true }
            }
            return false
        case 0x7B, 0x5B:
            var depth = 0
            while i < text.count {
                let b = text[i]
                i += 1
                switch b {
                case 0x22:
                    while i < text.count {
                        let c = text[i]
                        if c == 0x5C { i += 2; continue }
                        i += 1
                        if c == 0x22 { break }
                    }
                case 0x7B, 0x5B: depth += 1
                case 0x7D, 0x5D:
                    depth -= 1
                    if depth == 0 { return true }
                default: break
                }
            }
            return false
        default:
            while i < text.count {
                let b = text[i]
                if b == 0x2C || b == 0x7D || b == 0x5D || b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { break }
                i += 1
            }
            return true
        }
    }
}
