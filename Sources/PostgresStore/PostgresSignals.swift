import CareStore
import Foundation
import PostgresNIO

/// `NOTIFY` to announce, a connection of its own per listener to hear.
extension PostgresCarePlanStore: StoreSignals {
    public func announce(_ signal: StoreSignal) throws(StoreError) {
        try session { try $0.execute("NOTIFY \(signal.rawValue)") }
    }

    public func listen(_ signal: StoreSignal, heard: @escaping @Sendable () -> Void) async {
        var first = true
        while !Task.isCancelled {
            do {
                let id = database.nextID.withLockedValue { $0 += 1; return $0 }
                let connection = try await PostgresConnection.connect(on: database.group.next(), configuration: database.configuration,
                                                                      id: id, logger: database.logger)
                defer { Task { try? await connection.close() } }
                let notifications = try await connection.listen(signal.rawValue)
                // Listening again after a lost connection: what was announced meanwhile is not lost.
                if !first { heard() }
                first = false
                for try await _ in notifications { heard() }
            } catch {
                if Task.isCancelled { return }
                database.logger.warning("listening for \(signal.rawValue) failed; trying again in a second", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(nanoseconds: 1_000_000_000)
        }
    }
}
