import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The 20 FHIR R4 primitive types and their lexical rules.
///
/// Values are kept in their lexical form (a decimal `1.50` stays `1.50`); `isValid` checks that
/// form against the rules of the specification's primitive type definitions.
public enum PrimitiveKind: String, Sendable, CaseIterable {
    /// The boolean and the numbers.
    case boolean, integer, decimal, positiveInt, unsignedInt
    /// The strings, codes, identifiers and binary data.
    case string, markdown, code, id, uri, url, canonical, oid, uuid, base64Binary
    /// The dates and times.
    case date, dateTime, instant, time
    /// A narrative's XHTML.
    case xhtml

    /// How the value appears in FHIR JSON.
    public enum JSONForm: Sendable {
        /// A JSON string.
        case string
        /// A bare JSON number.
        case number
        /// A bare `true` or `false`.
        case boolean
    }

    /// JSON writes booleans and numbers bare; every other primitive is a string.
    public var jsonForm: JSONForm {
        switch self {
        case .boolean: .boolean
        case .integer, .decimal, .positiveInt, .unsignedInt: .number
        default: .string
        }
    }

    /// A short statement of the rule, for error messages.
    public var ruleDescription: String {
        switch self {
        case .boolean: "true or false"
        case .integer: "a 32-bit integer"
        case .decimal: "a decimal number"
        case .positiveInt: "an integer from 1 to 2147483647"
        case .unsignedInt: "an integer from 0 to 2147483647"
        case .string, .markdown: "a non-empty string"
        case .code: "a code: no leading, trailing or double whitespace"
        case .id: "1 to 64 of A-Z a-z 0-9 - ."
        case .uri, .url, .canonical: "a URI without whitespace"
        case .oid: "urn:oid: followed by a dotted OID"
        case .uuid: "urn:uuid: followed by a lowercase UUID"
        case .base64Binary: "base64 data"
        case .date: "YYYY, YYYY-MM or YYYY-MM-DD"
        case .dateTime: "YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss(.sss)(Z|+hh:mm)"
        case .instant: "YYYY-MM-DDThh:mm:ss(.sss)(Z|+hh:mm)"
        case .time: "hh:mm:ss(.sss)"
        case .xhtml: "an XHTML <div>"
        }
    }

    /// Whether `value` is a valid lexical form of this type.
    public func isValid(_ value: String) -> Bool {
        var value = value
        return value.withUTF8 { isValid(utf8: $0) }
    }

    /// Whether the UTF-8 bytes are a valid lexical form of this type.
    public func isValid(utf8 s: UnsafeBufferPointer<UInt8>) -> Bool {
        switch self {
        case .boolean:
            return s.elementsEqual("true".utf8) || s.elementsEqual("false".utf8)
        case .integer:
            return Lexical.integer(s, allowSign: true).map { $0 >= Int64(Int32.min) && $0 <= Int64(Int32.max) } ?? false
        case .positiveInt:
            return Lexical.integer(s, allowSign: true).map { $0 >= 1 && $0 <= Int64(Int32.max) } ?? false
        case .unsignedInt:
            return Lexical.integer(s, allowSign: false).map { $0 >= 0 && $0 <= Int64(Int32.max) } ?? false
        case .decimal:
            return Lexical.isDecimal(s)
        case .string, .markdown:
            return !s.isEmpty
        case .code:
            return Lexical.isCode(s)
        case .id:
            return !s.isEmpty && s.count <= 64 && s.allSatisfy { Lexical.isIdCharacter($0) }
        case .uri, .url, .canonical:
            return !s.isEmpty && !s.contains(where: Lexical.isWhitespace)
        case .oid:
            return Lexical.isOID(s)
        case .uuid:
            return Lexical.isUUID(s)
        case .base64Binary:
            return s.allSatisfy { Lexical.isBase64Character($0) || Lexical.isWhitespace($0) }
        case .date:
            return Lexical.dateLength(s, 0) == s.count
        case .dateTime:
            return Lexical.isDateTime(s, requireFull: false)
        case .instant:
            return Lexical.isDateTime(s, requireFull: true)
        case .time:
            return Lexical.timeLength(s, 0) == s.count
        case .xhtml:
            return Lexical.startsWith(s, "<div")
        }
    }
}

