import CareStore
import Foundation
import PostgresNIO

/// The audit trail on PostgreSQL: one chain for every instance. Each append takes a
/// transaction-scoped advisory lock, reads the last append (`audit_head`) and chains on it, so
/// instances appending at once take turns and the chain has one order.
extension PostgresCarePlanStore: AuditTrail {
    public func record(_ entries: [AuditEntry], queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)?) throws(StoreError) {
        guard !entries.isEmpty else { return }
        try transaction { session in
            try session.query("SELECT pg_advisory_xact_lock(\(PostgresSchema.auditLockKey))")
            let head = try session.query("SELECT sequence, hash FROM audit_head").first.map { row in
                let (sequence, hash) = try row.decode((Int64, String).self)
                return (sequence: sequence, hash: hash)
            }
            let chained = AuditChain.chained(entries, after: head)
            // Many rows per statement: a second's accesses are a few round trips under the lock, not thousands.
            for start in stride(from: 0, to: chained.count, by: Self.auditRowsPerInsert) {
                try session.run(Self.insert(chained[start..<min(start + Self.auditRowsPerInsert, chained.count)]))
            }
            if let queueing { _ = try Self.enqueue(chained.map(queueing), in: session) }
            let last = chained[chained.count - 1]
            try session.run("""
                INSERT INTO audit_head (one, sequence, hash) VALUES (1, \(last.sequence), \(last.hash))
                ON CONFLICT (one) DO UPDATE SET sequence = excluded.sequence, hash = excluded.hash
                """)
        }
    }

    /// Rows per INSERT: 13 parameters each, well under the protocol's 65,535.
    static let auditRowsPerInsert = 500

    /// One INSERT of chained entries, each row's values bound.
    static func insert(_ rows: ArraySlice<ChainedAuditEntry>) -> PostgresQuery {
        var binds = PostgresBindings(capacity: rows.count * 13)
        var values: [String] = []
        values.reserveCapacity(rows.count)
        for row in rows {
            let e = row.entry
            let first = binds.count
            binds.append(row.sequence)
            binds.append(e.recorded.storeSeconds)
            for text in [e.actor.kind.rawValue, e.actor.id, e.action.rawValue, e.event] { binds.append(text) }
            binds.append(e.patientID)
            binds.append(AuditRows.entities(e.entities))
            binds.append(e.source)
            binds.append(e.outcome.rawValue)
            binds.append(e.detail)
            binds.append(row.previousHash)
            binds.append(row.hash)
            values.append("(" + (first + 1...first + 13).map { "$\($0)" }.joined(separator: ", ") + ")")
        }
        let sql = "INSERT INTO audit_entry (sequence, recorded, actor_kind, actor_id, action, event, patient_id, entities, source, outcome, detail, previous_hash, hash) VALUES "
        return PostgresQuery(unsafeSQL: sql + values.joined(separator: ", "), binds: binds)
    }

    public func auditEntries(_ query: AuditQuery) throws(StoreError) -> [ChainedAuditEntry] {
        try session { session in
            let rows = try session.query("""
                SELECT \(unescaped: Self.auditColumns) FROM audit_entry
                WHERE (\(query.patientID)::text IS NULL OR patient_id = \(query.patientID))
                  AND (\(query.actorID)::text IS NULL OR actor_id = \(query.actorID))
                  AND (\(query.since?.storeSeconds)::double precision IS NULL OR recorded >= \(query.since?.storeSeconds))
                  AND (\(query.until?.storeSeconds)::double precision IS NULL OR recorded < \(query.until?.storeSeconds))
                  AND sequence > \(query.after ?? 0)
                ORDER BY sequence \(unescaped: query.after == nil ? "DESC" : "ASC") LIMIT \(query.limit)
                """).map(Self.auditEntry)
            // A page after a sequence reads forwards; otherwise the last `limit`, newest last.
            return query.after == nil ? rows.reversed() : rows
        }
    }

    public func auditChain(from sequence: Int64, limit: Int) throws(StoreError) -> [ChainedAuditEntry] {
        try session { session in
            try session.query("SELECT \(unescaped: Self.auditColumns) FROM audit_entry WHERE sequence >= \(sequence) ORDER BY sequence LIMIT \(limit)")
                .map(Self.auditEntry)
        }
    }

    public func auditHead() throws(StoreError) -> (sequence: Int64, hash: String)? {
        try session { session in
            try session.query("SELECT sequence, hash FROM audit_head").first.map { row in
                let (sequence, hash) = try row.decode((Int64, String).self)
                return (sequence, hash)
            }
        }
    }

    public func auditAnchor() throws(StoreError) -> (sequence: Int64, hash: String)? {
        try session { session in
            try session.query("SELECT sequence, hash FROM audit_anchor").first.map { row in
                let (sequence, hash) = try row.decode((Int64, String).self)
                return (sequence, hash)
            }
        }
    }

    public func dropAuditPrefix(through sequence: Int64) throws(StoreError) -> Int {
        try transaction { session in
            // Under the append lock: the anchor and the chain's start move together.
            try session.query("SELECT pg_advisory_xact_lock(\(PostgresSchema.auditLockKey))")
            guard let hash = try session.query("SELECT hash FROM audit_entry WHERE sequence = \(sequence)").first.map({ try $0.decode(String.self) }) else { return 0 }
            let dropped = try session.query("DELETE FROM audit_entry WHERE sequence <= \(sequence) RETURNING sequence").count
            try session.run("""
                INSERT INTO audit_anchor (one, sequence, hash) VALUES (1, \(sequence), \(hash))
                ON CONFLICT (one) DO UPDATE SET sequence = excluded.sequence, hash = excluded.hash
                """)
            return dropped
        }
    }

    static let auditColumns = "sequence, recorded, actor_kind, actor_id, action, event, patient_id, entities, source, outcome, detail, previous_hash, hash"

    static func auditEntry(_ row: PostgresRow) throws -> ChainedAuditEntry {
        let (sequence, recorded, kind, actor, action, event, patient, entities, source, outcome, detail, previous, hash) =
            try row.decode((Int64, Double, String, String, String, String, String?, String, String?, String, String?, String, String).self)
        let entry = try AuditRows.entry(recorded: Date(timeIntervalSinceReferenceDate: recorded), actorKind: kind, actorID: actor, action: action, event: event,
                                        patientID: patient, entities: entities, source: source, outcome: outcome, detail: detail)
        return ChainedAuditEntry(sequence: sequence, entry: entry, previousHash: previous, hash: hash)
    }
}
