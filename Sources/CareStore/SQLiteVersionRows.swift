import Foundation
import GRDB
import GRDBSQLite
import JSON

/// The version rows of a SQLite store within one write transaction, for `VersionWriter`. Device
/// pushes and bulk imports run through here once per version, so the hot statements are
/// prepared once per connection and stepped through SQLite's C API.
final class SQLiteVersionRows: VersionRows {
    let store: SQLiteCarePlanStore
    let db: Database
    /// The version insert, taken from the connection's statement cache on first use in this write call.
    private var versionInsert: Statement?
    /// The revision of the next version inserted: SQLite numbers every version of the store in
    /// turn, and its one writer at a time makes the numbers follow the commits.
    private var nextRevision: Int?

    init(store: SQLiteCarePlanStore, db: Database) {
        self.store = store
        self.db = db
    }

    /// One clock for the whole store: the next number is at least `revision`.
    public func raiseClock(of patientID: String?, to revision: Int) throws {
        nextRevision = max(try nextRevision ?? store.nextRevision(db), revision)
    }

    func patient(of uuid: UUID, kind: String?) throws -> String?? {
        let row: Row? = if let kind {
            try Row.fetchOne(db.cachedStatement(sql: "SELECT patient_id FROM entity_version WHERE uuid = ? AND kind = ?"), arguments: [uuid, kind])
        } else {
            try Row.fetchOne(db.cachedStatement(sql: "SELECT patient_id FROM entity_version WHERE uuid = ?"), arguments: [uuid])
        }
        guard let row else { return nil }
        return .some(row[0] as String?)
    }

    /// Every outcome a device pushes reads its task: stepped through SQLite's C API, the JSON
    /// read in place and decoded only when no decoded copy is at hand.
    func taskVersion(_ uuid: UUID, known: CareTask?) throws -> StoredTask? {
        let p = try db.cachedStatement(sql: """
            SELECT superseded_date, deleted_date, revision, json, patient_id FROM entity_version WHERE uuid = ? AND kind = 'task'
            """).sqliteStatement
        defer { sqlite3_reset(p) }
        guard try SQLiteBinding.step(p, uuid: uuid, db: db) else { return nil }
        let task: CareTask
        if let known {
            task = known
        } else {
            let committed = Int(sqlite3_column_int64(p, 2)) <= (store.writeStart.withLock { $0 } ?? 0)
            let read = try store.decoded(uuid: uuid, kind: "task", caching: committed) { try JSONValue.parse(Array(SQLiteBinding.bytes(p, 3))) }
            guard case .task(let read) = read else { return nil }
            task = read
        }
        func date(_ column: Int32) -> Date? {
            sqlite3_column_type(p, column) == SQLITE_NULL ? nil : Date(timeIntervalSinceReferenceDate: sqlite3_column_double(p, column))
        }
        return StoredTask(task: task, superseded: date(0), deleted: date(1) != nil, patientID: SQLiteBinding.text(p, 4))
    }

    /// The current versions (tips) of many entities of one kind, in one query (the identities go
    /// in as one JSON array, joined through `json_each`, so there is one statement however many).
    func tips(kind: String, _ identities: [VersionIdentity]) throws -> [VersionIdentity: [VersionTip]] {
        var result: [VersionIdentity: [VersionTip]] = [:]
        guard !identities.isEmpty else { return result }
        let list = JSONValue.array(identities.map { .array([.string($0.id), $0.patientID.map(JSONValue.string) ?? .null]) }).serialized()
        // The kind written in, as `VersionSelect` writes it: one statement per kind, not prepared again per kind.
        let literal = VersionSelect.literal(kind)
        let statement = try db.cachedStatement(sql: """
            SELECT v.id, v.patient_id, v.uuid, v.effective_date, v.deleted_date
            FROM json_each(?) AS wanted CROSS JOIN entity_version v
              ON v.kind = \(literal ?? "?") AND v.id = wanted.value ->> 0 AND v.patient_id IS wanted.value ->> 1 AND v.next_uuids IS NULL
            """)  // CROSS JOIN keeps the wanted ids outside: the planner otherwise walked every version of the kind for each id
        for row in try Row.fetchAll(statement, arguments: literal == nil ? [list, kind] : [list]) {
            result[VersionIdentity(id: row["id"], patientID: row["patient_id"]), default: []]
                .append(VersionTip(uuid: row["uuid"], effective: Date(timeIntervalSinceReferenceDate: row["effective_date"]),
                                   deleted: (row["deleted_date"] as Double?) != nil))
        }
        return result
    }

