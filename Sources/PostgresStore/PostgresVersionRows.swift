import CareStore
import Foundation
import JSON
import NIOCore
import PostgresNIO

/// The version rows of a PostgreSQL store within one write transaction, for `VersionWriter`:
/// the same rules as SQLite's store, on `entity_version`. A version's number comes from its
/// patient's clock row, taken (and so locked) until the transaction ends: two instances writing
/// one patient take turns, and the patient's numbers follow the order their writes commit in.
public final class PostgresVersionRows: VersionRows {
    let session: PostgresSession
    /// The patients whose clock rows this transaction holds (the empty key: no patient's).
    private var locked: Set<String> = []
    /// Versions inserted by this write and not yet sent (see `flush`), in writing order.
    private var pending: [PendingVersion] = []
    /// Held back at most: a bulk write's statements stay a few megabytes.
    static let pendingLimit = 2_000

    init(session: PostgresSession) {
        self.session = session
    }

    /// Takes the clock rows of these patients (making those missing), in one order so two
    /// writers never wait on each other, before a write reads what it depends on: a second
    /// instance writing the patient waits for this commit, then reads what it wrote (each of
    /// PostgreSQL's `READ COMMITTED` statements sees what committed before it started).
    func lockClocks(_ patients: some Sequence<String?>) throws {
        let wanted = Set(patients.map { $0 ?? "" }).subtracting(locked).sorted()
        guard !wanted.isEmpty else { return }
        try run("""
            INSERT INTO patient_clock (patient_id, clock) SELECT p, 0 FROM unnest(\(wanted)::text[]) AS p ORDER BY p
            ON CONFLICT (patient_id) DO UPDATE SET clock = patient_clock.clock
            """)
        locked.formUnion(wanted)
    }

    /// The patient's next number is at least `revision`.
    public func raiseClock(of patientID: String?, to revision: Int) throws {
        try run("""
            INSERT INTO patient_clock (patient_id, clock) VALUES (\(patientID ?? ""), \(revision - 1))
            ON CONFLICT (patient_id) DO UPDATE SET clock = GREATEST(patient_clock.clock, EXCLUDED.clock)
            """)
        locked.insert(patientID ?? "")
    }

    /// After a rollback to a savepoint, the locks taken since are gone with it (and what a
    /// failed write held back).
    func forgetLocks() {
        locked = []
        pending = []
    }

    /// A statement of this write's: the versions held back go in first, so that it sees them.
    private func query(_ query: PostgresQuery) throws -> [PostgresRow] {
        try flush()
        return try session.query(query)
    }

    private func run(_ query: PostgresQuery) throws {
        try flush()
        try session.run(query)
    }

    public func patient(of uuid: UUID, kind: String?) throws -> String?? {
        let rows = if let kind {
            try query("SELECT patient_id FROM entity_version WHERE uuid = \(uuid) AND kind = \(kind)")
        } else {
            try query("SELECT patient_id FROM entity_version WHERE uuid = \(uuid)")
        }
        guard let row = rows.first else { return nil }
        return .some(try row.decode(String?.self))
    }

    public func taskVersion(_ uuid: UUID, known: CareTask?) throws -> StoredTask? {
        guard let row = try query("""
            SELECT superseded_date, deleted_date, patient_id, CASE WHEN \(known == nil) THEN json ELSE ''::bytea END
            FROM entity_version WHERE uuid = \(uuid) AND kind = 'task'
            """).first else { return nil }
        return try Self.storedTask(row.decode((Double?, Double?, String?, ByteBuffer).self), known: known)
    }

    /// A task version from its superseded and deleted dates, patient and JSON (decoded unless `known`).
    static func storedTask(_ c: (superseded: Double?, deleted: Double?, patient: String?, json: ByteBuffer), known: CareTask?) throws -> StoredTask? {
        let task: CareTask
        if let known {
            task = known
        } else {
            guard case .task(let decoded) = try CareKitJSON.decode(storedKind: "task", value: JSONValue.parse(Array(buffer: c.json))) else { return nil }
            task = decoded
        }
        return StoredTask(task: task, superseded: Date(storeSeconds: c.superseded), deleted: c.deleted != nil, patientID: c.patient)
    }

