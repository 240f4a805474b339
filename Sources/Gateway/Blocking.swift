import Foundation

/// Store work off Swift's cooperative threads: SQLite blocks, and a blocked cooperative thread
/// stalls every task scheduled on it (the server has as many as cores).
public enum Blocking {
    /// Runs `body` on a dispatch thread and returns, or throws, what it does.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// Runs `body` on a dispatch thread and returns what it gives.
    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async { continuation.resume(returning: body()) }
        }
    }
}