/// Lexical checks over UTF-8 bytes.
enum Lexical {
    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
    @inline(__always) static func isWhitespace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    /// Whether every byte is XML whitespace (space, tab, LF, CR), eight bytes at a time: the
    /// indentation between FHIR XML tags comes to the reader as text.
    static func isAllWhitespace(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = s.baseAddress else { return true }
        var i = 0
        while i + 8 <= s.count {
            let word = JSONEscaping.word(base + i)
            let spaces = equalBytes(word, 0x20) | equalBytes(word, 0x0A) | equalBytes(word, 0x09) | equalBytes(word, 0x0D)
            if spaces != 0x8080_8080_8080_8080 { return false }
            i += 8
        }
        while i < s.count {
            if !isWhitespace(base[i]) { return false }
            i += 1
        }
        return true
    }

    /// The high bit of each byte of `word` that equals `byte`, exactly (no carry crosses bytes).
    @inline(__always)
    static func equalBytes(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let x = word ^ (0x0101_0101_0101_0101 &* UInt64(byte))
        return ~(((x & 0x7F7F_7F7F_7F7F_7F7F) &+ 0x7F7F_7F7F_7F7F_7F7F) | x) & 0x8080_8080_8080_8080
    }
    @inline(__always) static func isIdCharacter(_ b: UInt8) -> Bool {
        isDigit(b) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2D || b == 0x2E
    }
    @inline(__always) static func isBase64Character(_ b: UInt8) -> Bool {
        isDigit(b) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2B || b == 0x2F || b == 0x3D
    }

    /// Whether a code point is a control character FHIR strings may not hold (below U+0020,
    /// but tab, LF and CR); XML 1.0 cannot carry them even as character references.
    @inline(__always) static func isForbiddenControl(_ code: UInt32) -> Bool {
        code < 0x20 && code != 0x09 && code != 0x0A && code != 0x0D
    }