    public func tips(kind: String, _ identities: [VersionIdentity]) throws -> [VersionIdentity: [VersionTip]] {
        var result: [VersionIdentity: [VersionTip]] = [:]
        guard !identities.isEmpty else { return result }
        try lockClocks(identities.map(\.patientID))
        // The wanted (id, patient) pairs as two arrays, each pair one look-up in the identity index.
        let ids = identities.map(\.id)
        let patients = identities.map { $0.patientID ?? "" }
        let hasPatient = identities.map { $0.patientID != nil }
        for row in try query("""
            SELECT v.id, v.patient_id, v.uuid, v.effective_date, v.deleted_date
            FROM unnest(\(ids)::text[], \(patients)::text[], \(hasPatient)::bool[]) AS wanted(id, patient_id, has_patient)
            JOIN entity_version v ON v.kind = \(kind) AND v.id = wanted.id
              AND v.patient_id IS NOT DISTINCT FROM (CASE WHEN wanted.has_patient THEN wanted.patient_id END)
            WHERE v.next_uuids IS NULL
            """) {
            let (id, patient, uuid, effective, deleted) = try row.decode((String, String?, UUID, Double, Double?).self)
            result[VersionIdentity(id: id, patientID: patient), default: []]
                .append(VersionTip(uuid: uuid, effective: Date(timeIntervalSinceReferenceDate: effective), deleted: deleted != nil))
        }
        return result
    }

    /// Holds a version back until the write ends (`flush`) or reads: a write's versions then go
    /// in with one statement per patient (a device's record, a patient's import) instead of a
    /// round trip each.
    public func insert(_ entity: CareEntity, patientID: String?, eventStart: Date?,
                successors: [(uuid: UUID, effective: Date)], stamp: String?) throws {
        pending.append(PendingVersion(entity, patientID: patientID, eventStart: eventStart, successors: successors, stamp: stamp))
        if pending.count >= Self.pendingLimit { try flush() }
    }

    /// Inserts the versions held back, in order: each run of one patient's versions in one
    /// statement that moves the patient's clock row by the run's length (taking it until the
    /// transaction ends) and numbers the versions from where it stood. A version the gateway
    /// writes (no `stamp`: not a device's) also moves the row's `gateway_revision`, from which
    /// the patient's knowledge is read, to the last such version's number.
    public func flush() throws {
        guard !pending.isEmpty else { return }
        let versions = pending
        pending = []
        var start = versions.startIndex
        while start < versions.endIndex {
            var end = start + 1
            while end < versions.endIndex && versions[end].patientID == versions[start].patientID { end += 1 }
            try insertRun(versions[start..<end])
            start = end
        }
        let tagged = versions.flatMap { version in version.tags.map { (tag: $0, uuid: version.uuid) } }
        if !tagged.isEmpty {
            try session.run("""
                INSERT INTO entity_tag (tag, uuid) SELECT * FROM unnest(\(tagged.map(\.tag))::text[], \(tagged.map(\.uuid))::uuid[])
                ON CONFLICT DO NOTHING
                """)
        }
    }

    public func discardPending() { pending = [] }

