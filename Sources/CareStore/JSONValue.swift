import Foundation

/// A JSON value, for CareKit's JSON shapes (which CareGate writes and reads exactly, field by field).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    /// Members in order (CareKit JSON is compared as values, but stable output is kinder to diffs).
    case object([(String, JSONValue)])

    public static func == (a: JSONValue, b: JSONValue) -> Bool {
        switch (a, b) {
        case (.null, .null): true
        case (.bool(let x), .bool(let y)): x == y
        case (.number(let x), .number(let y)): x == y
        case (.string(let x), .string(let y)): x == y
        case (.array(let x), .array(let y)): x == y
        case (.object(let x), .object(let y)):
            x.count == y.count && Dictionary(x, uniquingKeysWith: { a, _ in a }) == Dictionary(y, uniquingKeysWith: { a, _ in a })
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .number(let n): hasher.combine(n)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let o): hasher.combine(o.count); for (k, _) in o { hasher.combine(k) }
        }
    }

    /// The member with this key, for objects.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.0 == key }?.1
    }

    public var stringValue: String? { if case .string(let s) = self { s } else { nil } }
    public var numberValue: Double? { if case .number(let n) = self { n } else { nil } }
    public var boolValue: Bool? { if case .bool(let b) = self { b } else { nil } }
    public var arrayValue: [JSONValue]? { if case .array(let a) = self { a } else { nil } }
    public var isNull: Bool { if case .null = self { true } else { false } }

    /// Compact (or indented) JSON text.
    public func serialized(pretty: Bool = false) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out, pretty: pretty, indent: 0)
        return String(decoding: out, as: UTF8.self)
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        for _ in 0..<indent { out.append(0x20); out.append(0x20) }
    }

    private func write(into out: inout [UInt8], pretty: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: JSONValue.format(n).utf8)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            if items.isEmpty { out.append(0x5B); out.append(0x5D); return }
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                item.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x5D)
        case .object(let members):
            if members.isEmpty { out.append(0x7B); out.append(0x7D); return }
            out.append(0x7B)
            for (i, (key, value)) in members.enumerated() {
                if i > 0 { out.append(0x2C) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                JSONValue.writeString(key, into: &out)
                out.append(0x3A)
                if pretty { out.append(0x20) }
                value.write(into: &out, pretty: pretty, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x7D)
        }
    }

    /// Numbers as Foundation's JSONEncoder writes them: integral values without a fraction.
    static func format(_ n: Double) -> String {
        if n.isFinite && n == n.rounded() && abs(n) < 1e15 { return String(Int64(n)) }
        return "\(n)"
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(0x22)
        var s = s
        s.withUTF8 { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                runStart = i + 1
                out.append(0x5C)
                switch b {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x0A: out.append(0x6E)
                case 0x0D: out.append(0x72)
                case 0x09: out.append(0x74)
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
        out.append(0x22)
    }

    /// Parses JSON text; errors name the byte offset and line.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses JSON bytes.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONBytesParser(bytes: bytes)
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.position == bytes.count else { throw parser.error("unexpected content after the JSON value") }
        return value
    }
}

/// Malformed JSON: what was wrong and where.
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var line: Int
    public var column: Int
    public var description: String { "\(line):\(column): \(message)" }
}

struct JSONBytesParser {
    let bytes: [UInt8]
    var position = 0