    /// Inserts one version row (and its tags), turning a constraint failure into the rule it breaks.
    func insert(_ entity: CareEntity, patientID: String?, eventStart: Date?,
                successors: [(uuid: UUID, effective: Date)], stamp: String?) throws {
        let revision = try nextRevision ?? store.nextRevision(db)
        nextRevision = revision + 1
        do {
            try insertRow(entity, patientID: patientID, revision: revision, eventStart: eventStart, successors: successors, stamp: stamp)
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            // Which rule: the message names the unique index's columns (a trigger gives its own).
            let message = error.message ?? "a constraint failed"
            if case .outcome(let o) = entity, message.contains("entity_version.occurrence") {
                throw StoreError.duplicateOutcome(taskID: o.taskUUID.uuidString, occurrence: o.taskOccurrenceIndex)
            }
            if message.contains("entity_version.uuid") {
                throw StoreError.invalid(entity.entityType, id: entity.version.id, reason: "version \(entity.version.uuid.uuidString) is already in the store")
            }
            throw StoreError.invalid(entity.entityType, id: entity.version.id, reason: "the database refused it: \(message)")
        }
    }

    private func insertRow(_ entity: CareEntity, patientID: String?, revision: Int, eventStart: Date?,
                           successors: [(uuid: UUID, effective: Date)], stamp: String?) throws {
        let json = VersionWriter<SQLiteVersionRows>.storedJSON(entity)
        let occurrence: Int? = if case .outcome(let o) = entity { o.taskOccurrenceIndex } else { nil }
        // Prepared once per connection (GRDB's statement cache: a push of a day's outcomes paid a
        // preparation each), kept for this write call, and bound straight through SQLite's C
        // API: this runs once per version in bulk writes.
        let statement: Statement
        if let prepared = versionInsert {
            statement = prepared
        } else {
            statement = try db.cachedStatement(sql: """
                INSERT INTO entity_version (uuid, kind, id, effective_date, deleted_date, revision, remote_id, group_identifier,
                                            parent_uuid, occurrence, event_start, json, next_uuids, superseded_date, patient_id, stamp)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
            versionInsert = statement
        }
        let p = statement.sqliteStatement
        sqlite3_reset(p)
        let (uuid, tags) = entity.withVersion { version in
            SQLiteBinding.bind(p, 1, version.uuid)
            SQLiteBinding.bind(p, 3, version.id)
            sqlite3_bind_double(p, 4, version.effectiveDate.timeIntervalSinceReferenceDate)
            SQLiteBinding.bind(p, 5, version.deletedDate?.timeIntervalSinceReferenceDate)
            SQLiteBinding.bind(p, 7, version.remoteID)
            SQLiteBinding.bind(p, 8, version.groupIdentifier)
            return (version.uuid, version.tags)
        }
        SQLiteBinding.bind(p, 2, kind: entity.entityType)
        sqlite3_bind_int64(p, 6, Int64(revision))
        if let parent = VersionWriter<SQLiteVersionRows>.parentUUID(entity)?.uuid { SQLiteBinding.bind(p, 9, parent) } else { sqlite3_bind_null(p, 9) }
        if let occurrence { sqlite3_bind_int64(p, 10, Int64(occurrence)) } else { sqlite3_bind_null(p, 10) }
        SQLiteBinding.bind(p, 11, eventStart?.timeIntervalSinceReferenceDate)
        // Successors stored before this version (a merge out of order) make it no tip from the start.
        SQLiteBinding.bind(p, 13, successors.isEmpty ? nil : successors.map(\.uuid.uuidString).joined(separator: ","))
        SQLiteBinding.bind(p, 14, successors.map(\.effective).min()?.timeIntervalSinceReferenceDate)
        SQLiteBinding.bind(p, 15, patientID)
        // A device's version carries its record's vector.
        SQLiteBinding.bind(p, 16, stamp)
        // The JSON is bound without a copy: it outlives the step, and the binding is cleared after.
        let (code, failure) = json.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                sqlite3_bind_text(p, 12, chars.baseAddress, Int32(chars.count), nil)
                let code = sqlite3_step(p)
                // The message before the reset and the binding clear it.
                let failure = code == SQLITE_DONE ? nil : String(cString: sqlite3_errmsg(db.sqliteConnection))
                sqlite3_reset(p)
                sqlite3_bind_null(p, 12)
                return (code, failure)
            }
        }
        if let failure {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: failure)
        }
        if let tags {
            let tagStatement = try db.cachedStatement(sql: "INSERT OR IGNORE INTO entity_tag (tag, uuid) VALUES (?, ?)")
            for tag in tags { try tagStatement.execute(arguments: [tag, uuid]) }
        }
    }

    func link(previous: UUID, next: UUID, nextEffective: Date) throws {
        let statement = try db.cachedStatement(sql: """
            UPDATE entity_version
            SET next_uuids = CASE WHEN next_uuids IS NULL THEN ? ELSE next_uuids || ',' || ? END,
                superseded_date = MIN(COALESCE(superseded_date, ?), ?)
            WHERE uuid = ?
            """)
        try statement.execute(arguments: [next.uuidString, next.uuidString, nextEffective.timeIntervalSinceReferenceDate,
                             nextEffective.timeIntervalSinceReferenceDate, previous])
    }

    func liveOutcomes(ofTask taskID: String, patientID: String?, from start: Date) throws -> (count: Int, latest: Date?) {
        let row = try Row.fetchOne(db, sql: """
            SELECT COUNT(*) AS n, MAX(o.event_start) AS latest FROM entity_version o
            WHERE o.kind = 'outcome' AND o.next_uuids IS NULL AND o.deleted_date IS NULL AND o.event_start >= ?
              AND o.parent_uuid IN (SELECT uuid FROM entity_version WHERE kind = 'task' AND id = ? AND patient_id IS ?)
            """, arguments: [start.timeIntervalSinceReferenceDate, taskID, patientID])
        return ((row?["n"] as Int?) ?? 0, (row?["latest"] as Double?).map(Date.init(timeIntervalSinceReferenceDate:)))
    }

    func version(_ uuid: UUID) throws -> CareEntity? { try store.fetchEntity(uuid: uuid, db: db) }

    /// Asked for every version a device pushes: stepped through the C API.
    func contains(_ uuid: UUID) throws -> Bool {
        try SQLiteBinding.hasRow(db.cachedStatement(sql: "SELECT 1 FROM entity_version WHERE uuid = ?"), uuid: uuid, db: db)
    }

    func effectiveDate(of uuid: UUID) throws -> Date? {
        try Double.fetchOne(db.cachedStatement(sql: "SELECT effective_date FROM entity_version WHERE uuid = ?"), arguments: [uuid])
            .map(Date.init(timeIntervalSinceReferenceDate:))
    }

    func processID() throws -> UUID { try store.processID(db: db) }

    func bindProcesses(_ processes: [UUID], to patientID: String) throws {
        let bind = try db.cachedStatement(sql: "INSERT OR IGNORE INTO sync_process (process, patient_id) VALUES (?, ?)")
        for process in processes { try bind.execute(arguments: [process.uuidString, patientID]) }
    }

    func devicesKnowledge(of patientID: String) throws -> KnowledgeVector? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT vector FROM patient_knowledge WHERE patient_id = ?"), arguments: [patientID])
            .map(SQLiteCarePlanStore.vector)
    }

    func saveDevicesKnowledge(_ vector: KnowledgeVector, of patientID: String) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO patient_knowledge (patient_id, vector) VALUES (?, ?)").execute(arguments: [patientID, vector.json])
    }
}