    /// One patient's versions in one statement (see `flush`); a refusal names the version it is for.
    private func insertRun(_ run: ArraySlice<PendingVersion>) throws {
        let patientID = run[run.startIndex].patientID
        let count = run.count
        let lastGateway = run.lastIndex { $0.stamp == nil }.map { $0 - run.startIndex + 1 } ?? 0
        let inserted: Result<Int, StoreError> = Result { () throws(StoreError) -> Int in
            try session.run("""
                WITH numbered AS (
                    INSERT INTO patient_clock (patient_id, clock, gateway_revision) VALUES (\(patientID ?? ""), \(count), \(lastGateway))
                    ON CONFLICT (patient_id) DO UPDATE SET clock = patient_clock.clock + \(count),
                        gateway_revision = CASE WHEN \(lastGateway) = 0 THEN patient_clock.gateway_revision ELSE patient_clock.clock + \(lastGateway) END
                    RETURNING clock - \(count) AS base)
                INSERT INTO entity_version (uuid, kind, id, patient_id, revision, effective_date, deleted_date, next_uuids, superseded_date,
                                            remote_id, group_identifier, parent_uuid, occurrence, event_start, stamp, json)
                SELECT u.uuid, u.kind, u.id, \(patientID), numbered.base + u.n, u.effective,
                       CASE WHEN (u.nulls & 1) = 0 THEN u.deleted END,
                       CASE WHEN (u.nulls & 2) = 0 THEN string_to_array(u.next, ',')::uuid[] END,
                       CASE WHEN (u.nulls & 2) = 0 THEN u.superseded END,
                       CASE WHEN (u.nulls & 4) = 0 THEN u.remote END, CASE WHEN (u.nulls & 8) = 0 THEN u.grp END,
                       CASE WHEN (u.nulls & 16) = 0 THEN u.parent END, CASE WHEN (u.nulls & 32) = 0 THEN u.occurrence END,
                       CASE WHEN (u.nulls & 64) = 0 THEN u.event_start END, CASE WHEN (u.nulls & 128) = 0 THEN u.stamp END, u.json
                FROM numbered, unnest(\(run.map(\.uuid))::uuid[], \(run.map(\.kind))::text[], \(run.map(\.id))::text[],
                                      \(run.map(\.effective))::float8[], \(run.map(\.deleted))::float8[], \(run.map(\.next))::text[],
                                      \(run.map(\.superseded))::float8[], \(run.map(\.remoteID))::text[], \(run.map(\.groupIdentifier))::text[],
                                      \(run.map(\.parent))::uuid[], \(run.map(\.occurrence))::int8[], \(run.map(\.eventStart))::float8[],
                                      \(run.map { $0.stamp ?? "" })::text[], \(run.map(\.json))::bytea[], \(run.map(\.nulls))::int8[])
                     WITH ORDINALITY AS u(uuid, kind, id, effective, deleted, next, superseded, remote, grp, parent, occurrence, event_start,
                                          stamp, json, nulls, n)
                ORDER BY u.n
                """)
        }
        if case .failure(let error) = inserted { throw refusal(error, among: run) }
        locked.insert(patientID ?? "")
    }

    /// A refused run's error as the rule one of its versions breaks: the version the message's
    /// key names (a uuid, or an outcome's task and occurrence), else the run's first.
    func refusal(_ error: StoreError, among run: ArraySlice<PendingVersion>) -> StoreError {
        guard case .database(_, let message) = error else { return error }
        let text = message.lowercased()
        let named = run.first { version in
            if case .outcome(let o) = version.entity, text.contains("live_outcome_per_occurrence") {
                return text.contains("(\(o.taskUUID.uuidString.lowercased()), \(o.taskOccurrenceIndex))")
            }
            return text.contains(version.uuid.uuidString.lowercased())
        }
        return rule(broken: error, by: (named ?? run[run.startIndex]).entity)
    }

    /// A refused insert as the rule it breaks: the unique index's name says which.
    func rule(broken error: StoreError, by entity: CareEntity) -> StoreError {
        guard PostgresSession.sqlState(error) == "23505", case .database(_, let message) = error else { return error }
        if case .outcome(let o) = entity, message.contains("live_outcome_per_occurrence") {
            return .duplicateOutcome(taskID: o.taskUUID.uuidString, occurrence: o.taskOccurrenceIndex)
        }
        if message.contains("entity_version_uuid_key") {
            return .invalid(entity.entityType, id: entity.version.id, reason: "version \(entity.version.uuid.uuidString) is already in the store")
        }
        return .invalid(entity.entityType, id: entity.version.id, reason: "the database refused it: \(message)")
    }