    func error(_ message: String) -> JSONSyntaxError {
        var line = 1, column = 1
        for b in bytes[0..<min(position, bytes.count)] {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return JSONSyntaxError(message: message, line: line, column: column)
    }

    mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard depth < 256 else { throw error("nesting too deep") }
        skipSpace()
        guard position < bytes.count else { throw error("expected a value, found the end") }
        switch bytes[position] {
        case 0x7B:
            position += 1
            var members: [(String, JSONValue)] = []
            skipSpace()
            if position < bytes.count, bytes[position] == 0x7D { position += 1; return .object(members) }
            while true {
                skipSpace()
                guard position < bytes.count, bytes[position] == 0x22 else { throw error("expected a member name") }
                let key = try string()
                skipSpace()
                guard position < bytes.count, bytes[position] == 0x3A else { throw error("expected ':'") }
                position += 1
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard position < bytes.count else { throw error("unterminated object") }
                let c = bytes[position]
                position += 1
                if c == 0x7D { return .object(members) }
                guard c == 0x2C else { position -= 1; throw error("expected ',' or '}'") }
            }
        case 0x5B:
            position += 1
            var items: [JSONValue] = []
            skipSpace()
            if position < bytes.count, bytes[position] == 0x5D { position += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard position < bytes.count else { throw error("unterminated array") }
                let c = bytes[position]
                position += 1
                if c == 0x5D { return .array(items) }
                guard c == 0x2C else { position -= 1; throw error("expected ',' or ']'") }
            }
        case 0x22:
            return .string(try string())
        case 0x74:
            try literal("true"); return .bool(true)
        case 0x66:
            try literal("false"); return .bool(false)
        case 0x6E:
            try literal("null"); return .null
        default:
            let start = position
            while position < bytes.count, "+-.eE0123456789".utf8.contains(bytes[position]) { position += 1 }
            guard position > start, let n = Double(String(decoding: bytes[start..<position], as: UTF8.self)) else {
                position = start
                throw error("expected a value")
            }
            return .number(n)
        }
    }

