import Foundation

/// A value shared between threads behind a lock. It is a pthread mutex (Foundation's `NSLock`)
/// rather than `Synchronization.Mutex`, whose futex ThreadSanitizer does not see on Linux: under
/// `Mutex`, TSan reports every contended section as a race (a 15-line program of eight threads
/// appending to a `Mutex`-guarded array gets the same report), so it could check none of them.
///
/// ```swift
/// let counts = Locked([String: Int]())
/// counts.withLock { $0["push", default: 0] += 1 }
/// ```
public final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// A lock around `value`.
    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, holding the lock.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
