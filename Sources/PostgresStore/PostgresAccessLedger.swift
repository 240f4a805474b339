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

    /// One statement takes the lowest slot not held. Two calls taking the same free slot at
    /// once: the second finds it taken (nothing returned) and tries again on a fresh snapshot,
    /// which shows the first's slot; a try that finds every slot held returns nil.
    public func enterCall(key: String, limit: Int, lease: TimeInterval, now: Date) throws(StoreError) -> CallSlot? {
        let holder = UUID(), until = now.addingTimeInterval(lease).storeSeconds
        for _ in 0..<limit {
            let taken = try session { session in
                try session.query("""
                    INSERT INTO call_slot (key, slot, holder, lease_until)
                    SELECT \(key), s, \(holder), \(until) FROM generate_series(0, \(limit - 1)) s
                    WHERE NOT EXISTS (SELECT 1 FROM call_slot c WHERE c.key = \(key) AND c.slot = s AND c.lease_until > \(now.storeSeconds))
                    ORDER BY s LIMIT 1
                    ON CONFLICT (key, slot) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until
                        WHERE call_slot.lease_until <= \(now.storeSeconds)
                    RETURNING slot
                    """).first.map { try $0.decode(Int.self) }
            }
            if let taken { return CallSlot(key: key, number: taken, holder: holder) }
            if try allHeld(key: key, limit: limit, now: now) { return nil }
        }
        return nil
    }

    func allHeld(key: String, limit: Int, now: Date) throws(StoreError) -> Bool {
        try session { session in
            try session.query("SELECT count(*) FROM call_slot WHERE key = \(key) AND lease_until > \(now.storeSeconds)").first
                .map { try $0.decode(Int.self) } ?? 0 >= limit
        }
    }

    public func leaveCall(_ slot: CallSlot) throws(StoreError) {
        try session { try $0.run("DELETE FROM call_slot WHERE key = \(slot.key) AND slot = \(slot.number) AND holder = \(slot.holder)") }
    }
}
