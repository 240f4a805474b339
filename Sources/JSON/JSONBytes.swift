/// A growable run of bytes, written at its end: what CareGate's JSON writers write into. A plain
/// buffer rather than an array: writers append a byte or a few at a time, and an array's
/// uniqueness and capacity checks on every append were most of their cost.
public struct JSONBytes: ~Copyable, JSONByteSink {
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var written = 0
    @usableFromInline var capacity: Int

    /// An empty buffer with room for `capacity` bytes before it has to grow.
    public init(capacity: Int = 1024) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The number of bytes written.
    public var count: Int { written }

    /// The bytes written, copied out.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: written)) }

    /// The bytes written, for reading in place.
    public func withBytes<R, E: Error>(_ body: (UnsafeBufferPointer<UInt8>) throws(E) -> R) throws(E) -> R {
        try body(UnsafeBufferPointer(start: base, count: written))
    }

    /// Makes room for `n` more bytes, to be written at `end` and counted with `advance`.
    @inlinable @inline(__always)
    public mutating func reserve(_ n: Int) {
        if written + n > capacity { grow(written + n) }
    }

    /// Where the next byte goes; valid for as many bytes as `reserve` made room for.
    @inlinable
    public var end: UnsafeMutablePointer<UInt8> { base + written }

    /// Counts `n` bytes written at `end`.
    @inlinable @inline(__always)
    public mutating func advance(_ n: Int) { written += n }

    /// Appends one byte.
    @inlinable @inline(__always)
    public mutating func append(_ byte: UInt8) {
        reserve(1)
        base[written] = byte
        written += 1
    }

    /// Appends a run of bytes.
    @inlinable @inline(__always)
    public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        reserve(bytes.count)
        (base + written).update(from: source, count: bytes.count)
        written += bytes.count
    }

    /// Appends text known at compile time.
    @inlinable @inline(__always)
    public mutating func append(_ text: StaticString) {
        append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    @usableFromInline
    mutating func grow(_ needed: Int) {
        let newCapacity = max(needed, capacity * 2)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.update(from: base, count: written)
        base.deallocate()
        base = newBase
        capacity = newCapacity
    }
}
