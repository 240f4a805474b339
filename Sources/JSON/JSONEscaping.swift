/// Where JSON text is written a byte at a time or a run at a time: a byte array, or the
/// buffer of a `JSONWriter`. One escaping rule serves them all.
public protocol JSONByteSink: ~Copyable {
    mutating func append(_ byte: UInt8)
    mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>)
}

extension Array: JSONByteSink where Element == UInt8 {}

/// JSON's string escaping, written and read the same way everywhere in CareGate: `\"`, `\\`,
/// `\n`, `\r`, `\t`, `\b`, `\f`, and `\u00XX` for the other control characters; `/` and
/// non-ASCII text are written as they are.
public enum JSONEscaping {
    /// The two-byte escape of a byte, or 0 when it takes `\u00XX` (or no escape).
    @usableFromInline static let shortEscapes: [UInt8] = {
        var table = [UInt8](repeating: 0, count: 128)
        table[0x22] = 0x22; table[0x5C] = 0x5C; table[0x0A] = 0x6E; table[0x0D] = 0x72
        table[0x09] = 0x74; table[0x08] = 0x62; table[0x0C] = 0x66
        return table
    }()

    /// Whether a byte of UTF-8 text must be escaped in a JSON string.
    @inline(__always)
    public static func needsEscape(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x22 || byte == 0x5C }

    /// Appends `value` as a quoted JSON string: runs that need no escaping are copied whole.
    /// Inlinable, so that each sink gets its own specialised copy (writers call it per string).
    @inlinable
    public static func appendQuoted<Sink: JSONByteSink & ~Copyable>(_ value: String, to sink: inout Sink) {
        var value = value
        sink.append(0x22)
        value.withUTF8 { appendEscaped($0, to: &sink) }
        sink.append(0x22)
    }

    /// Appends UTF-8 text escaped (without quotes); plain text is passed eight bytes at a time.
    @inlinable
    public static func appendEscaped<Sink: JSONByteSink & ~Copyable>(_ utf8: UnsafeBufferPointer<UInt8>, to sink: inout Sink) {
        var runStart = 0
        var i = 0
        let n = utf8.count
        while i < n {
            if i + 8 <= n {
                let stops = stopBytes(word(utf8.baseAddress! + i))
                if stops == 0 { i += 8; continue }
                i += stops.trailingZeroBitCount >> 3
            }
            let b = utf8[i]
            i += 1
            guard needsEscape(b) else { continue }
            sink.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<(i - 1)]))
            runStart = i
            sink.append(0x5C)
            let short = shortEscapes[Int(b)]
            if short != 0 {
                sink.append(short)
            } else {
                sink.append(0x75); sink.append(0x30); sink.append(0x30); sink.append(hex(b >> 4)); sink.append(hex(b & 0xF))
            }
        }
        sink.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<n]))
    }

    /// The eight bytes at `p`, the first in the lowest byte.
    @inlinable @inline(__always)
    public static func word(_ p: UnsafePointer<UInt8>) -> UInt64 {
        UInt64(littleEndian: UnsafeRawPointer(p).loadUnaligned(as: UInt64.self))
    }

    /// A word with 0x80 in each byte of `w` that ends a run of plain string text (a quote, a
    /// backslash or a control character), exact up to the first such byte: the bytes before the
    /// lowest one set (`trailingZeroBitCount / 8`) need no escape. Readers and writers scan
    /// strings with it eight bytes at a time.
    @inlinable @inline(__always)
    public static func stopBytes(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        let quote = w ^ (ones &* 0x22), backslash = w ^ (ones &* 0x5C)
        return ((quote &- ones) & ~quote | (backslash &- ones) & ~backslash | (w &- ones &* 0x20) & ~w) & highs
    }

    @inlinable @inline(__always)
    static func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    /// An escape that cannot be read, at a byte offset into the string's contents.
    public struct InvalidEscape: Error, Sendable {
        public var offset: Int
        public var message: String
    }

    /// The text of a JSON string's contents (between the quotes), escapes resolved; surrogate
    /// pairs must be complete.
    public static func unescape(_ raw: UnsafeBufferPointer<UInt8>) throws(InvalidEscape) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(raw.count)
        var i = 0
        while i < raw.count {
            let b = raw[i]
            if b != 0x5C { out.append(b); i += 1; continue }
            guard i + 1 < raw.count else { throw InvalidEscape(offset: i, message: "bad escape") }
            let e = raw[i + 1]
            i += 2
            switch e {
            case 0x22, 0x5C, 0x2F: out.append(e)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x75:
                guard var scalar = hex4(raw, i) else { throw InvalidEscape(offset: i - 2, message: "bad \\u escape") }
                i += 4
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    // A high surrogate must be followed by an escaped low surrogate.
                    guard i + 6 <= raw.count, raw[i] == 0x5C, raw[i + 1] == 0x75, let low = hex4(raw, i + 2), low >= 0xDC00 && low < 0xE000 else {
                        throw InvalidEscape(offset: i - 6, message: "unpaired surrogate in \\u escape")
                    }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw InvalidEscape(offset: i - 6, message: "unpaired surrogate in \\u escape")
                }
                out.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
            default:
                throw InvalidEscape(offset: i - 2, message: "bad escape '\\\(Character(Unicode.Scalar(e)))'")
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hex4(_ raw: UnsafeBufferPointer<UInt8>, _ i: Int) -> UInt32? {
        guard i + 4 <= raw.count else { return nil }
        var v: UInt32 = 0
        for k in i..<(i + 4) {
            let c = raw[k]
            let d: UInt8
            switch c {
            case 0x30...0x39: d = c - 0x30
            case 0x41...0x46: d = c - 0x37
            case 0x61...0x66: d = c - 0x57
            default: return nil
            }
            v = v << 4 | UInt32(d)
        }
        return v
    }
}
