/// A JSON value: CareKit's JSON shapes, reports and configuration read and written by CareGate.
/// Objects keep their members' order; `==` compares them as JSON does, without order.
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

    /// Compact (or indented) JSON text; `sortedKeys` orders every object's members by name
    /// (stable files for diffs: golden snapshots, reports).
    public func serialized(pretty: Bool = false, sortedKeys: Bool = false) -> String {
        String(decoding: bytes(pretty: pretty, sortedKeys: sortedKeys), as: UTF8.self)
    }

    /// The JSON text as UTF-8 bytes.
    public func bytes(pretty: Bool = false, sortedKeys: Bool = false) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(into: &out, pretty: pretty, sortedKeys: sortedKeys, indent: 0)
        return out
    }

    private static func newline(_ out: inout [UInt8], _ indent: Int) {
        out.append(0x0A)
        for _ in 0..<indent { out.append(0x20); out.append(0x20) }
    }

    private func write(into out: inout [UInt8], pretty: Bool, sortedKeys: Bool, indent: Int) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: JSONValue.format(n).utf8)
        case .string(let s): JSONEscaping.appendQuoted(s, to: &out)
        case .array(let items):
            if items.isEmpty { out.append(0x5B); out.append(0x5D); return }
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                item.write(into: &out, pretty: pretty, sortedKeys: sortedKeys, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x5D)
        case .object(let members):
            if members.isEmpty { out.append(0x7B); out.append(0x7D); return }
            out.append(0x7B)
            for (i, (key, value)) in (sortedKeys ? members.sorted { $0.0 < $1.0 } : members).enumerated() {
                if i > 0 { out.append(0x2C) }
                if pretty { JSONValue.newline(&out, indent + 1) }
                JSONEscaping.appendQuoted(key, to: &out)
                out.append(0x3A)
                if pretty { out.append(0x20) }
                value.write(into: &out, pretty: pretty, sortedKeys: sortedKeys, indent: indent + 1)
            }
            if pretty { JSONValue.newline(&out, indent) }
            out.append(0x7D)
        }
    }

    /// Numbers as Foundation's JSONEncoder writes them: integral values without a fraction.
    public static func format(_ n: Double) -> String {
        if n.isFinite && n == n.rounded() && abs(n) < 1e15 { return String(Int64(n)) }
        return "\(n)"
    }

    /// Parses JSON text; errors name the byte offset and line.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    /// Parses JSON bytes.
    public static func parse(_ bytes: [UInt8]) throws(JSONSyntaxError) -> JSONValue {
        var parser = JSONParser(bytes: bytes)
        let value = try parser.value(depth: 0)
        parser.skipSpace()
        guard parser.position == bytes.count else { throw parser.error("unexpected content after the JSON value") }
        return value
    }
}

/// Literals, so reports and snapshots read as the JSON they make:
/// `["id": .init(plan.id), "tags": .array(tags.map(JSONValue.init)), "done": true]`.
extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByNilLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Members in the order written.
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(elements) }

    /// A string, or null for nil.
    public init(_ value: String?) { self = value.map { .string($0) } ?? .null }
    /// A number, or null for nil.
    public init(_ value: Int?) { self = value.map { .number(Double($0)) } ?? .null }
    public init(_ value: Double?) { self = value.map { .number($0) } ?? .null }
    public init(_ value: Bool) { self = .bool(value) }
    /// An array of strings.
    public init(_ values: [String]) { self = .array(values.map { .string($0) }) }
}