    /// The text with every forbidden control character replaced by U+FFFD.
    static func replacingControlCharacters(_ text: String) -> String {
        guard text.utf8.contains(where: { isForbiddenControl(UInt32($0)) }) else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            scalars.append(isForbiddenControl(scalar.value) ? "\u{FFFD}" : scalar)
        }
        return String(scalars)
    }

    /// Whether the bytes are exactly the literal (a fast path for hot comparisons).
    @inline(__always)
    static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let n = literal.utf8CodeUnitCount
        guard bytes.count == n, let base = bytes.baseAddress else { return n == 0 && bytes.isEmpty }
        return memcmp(base, literal.utf8Start, n) == 0
    }

    static func startsWith(_ s: UnsafeBufferPointer<UInt8>, _ prefix: String) -> Bool {
        let p = Array(prefix.utf8)
        return s.count >= p.count && s.prefix(p.count).elementsEqual(p)
    }

    /// An optionally signed decimal integer without leading zeros, or nil.
    static func integer(_ s: UnsafeBufferPointer<UInt8>, allowSign: Bool) -> Int64? {
        var i = 0
        var negative = false
        if allowSign, i < s.count, s[i] == 0x2D || s[i] == 0x2B { negative = s[i] == 0x2D; i += 1 }
        guard i < s.count, s.count - i <= 11 else { return nil }
        if s[i] == 0x30 && s.count - i > 1 { return nil }
        var value: Int64 = 0
        while i < s.count {
            guard isDigit(s[i]) else { return nil }
            value = value * 10 + Int64(s[i] - 0x30)
            i += 1
        }
        return negative ? -value : value
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    static func isDecimal(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        if i < s.count, s[i] == 0x2D { i += 1 }
        guard i < s.count, isDigit(s[i]) else { return false }
        if s[i] == 0x30 { i += 1 } else { while i < s.count, isDigit(s[i]) { i += 1 } }
        if i < s.count, s[i] == 0x2E {
            i += 1
            let start = i
            while i < s.count, isDigit(s[i]) { i += 1 }
            if i == start { return false }
        }
        if i < s.count, s[i] == 0x65 || s[i] == 0x45 {
            i += 1
            if i < s.count, s[i] == 0x2B || s[i] == 0x2D { i += 1 }
            let start = i
            while i < s.count, isDigit(s[i]) { i += 1 }
            if i == start { return false }
        }
        return i == s.count
    }

    /// `[^\s]+( [^\s]+)*`
    static func isCode(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let first = s.first, let last = s.last, !isWhitespace(first), !isWhitespace(last) else { return false }
        var previousSpace = false
        for b in s {
            if isWhitespace(b) {
                if b != 0x20 || previousSpace { return false }
                previousSpace = true
            } else {
                previousSpace = false
            }
        }
        return true
    }

    static func isOID(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = Array("urn:oid:".utf8)
        guard s.count > prefix.count + 2, s.prefix(prefix.count).elementsEqual(prefix) else { return false }
        let rest = s[prefix.count...]
        guard let first = rest.first, first >= 0x30 && first <= 0x32 else { return false }
        var arcs = rest.split(separator: 0x2E, omittingEmptySubsequences: false)
        guard arcs.count >= 2, arcs.removeFirst().count == 1 else { return false }
        return arcs.allSatisfy { arc in
            !arc.isEmpty && arc.allSatisfy(isDigit) && (arc.count == 1 || arc.first != 0x30)
        }
    }

    static func isUUID(_ s: UnsafeBufferPointer<UInt8>) -> Bool {
        let prefix = Array("urn:uuid:".utf8)
        guard s.count == prefix.count + 36, s.prefix(prefix.count).elementsEqual(prefix) else { return false }
        for (offset, b) in s.dropFirst(prefix.count).enumerated() {
            if offset == 8 || offset == 13 || offset == 18 || offset == 23 {
                if b != 0x2D { return false }
            } else if !(isDigit(b) || (b >= 0x61 && b <= 0x66)) {
                return false
            }
        }
        return true
    }

    /// Reads `n` digits at `i` as a number, or nil.
    @inline(__always)
    static func digits(_ s: UnsafeBufferPointer<UInt8>, _ i: Int, _ n: Int) -> Int? {
        guard i + n <= s.count else { return nil }
        var v = 0
        for k in i..<(i + n) {
            guard isDigit(s[k]) else { return nil }
            v = v * 10 + Int(s[k] - 0x30)
        }
        return v
    }

    /// The length of a valid date (YYYY, YYYY-MM or YYYY-MM-DD) at `i`, or -1.
    static func dateLength(_ s: UnsafeBufferPointer<UInt8>, _ i: Int) -> Int {
        guard let year = digits(s, i, 4) else { return -1 }
        guard i + 4 < s.count, s[i + 4] == 0x2D else { return 4 }
        guard let month = digits(s, i + 5, 2), (1...12).contains(month) else { return -1 }
        guard i + 7 < s.count, s[i + 7] == 0x2D else { return 7 }
        guard let day = digits(s, i + 8, 2), day >= 1, day <= daysIn(month: month, year: year) else { return -1 }
        return 10
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// The length of a valid time (hh:mm:ss with optional fraction) at `i`, or -1.
    static func timeLength(_ s: UnsafeBufferPointer<UInt8>, _ i: Int) -> Int {
        guard let hour = digits(s, i, 2), hour <= 24,
              i + 2 < s.count, s[i + 2] == 0x3A,
              let minute = digits(s, i + 3, 2), minute <= 59,
              i + 5 < s.count, s[i + 5] == 0x3A,
              let second = digits(s, i + 6, 2), second <= 60 else { return -1 }
        if hour == 24 && (minute != 0 || second != 0) { return -1 }
        var j = i + 8
        if j < s.count, s[j] == 0x2E {
            j += 1
            let start = j
            while j < s.count, isDigit(s[j]) { j += 1 }
            if j == start { return -1 }
        }
        return j - i
    }

    /// dateTime: a date, or a full date with a time and a zone; instant: the latter only.
    static func isDateTime(_ s: UnsafeBufferPointer<UInt8>, requireFull: Bool) -> Bool {
        let dateLength = dateLength(s, 0)
        guard dateLength > 0 else { return false }
        if dateLength == s.count { return !requireFull }
        guard dateLength == 10, s[10] == 0x54 else { return false }
        let timeLength = timeLength(s, 11)
        guard timeLength > 0 else { return false }
        var j = 11 + timeLength
        guard j < s.count else { return false }
        if s[j] == 0x5A { return j + 1 == s.count }
        guard s[j] == 0x2B || s[j] == 0x2D, let hours = digits(s, j + 1, 2), hours <= 14,
              j + 3 < s.count, s[j + 3] == 0x3A, let minutes = digits(s, j + 4, 2), minutes <= 59 else { return false }
        j += 6
        return j == s.count
    }
}
