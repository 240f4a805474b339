import Foundation

/// Polls `condition` every 200 ms for up to `seconds`.
func eventually(_ seconds: Double = 30, _ condition: () async throws -> Bool) async throws -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try await condition() { return true }
        try await Task.sleep(nanoseconds: 200_000_000)
    }
    return try await condition()
}
