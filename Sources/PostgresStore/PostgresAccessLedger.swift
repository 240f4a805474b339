import CareStore
import Foundation
import PostgresNIO

/// Attempts and dashboard sessions on PostgreSQL. A client's reservations take turns under a
/// transaction-scoped advisory lock on the client's key, so instances counting one client's
/// attempts at once never both take the last one.
extension PostgresCarePlanStore: AccessLedger {
    public func reserveAttempt(client: String, limit: Int, window: TimeInterval, now: Date) throws(StoreError) -> Int? {
        try transaction { session in
            try session.query("SELECT pg_advisory_xact_lock(\(PostgresSchema.attemptLockSpace), hashtext(\(client)))")
            try session.run("DELETE FROM access_attempt WHERE at <= \(now.addingTimeInterval(-window).storeSeconds)")
            let row = try session.query("SELECT count(*), min(at) FROM access_attempt WHERE client = \(client)").first
            if let (count, oldest) = try row?.decode((Int, Double?).self), count >= limit, let oldest {
                return Self.wait(oldest: Date(timeIntervalSinceReferenceDate: oldest), window: window, now: now)
            }
            try session.run("INSERT INTO access_attempt (client, at) VALUES (\(client), \(now.storeSeconds))")
            return nil
        }
    }

    public func releaseAttempt(client: String) throws(StoreError) {
        try session { session in
            try session.run("DELETE FROM access_attempt WHERE id = (SELECT max(id) FROM access_attempt WHERE client = \(client))")
        }
    }

    public func openSession(idHash: String, csrf: String, now: Date) throws(StoreError) {
        try session { try $0.run("INSERT INTO dashboard_session (id_hash, csrf, last_used) VALUES (\(idHash), \(csrf), \(now.storeSeconds))") }
    }

    public func touchSession(idHash: String, idleTimeout: TimeInterval, now: Date) throws(StoreError) -> String? {
        try transaction { session in
            try session.run("DELETE FROM dashboard_session WHERE last_used <= \(now.addingTimeInterval(-idleTimeout).storeSeconds)")
            return try session.query("""
                UPDATE dashboard_session SET last_used = \(now.storeSeconds) WHERE id_hash = \(idHash) RETURNING csrf
                """).first.map { try $0.decode(String.self) }
        }
    }

    public func closeSession(idHash: String) throws(StoreError) {
        try session { try $0.run("DELETE FROM dashboard_session WHERE id_hash = \(idHash)") }
    }
}