    public func link(previous: UUID, next: UUID, nextEffective: Date) throws {
        try run("""
            UPDATE entity_version SET next_uuids = array_append(COALESCE(next_uuids, '{}'), \(next)),
                                      superseded_date = LEAST(COALESCE(superseded_date, \(nextEffective.storeSeconds)), \(nextEffective.storeSeconds))
            WHERE uuid = \(previous)
            """)
    }

    public func liveOutcomes(ofTask taskID: String, patientID: String?, from start: Date) throws -> (count: Int, latest: Date?) {
        guard let row = try query("""
            SELECT count(*), max(o.event_start) FROM entity_version o
            WHERE o.kind = 'outcome' AND o.next_uuids IS NULL AND o.deleted_date IS NULL AND o.event_start >= \(start.storeSeconds)
              AND o.parent_uuid IN (SELECT uuid FROM entity_version WHERE kind = 'task' AND id = \(taskID) AND patient_id IS NOT DISTINCT FROM \(patientID))
            """).first else { return (0, nil) }
        let (count, latest) = try row.decode((Int, Double?).self)
        return (count, Date(storeSeconds: latest))
    }

    public func version(_ uuid: UUID) throws -> CareEntity? {
        guard let row = try query("SELECT kind, json, next_uuids FROM entity_version WHERE uuid = \(uuid)").first else { return nil }
        return try PostgresVersionRows.entity(row)
    }

    /// A version from its row's kind, JSON and successors.
    static func entity(_ row: PostgresRow) throws -> CareEntity {
        let (kind, json, next) = try row.decode((String, ByteBuffer, [UUID]?).self)
        var entity = try CareKitJSON.decode(storedKind: kind, value: JSONValue.parse(Array(buffer: json)))
        if let next { entity.version.nextVersionUUIDs = next }
        return entity
    }

    public func contains(_ uuid: UUID) throws -> Bool {
        try !query("SELECT 1 FROM entity_version WHERE uuid = \(uuid)").isEmpty
    }

    public func containing(_ uuids: [UUID]) throws -> Set<UUID> {
        guard !uuids.isEmpty else { return [] }
        return Set(try query("SELECT uuid FROM entity_version WHERE uuid = ANY(\(uuids))").map { try $0.decode(UUID.self) })
    }

    public func taskVersions(_ uuids: [UUID]) throws -> [UUID: StoredTask] {
        guard !uuids.isEmpty else { return [:] }
        var found: [UUID: StoredTask] = [:]
        for row in try query("""
            SELECT uuid, superseded_date, deleted_date, patient_id, json FROM entity_version WHERE uuid = ANY(\(uuids)) AND kind = 'task'
            """) {
            let (uuid, superseded, deleted, patient, json) = try row.decode((UUID, Double?, Double?, String?, ByteBuffer).self)
            found[uuid] = try Self.storedTask((superseded, deleted, patient, json), known: nil)
        }
        return found
    }

    public func effectiveDate(of uuid: UUID) throws -> Date? {
        try query("SELECT effective_date FROM entity_version WHERE uuid = \(uuid)").first
            .map { Date(timeIntervalSinceReferenceDate: try $0.decode(Double.self)) }
    }

    public func processID() throws -> UUID {
        guard let text = try query("SELECT value FROM store_meta WHERE key = 'processID'").first.map({ try $0.decode(String.self) }),
              let id = UUID(uuidString: text) else {
            throw StoreError.database(path: session.database.location.description, message: "the store has no sync process id")
        }
        return id
    }

    public func bindProcesses(_ processes: [UUID], to patientID: String) throws {
        guard !processes.isEmpty else { return }
        try run("""
            INSERT INTO sync_process (process, patient_id) SELECT p, \(patientID) FROM unnest(\(processes)::uuid[]) AS p ON CONFLICT DO NOTHING
            """)
    }

