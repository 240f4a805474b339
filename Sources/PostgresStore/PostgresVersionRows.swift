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
        try session.run("""
            INSERT INTO patient_clock (patient_id, clock) SELECT p, 0 FROM unnest(\(wanted)::text[]) AS p ORDER BY p
            ON CONFLICT (patient_id) DO UPDATE SET clock = patient_clock.clock
            """)
        locked.formUnion(wanted)
    }

    /// The patient's next number is at least `revision`.
    public func raiseClock(of patientID: String?, to revision: Int) throws {
        try session.run("""
            INSERT INTO patient_clock (patient_id, clock) VALUES (\(patientID ?? ""), \(revision - 1))
            ON CONFLICT (patient_id) DO UPDATE SET clock = GREATEST(patient_clock.clock, EXCLUDED.clock)
            """)
        locked.insert(patientID ?? "")
    }

    /// After a rollback to a savepoint, the locks taken since are gone with it.
    func forgetLocks() { locked = [] }

    public func patient(of uuid: UUID, kind: String?) throws -> String?? {
        let rows = if let kind {
            try session.query("SELECT patient_id FROM entity_version WHERE uuid = \(uuid) AND kind = \(kind)")
        } else {
            try session.query("SELECT patient_id FROM entity_version WHERE uuid = \(uuid)")
        }
        guard let row = rows.first else { return nil }
        return .some(try row.decode(String?.self))
    }

    public func taskVersion(_ uuid: UUID, known: CareTask?) throws -> StoredTask? {
        guard let row = try session.query("""
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
        for row in try session.query("""
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

    /// Inserts a version numbered on its patient's clock, in one statement: the clock row is
    /// moved (and so locked until the transaction ends) and its number given to the version. A
    /// version the gateway writes (no `stamp`: not a device's) also moves the row's
    /// `gateway_revision`, from which the patient's knowledge is read.
    public func insert(_ entity: CareEntity, patientID: String?, eventStart: Date?,
                successors: [(uuid: UUID, effective: Date)], stamp: String?) throws {
        var version = entity.version
        let next = version.nextVersionUUIDs
        version.nextVersionUUIDs = []
        let json = CareKitJSON.bytes(next.isEmpty ? entity : VersionWriter<PostgresVersionRows>.replacing(entity, version: version), version: .v4)
        let occurrence: Int? = if case .outcome(let o) = entity { o.taskOccurrenceIndex } else { nil }
        let parent = VersionWriter<PostgresVersionRows>.parentUUID(entity)?.uuid
        let kind = VersionWriter<PostgresVersionRows>.kind(entity.entityType)
        let successorUUIDs: [UUID]? = successors.isEmpty ? nil : successors.map(\.uuid)
        let superseded = successors.map(\.effective).min()?.storeSeconds
        let stamped = stamp != nil
        let inserted: Result<Int, StoreError> = Result { () throws(StoreError) -> Int in
            try session.run("""
                WITH numbered AS (
                    INSERT INTO patient_clock (patient_id, clock, gateway_revision) VALUES (\(patientID ?? ""), 1, CASE WHEN \(stamped) THEN 0 ELSE 1 END)
                    ON CONFLICT (patient_id) DO UPDATE SET clock = patient_clock.clock + 1,
                        gateway_revision = CASE WHEN \(stamped) THEN patient_clock.gateway_revision ELSE patient_clock.clock + 1 END
                    RETURNING clock)
                INSERT INTO entity_version (uuid, kind, id, patient_id, revision, effective_date, deleted_date, next_uuids, superseded_date,
                                            remote_id, group_identifier, parent_uuid, occurrence, event_start, stamp, json)
                SELECT \(version.uuid), \(kind), \(version.id), \(patientID), numbered.clock, \(version.effectiveDate.storeSeconds),
                       \(version.deletedDate?.storeSeconds), \(successorUUIDs), \(superseded), \(version.remoteID), \(version.groupIdentifier),
                       \(parent), \(occurrence), \(eventStart?.storeSeconds), \(stamp), \(ByteBuffer(bytes: json))
                FROM numbered
                """)
        }
        if case .failure(let error) = inserted { throw rule(broken: error, by: entity) }
        locked.insert(patientID ?? "")
        for tag in version.tags ?? [] {
            try session.run("INSERT INTO entity_tag (tag, uuid) VALUES (\(tag), \(version.uuid)) ON CONFLICT DO NOTHING")
        }
    }

    /// A refused insert as the rule it breaks: the unique index's name says which.
    func rule(broken error: StoreError, by entity: CareEntity) -> StoreError {
        guard PostgresSession.sqlState(error) == "23505", case .database(_, let message) = error else { return error }
        if case .outcome(let o) = entity, message.contains("live_outcome_per_occurrence") {
            return .duplicateOutcome(taskID: "", occurrence: o.taskOccurrenceIndex)
        }
        if message.contains("entity_version_uuid_key") {
            return .invalid(entity.entityType, id: entity.version.id, reason: "version \(entity.version.uuid.uuidString) is already in the store")
        }
        return .invalid(entity.entityType, id: entity.version.id, reason: "the database refused it: \(message)")
    }

    public func link(previous: UUID, next: UUID, nextEffective: Date) throws {
        try session.run("""
            UPDATE entity_version SET next_uuids = array_append(COALESCE(next_uuids, '{}'), \(next)),
                                      superseded_date = LEAST(COALESCE(superseded_date, \(nextEffective.storeSeconds)), \(nextEffective.storeSeconds))
            WHERE uuid = \(previous)
            """)
    }

    public func liveOutcomes(ofTask taskID: String, patientID: String?, from start: Date) throws -> (count: Int, latest: Date?) {
        guard let row = try session.query("""
            SELECT count(*), max(o.event_start) FROM entity_version o
            WHERE o.kind = 'outcome' AND o.next_uuids IS NULL AND o.deleted_date IS NULL AND o.event_start >= \(start.storeSeconds)
              AND o.parent_uuid IN (SELECT uuid FROM entity_version WHERE kind = 'task' AND id = \(taskID) AND patient_id IS NOT DISTINCT FROM \(patientID))
            """).first else { return (0, nil) }
        let (count, latest) = try row.decode((Int, Double?).self)
        return (count, Date(storeSeconds: latest))
    }

    public func version(_ uuid: UUID) throws -> CareEntity? {
        guard let row = try session.query("SELECT kind, json, next_uuids FROM entity_version WHERE uuid = \(uuid)").first else { return nil }
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
        try !session.query("SELECT 1 FROM entity_version WHERE uuid = \(uuid)").isEmpty
    }

    public func containing(_ uuids: [UUID]) throws -> Set<UUID> {
        guard !uuids.isEmpty else { return [] }
        return Set(try session.query("SELECT uuid FROM entity_version WHERE uuid = ANY(\(uuids))").map { try $0.decode(UUID.self) })
    }

    public func taskVersions(_ uuids: [UUID]) throws -> [UUID: StoredTask] {
        guard !uuids.isEmpty else { return [:] }
        var found: [UUID: StoredTask] = [:]
        for row in try session.query("""
            SELECT uuid, superseded_date, deleted_date, patient_id, json FROM entity_version WHERE uuid = ANY(\(uuids)) AND kind = 'task'
            """) {
            let (uuid, superseded, deleted, patient, json) = try row.decode((UUID, Double?, Double?, String?, ByteBuffer).self)
            found[uuid] = try Self.storedTask((superseded, deleted, patient, json), known: nil)
        }
        return found
    }

    public func effectiveDate(of uuid: UUID) throws -> Date? {
        try session.query("SELECT effective_date FROM entity_version WHERE uuid = \(uuid)").first
            .map { Date(timeIntervalSinceReferenceDate: try $0.decode(Double.self)) }
    }

    public func processID() throws -> UUID {
        guard let text = try session.query("SELECT value FROM store_meta WHERE key = 'processID'").first.map({ try $0.decode(String.self) }),
              let id = UUID(uuidString: text) else {
            throw StoreError.database(path: session.database.location.description, message: "the store has no sync process id")
        }
        return id
    }

    public func bindProcesses(_ processes: [UUID], to patientID: String) throws {
        guard !processes.isEmpty else { return }
        try session.run("""
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
        try session.run("""
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
