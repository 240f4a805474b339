import Foundation

/// Writes compact JSON straight into bytes (the fast path for encoding entities). It owns a plain
/// buffer rather than an array: entity encoding appends a few bytes at a time, hundreds of times
/// per entity, and array appends (uniqueness and capacity checks) were most of its cost.
public struct JSONWriter: ~Copyable, JSONByteSink {
    private var buffer: JSONBytes
    /// Bit d is set while the container open at depth d has no member yet (entities nest a few
    /// levels; 64 is far beyond any CareKit shape).
    private var fresh: UInt64 = 0
    private var depth = 0
    private var afterKey = false

    /// A writer with room for `capacity` bytes before it has to grow.
    public init(capacity: Int = 1024) {
        buffer = JSONBytes(capacity: capacity)
    }

    /// The bytes written so far.
    public var bytes: [UInt8] { buffer.bytes }

    @inline(__always) private mutating func put(_ byte: UInt8) { buffer.append(byte) }

    @inline(__always) private mutating func put(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
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

    public mutating func beginObject() { open(0x7B) }
    public mutating func endObject() { close(0x7D) }
    public mutating func beginArray() { open(0x5B) }
    public mutating func endArray() { close(0x5D) }

    /// A member name known at compile time (CareKit's key names need no escaping).
    public mutating func key(_ name: StaticString) {
        separate()
        let n = name.utf8CodeUnitCount
        buffer.reserve(n + 3)
        let out = buffer.end
        out[0] = 0x22
        (out + 1).update(from: name.utf8Start, count: n)
        out[n + 1] = 0x22
        out[n + 2] = 0x3A
        buffer.advance(n + 3)
        afterKey = true
    }

    /// A member name from data (user info keys, for instance), escaped as needed.
    public mutating func key(dynamic name: String) {
        separate()
        quoted(name)
        put(0x3A)
        afterKey = true
    }

    public mutating func string(_ value: String) { separate(); quoted(value) }

    /// A JSON string literal, escaped by the one rule (`JSONEscaping`).
    private mutating func quoted(_ value: String) { JSONEscaping.appendQuoted(value, to: &self) }

    /// A value already written as compact JSON (a stored version's JSON, copied as it is).
    public mutating func value(serialized json: [UInt8]) {
        separate()
        json.withUnsafeBytes { put($0) }
    }

    public mutating func append(_ byte: UInt8) { put(byte) }
    public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) { put(UnsafeRawBufferPointer(bytes)) }

    public mutating func number(_ value: Double) {
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
        buffer.reserve(21)
        if value < 0 { put(0x2D) }
        var magnitude = value.magnitude
        var digits = 0
        var probe = magnitude
        repeat { digits += 1; probe /= 10 } while probe > 0
        let out = buffer.end
        var position = digits - 1
        repeat {
            out[position] = UInt8(truncatingIfNeeded: 0x30 + magnitude % 10)
            magnitude /= 10
            position -= 1
        } while magnitude > 0
        buffer.advance(digits)
    }

    public mutating func null() {
        separate()
        let text: StaticString = "null"
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func bool(_ value: Bool) {
        separate()
        let text: StaticString = value ? "true" : "false"
        put(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A UUID as CareKit writes it: uppercase, in quotes (without Foundation's formatter).
    public mutating func uuid(_ value: UUID) {
        separate()
        buffer.reserve(38)
        @inline(__always) func hex(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x37 + nibble }
        let out = buffer.end
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
        buffer.advance(38)
    }
}