    mutating func literal(_ word: String) throws(JSONSyntaxError) {
        let w = Array(word.utf8)
        guard position + w.count <= bytes.count, Array(bytes[position..<(position + w.count)]) == w else { throw error("expected a value") }
        position += w.count
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        position += 1
        let start = position
        var plain = true
        while position < bytes.count, bytes[position] != 0x22 {
            if bytes[position] == 0x5C { plain = false; position += 1 }
            else if bytes[position] < 0x20 { throw error("control character in a string") }
            position += 1
        }
        guard position < bytes.count else { throw error("unterminated string") }
        let raw = bytes[start..<position]
        position += 1
        if plain { return String(decoding: raw, as: UTF8.self) }
        var out = [UInt8]()
        var i = raw.startIndex
        while i < raw.endIndex {
            let b = raw[i]
            guard b == 0x5C else { out.append(b); i += 1; continue }
            let e = raw[i + 1]
            i += 2
            switch e {
            case 0x6E: out.append(0x0A)
            case 0x72: out.append(0x0D)
            case 0x74: out.append(0x09)
            case 0x62: out.append(0x08)
            case 0x66: out.append(0x0C)
            case 0x75:
                guard i + 4 <= raw.endIndex, var code = UInt32(String(decoding: raw[i..<(i + 4)], as: UTF8.self), radix: 16) else {
                    throw error("bad \\u escape")
                }
                i += 4
                if code >= 0xD800 && code < 0xDC00, i + 6 <= raw.endIndex, raw[i] == 0x5C, raw[i + 1] == 0x75,
                   let low = UInt32(String(decoding: raw[(i + 2)..<(i + 6)], as: UTF8.self), radix: 16) {
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                out.append(contentsOf: Array(String(Unicode.Scalar(code).map(Character.init) ?? "\u{FFFD}").utf8))
            default: out.append(e)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Writes compact JSON straight into bytes (the fast path for encoding entities). It owns a plain
/// buffer rather than an array: entity encoding appends a few bytes at a time, hundreds of times
/// per entity, and array appends (uniqueness and capacity checks) were most of its cost.
struct JSONWriter: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int
    /// Bit d is set while the container open at depth d has no member yet (entities nest a few
    /// levels; 64 is far beyond any CareKit shape).
    private var fresh: UInt64 = 0
    private var depth = 0
    private var afterKey = false

    /// A writer with room for `capacity` bytes before it has to grow.
    init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written so far.
    var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    @inline(__always) private mutating func reserve(_ n: Int) {
        if count + n > capacity { grow(count + n) }
    }

    private mutating func grow(_ needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: count)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }

    @inline(__always) private mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    @inline(__always) private mutating func put(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        (base + count).update(from: source.assumingMemoryBound(to: UInt8.self), count: bytes.count)
        count += bytes.count
    }

    @inline(__always) private mutating func separate() {
        if afterKey { afterKey = false; return }
        guard depth > 0 else { return }
        let bit: UInt64 = 1 << (depth - 1)
        if fresh & bit != 0 { fresh &= ~bit } else { put(0x2C) }
    }

    private mutating func open(_ byte: UInt8) {
        separate()
        put(byte)
        precondition(depth < 64, "JSONWriter: nesting deeper than 64 levels")
        fresh |= 1 << depth
        depth += 1
    }

    private mutating func close(_ byte: UInt8) {
        put(byte)
        depth -= 1
        fresh &= ~(1 << depth)
    }

    mutating func beginObject() { open(0x7B) }
    mutating func endObject() { close(0x7D) }
    mutating func beginArray() { open(0x5B) }
    mutating func endArray() { close(0x5D) }

    /// A member name known at compile time (CareKit's key names need no escaping).
    mutating func key(_ name: StaticString) {
        separate()
        reserve(name.utf8CodeUnitCount + 3)
        base[count] = 0x22
        (base + count + 1).update(from: name.utf8Start, count: name.utf8CodeUnitCount)
        count += name.utf8CodeUnitCount + 1
        base[count] = 0x22
        base[count + 1] = 0x3A
        count += 2
        afterKey = true
    }

    /// A member name from data (user info keys, for instance), escaped as needed.
    mutating func key(dynamic name: String) {
        separate()
        quoted(name)
        put(0x3A)
        afterKey = true
    }

    mutating func string(_ value: String) { separate(); quoted(value) }

    /// A JSON string literal: runs without special characters are copied whole.
    private mutating func quoted(_ value: String) {
        var value = value
        value.withUTF8 { utf8 in
            reserve(utf8.count + 2)
            put(0x22)
            var runStart = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == 0x22 || b == 0x5C else { continue }
                put(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[runStart..<i]))
                runStart = i + 1
                put(0x5C)
                switch b {
                case 0x22: put(0x22)
                case 0x5C: put(0x5C)
                case 0x0A: put(0x6E)
                case 0x0D: put(0x72)
                case 0x09: put(0x74)
                default:
                    @inline(__always) func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }
                    put(0x75); put(0x30); put(0x30); put(hex(b >> 4)); put(hex(b & 0xF))
                }
            }
            put(UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(utf8)[runStart..<utf8.count]))
            put(0x22)
        }
    }

    mutating func number(_ value: Double) {
        separate()
        if value.isFinite && value == value.rounded() && abs(value) < 1e15 {
            integer(Int64(value))
        } else {
            var text = "\(value)"
            text.withUTF8 { put(UnsafeRawBufferPointer($0)) }
        }
    }

    /// Decimal digits straight into the buffer (no intermediate string).
    private mutating func integer(_ value: Int64) {
        reserve(21)
        if value < 0 { base[count] = 0x2D; count += 1 }
        var magnitude = value.magnitude
        var digits = 0
        var probe = magnitude
        repeat { digits += 1; probe /= 10 } while probe > 0
        var position = count + digits - 1
        repeat {
            base[position] = UInt8(truncatingIfNeeded: 0x30 + magnitude % 10)
            magnitude /= 10
            position -= 1
        } while magnitude > 0
        count += digits
    }

    mutating func bool(_ value: Bool) {
        separate()
        let text: StaticString = value ? "true" : "false"
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A UUID as CareKit writes it: uppercase, in quotes (without Foundation's formatter).
    mutating func uuid(_ value: UUID) {
        separate()
        reserve(38)
        @inline(__always) func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x37 + nibble }
        let out = base + count
        withUnsafeBytes(of: value.uuid) { raw in
            out[0] = 0x22
            var o = 1
            for i in 0..<16 {
                if i == 4 || i == 6 || i == 8 || i == 10 { out[o] = 0x2D; o += 1 }
                out[o] = hex(raw[i] >> 4)
                out[o + 1] = hex(raw[i] & 0xF)
                o += 2
            }
            out[o] = 0x22
        }
        count += 38
    }
}