    public func devicesKnowledge(of patientID: String) throws -> KnowledgeVector? {
        try lockClocks([patientID])
        return try Self.devicesKnowledge(of: patientID, session: session)
    }

    /// The patient's devices' knowledge as stored (a read: no lock taken).
    static func devicesKnowledge(of patientID: String, session: PostgresSession) throws -> KnowledgeVector? {
        try session.query("SELECT vector FROM patient_knowledge WHERE patient_id = \(patientID)").first
            .map { try KnowledgeVector(json: JSONValue.parse(try $0.decode(String.self))) }
    }

    public func saveDevicesKnowledge(_ vector: KnowledgeVector, of patientID: String) throws {
        try run("""
            INSERT INTO patient_knowledge (patient_id, vector) VALUES (\(patientID), \(vector.json))
            ON CONFLICT (patient_id) DO UPDATE SET vector = EXCLUDED.vector
            """)
    }
}

extension PostgresCarePlanStore {
    /// Runs the store's write rules in one transaction on this database: committed when `body`
    /// returns, rolled back when it throws.
    public func writeVersions<T>(_ body: (VersionWriter<PostgresVersionRows>) throws -> T) throws -> T {
        try database.transaction { session in try body(VersionWriter(rows: PostgresVersionRows(session: session))) }
    }
}

/// A version `PostgresVersionRows` holds back until its write ends, as its row's columns: a
/// null column holds a placeholder and sets its bit in `nulls` (an array bound for `unnest`
/// has no null elements).
struct PendingVersion {
    let entity: CareEntity
    let patientID: String?
    let uuid: UUID
    let kind: String
    let id: String
    let effective: Double
    let deleted: Double
    /// The successors stored before it (a merge out of order), comma-separated.
    let next: String
    let superseded: Double
    let remoteID: String
    let groupIdentifier: String
    let parent: UUID
    let occurrence: Int
    let eventStart: Double
    let stamp: String?
    let json: ByteBuffer
    let tags: [String]
    /// The null columns, a bit each: 1 deleted, 2 successors (and so superseded), 4 remote id,
    /// 8 group, 16 parent, 32 occurrence, 64 event, 128 stamp.
    let nulls: Int

    init(_ entity: CareEntity, patientID: String?, eventStart: Date?, successors: [(uuid: UUID, effective: Date)], stamp: String?) {
        let version = entity.version
        self.entity = entity
        self.patientID = patientID
        uuid = version.uuid
        kind = VersionWriter<PostgresVersionRows>.kind(entity.entityType)
        id = version.id
        effective = version.effectiveDate.storeSeconds
        deleted = version.deletedDate?.storeSeconds ?? 0
        next = successors.map(\.uuid.uuidString).joined(separator: ",")
        superseded = successors.map(\.effective).min()?.storeSeconds ?? 0
        remoteID = version.remoteID ?? ""
        groupIdentifier = version.groupIdentifier ?? ""
        let parentUUID = VersionWriter<PostgresVersionRows>.parentUUID(entity)?.uuid
        parent = parentUUID ?? UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        let taskOccurrence: Int? = if case .outcome(let o) = entity { o.taskOccurrenceIndex } else { nil }
        occurrence = taskOccurrence ?? 0
        self.eventStart = eventStart?.storeSeconds ?? 0
        self.stamp = stamp
        json = ByteBuffer(bytes: VersionWriter<PostgresVersionRows>.storedJSON(entity))
        tags = version.tags ?? []
        var nulls = 0
        if version.deletedDate == nil { nulls |= 1 }
        if successors.isEmpty { nulls |= 2 }
        if version.remoteID == nil { nulls |= 4 }
        if version.groupIdentifier == nil { nulls |= 8 }
        if parentUUID == nil { nulls |= 16 }
        if taskOccurrence == nil { nulls |= 32 }
        if eventStart == nil { nulls |= 64 }
        if stamp == nil { nulls |= 128 }
        self.nulls = nulls
    }
}
