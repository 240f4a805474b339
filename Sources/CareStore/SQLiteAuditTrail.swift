import Foundation
import GRDB

/// The audit trail in SQLite: `audit_entry` in chain order, `audit_head` the last append. The
/// store's one writer chains each append to the last.
extension SQLiteCarePlanStore: AuditTrail {
    static func registerAuditTrail(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v12-audit-trail") { db in
            try db.execute(sql: """
                CREATE TABLE audit_entry (
                    sequence INTEGER PRIMARY KEY NOT NULL,
                    recorded REAL NOT NULL,
                    actor_kind TEXT NOT NULL,
                    actor_id TEXT NOT NULL,
                    action TEXT NOT NULL,
                    event TEXT NOT NULL,
                    patient_id TEXT,
                    entities TEXT NOT NULL,
                    source TEXT,
                    outcome TEXT NOT NULL,
                    detail TEXT,
                    previous_hash TEXT NOT NULL,
                    hash TEXT NOT NULL
                );
                CREATE INDEX audit_entry_patient ON audit_entry(patient_id, sequence);
                CREATE TABLE audit_head (one INTEGER PRIMARY KEY CHECK (one = 1), sequence INTEGER NOT NULL, hash TEXT NOT NULL);
                CREATE TABLE audit_anchor (one INTEGER PRIMARY KEY CHECK (one = 1), sequence INTEGER NOT NULL, hash TEXT NOT NULL);
                """)
        }
    }

    public func record(_ entries: [AuditEntry], queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)?) throws(StoreError) {
        guard !entries.isEmpty else { return }
        try writeDatabase { db in
            let head = try Row.fetchOne(db, sql: "SELECT sequence, hash FROM audit_head").map { (sequence: $0[0] as Int64, hash: $0[1] as String) }
            let chained = AuditChain.chained(entries, after: head)
            // Compiled once and kept: the server appends every quarter second.
            let insert = try db.cachedStatement(sql: """
                INSERT INTO audit_entry (sequence, recorded, actor_kind, actor_id, action, event, patient_id, entities, source, outcome, detail, previous_hash, hash)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            for row in chained {
                let e = row.entry
                try insert.execute(arguments: [row.sequence, e.recorded.timeIntervalSinceReferenceDate, e.actor.kind.rawValue, e.actor.id, e.action.rawValue, e.event,
                                     e.patientID, AuditRows.entities(e.entities), e.source, e.outcome.rawValue, e.detail, row.previousHash, row.hash])
            }
            if let queueing { try Self.enqueue(chained.map(queueing), in: db) }
            let last = chained[chained.count - 1]
            try db.execute(sql: "INSERT INTO audit_head (one, sequence, hash) VALUES (1, ?, ?) ON CONFLICT (one) DO UPDATE SET sequence = excluded.sequence, hash = excluded.hash",
                           arguments: [last.sequence, last.hash])
        }
    }

    public func auditEntries(_ query: AuditQuery) throws(StoreError) -> [ChainedAuditEntry] {
        try readDatabase { db in
            var conditions: [String] = [], arguments: StatementArguments = []
            if let patient = query.patientID { conditions.append("patient_id = ?"); arguments += [patient] }
            if let actor = query.actorID { conditions.append("actor_id = ?"); arguments += [actor] }
            if let since = query.since { conditions.append("recorded >= ?"); arguments += [since.timeIntervalSinceReferenceDate] }
            if let until = query.until { conditions.append("recorded < ?"); arguments += [until.timeIntervalSinceReferenceDate] }
            if let after = query.after { conditions.append("sequence > ?"); arguments += [after] }
            arguments += [query.limit]
            let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ")
            // A page after a sequence reads forwards; otherwise the last `limit`, newest last.
            let order = query.after == nil ? "DESC" : "ASC"
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM audit_entry \(filter) ORDER BY sequence \(order) LIMIT ?", arguments: arguments).map(Self.auditEntry)
            return query.after == nil ? rows.reversed() : rows
        }
    }

    public func auditChain(from sequence: Int64, limit: Int) throws(StoreError) -> [ChainedAuditEntry] {
        try readDatabase { db in
            try Row.fetchAll(db, sql: "SELECT * FROM audit_entry WHERE sequence >= ? ORDER BY sequence LIMIT ?", arguments: [sequence, limit]).map(Self.auditEntry)
        }
    }

    public func auditHead() throws(StoreError) -> (sequence: Int64, hash: String)? {
        try readDatabase { db in try Row.fetchOne(db, sql: "SELECT sequence, hash FROM audit_head").map { ($0[0] as Int64, $0[1] as String) } }
    }

    public func auditAnchor() throws(StoreError) -> (sequence: Int64, hash: String)? {
        try readDatabase { db in try Row.fetchOne(db, sql: "SELECT sequence, hash FROM audit_anchor").map { ($0[0] as Int64, $0[1] as String) } }
    }

    public func dropAuditPrefix(through sequence: Int64) throws(StoreError) -> Int {
        try writeDatabase { db in
            guard let hash = try String.fetchOne(db, sql: "SELECT hash FROM audit_entry WHERE sequence = ?", arguments: [sequence]) else { return 0 }
            try db.execute(sql: "DELETE FROM audit_entry WHERE sequence <= ?", arguments: [sequence])
            let dropped = db.changesCount
            try db.execute(sql: "INSERT INTO audit_anchor (one, sequence, hash) VALUES (1, ?, ?) ON CONFLICT (one) DO UPDATE SET sequence = excluded.sequence, hash = excluded.hash",
                           arguments: [sequence, hash])
            return dropped
        }
    }

    static func auditEntry(_ row: Row) throws -> ChainedAuditEntry {
        let entry = try AuditRows.entry(recorded: Date(timeIntervalSinceReferenceDate: row["recorded"]), actorKind: row["actor_kind"], actorID: row["actor_id"],
                                        action: row["action"], event: row["event"], patientID: row["patient_id"], entities: row["entities"],
                                        source: row["source"], outcome: row["outcome"], detail: row["detail"])
        return ChainedAuditEntry(sequence: row["sequence"], entry: entry, previousHash: row["previous_hash"], hash: row["hash"])
    }
}

/// An entry's columns as both backends keep them.
public enum AuditRows {
    /// The entities as one column: one per line (an id has no line break).
    public static func entities(_ entities: [String]) -> String { entities.joined(separator: "\n") }

    /// An entry from its columns; a kind, action or outcome the gateway does not write is an error naming it.
    public static func entry(recorded: Date, actorKind: String, actorID: String, action: String, event: String, patientID: String?, entities: String,
                             source: String?, outcome: String, detail: String?) throws(StoreError) -> AuditEntry {
        guard let kind = AuditEntry.ActorKind(rawValue: actorKind), let act = AuditEntry.Action(rawValue: action),
              let end = AuditEntry.Outcome(rawValue: outcome) else {
            throw .database(path: "audit_entry", message: "an entry with actor kind '\(actorKind)', action '\(action)', outcome '\(outcome)': not the gateway's")
        }
        return AuditEntry(recorded: recorded, actor: .init(kind: kind, id: actorID), action: act, event: event, patientID: patientID,
                          entities: entities.isEmpty ? [] : entities.components(separatedBy: "\n"), source: source, outcome: end, detail: detail)
    }
}
