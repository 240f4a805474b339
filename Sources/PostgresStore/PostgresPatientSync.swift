import CareStore
import Foundation
import JSON
import NIOCore
import PostgresNIO

/// Per-patient CareKit knowledge on PostgreSQL, as SQLite's store keeps it: the gateway's own
/// process stands at the patient's newest version the gateway wrote, merged with the stamps of
/// what the patient's devices sent. A version's `revision` is its number on its patient's clock,
/// which follows the order the patient's writes commit in: a pull never misses a version that
/// another instance commits later.
extension PostgresCarePlanStore.Transaction {
    func patientKnowledge(_ patientID: String, upTo revision: Int?) throws(StoreError) -> KnowledgeVector {
        try run { try Self.patientKnowledge(patientID, upTo: revision, session: session) }
    }

    func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?) throws(StoreError) -> PatientVersions {
        try run { try Self.patientVersions(patientID, notCoveredBy: since, upTo: revision, session: session) }
    }

    func isEnrolled(deviceID: String, patientID: String) throws(StoreError) -> Bool {
        try !session.query("SELECT 1 FROM device WHERE id = \(deviceID) AND patient_id = \(patientID) AND revoked_at IS NULL").isEmpty
    }

    func questionnaires(of patientID: String, url: String, version: String?) throws(StoreError) -> [StoredQuestionnaire] {
        let rows = try session.query("""
            SELECT stored_at, url, version, digest, title, resource FROM questionnaire
            WHERE patient_id = \(patientID) AND url = \(url) AND (\(version)::text IS NULL OR version = \(version))
            ORDER BY stored_at DESC, digest
            """)
        return try rows.map { row throws(StoreError) in
            do {
                let (stored, url, version, digest, title, resource) = try row.decode((Double, String, String?, String, String?, ByteBuffer).self)
                return StoredQuestionnaire(patientID: patientID, url: url, version: version, digest: digest, title: title,
                                           resource: Array(buffer: resource), storedAt: Date(timeIntervalSinceReferenceDate: stored))
            } catch { throw .database(path: "postgres", message: "questionnaire: \(error)") }
        }
    }

    func keep(_ questionnaires: [StoredQuestionnaire]) throws(StoreError) {
        for form in questionnaires {
            try session.run("""
                INSERT INTO questionnaire (stored_at, patient_id, url, version, digest, title, resource)
                VALUES (\(form.storedAt.timeIntervalSinceReferenceDate), \(form.patientID), \(form.url), \(form.version), \(form.digest), \(form.title),
                        \(ByteBuffer(bytes: form.resource)))
                ON CONFLICT (patient_id, url, digest) DO NOTHING
                """)
        }
    }

    /// The patient's knowledge and clock now, in one statement (so one snapshot, in a
    /// transaction or not): the gateway's newest version, the devices' stored knowledge and
    /// the store's process.
    static func knowledgeNow(_ patientID: String, session: PostgresSession) throws -> (knowledge: KnowledgeVector, clock: Int, process: UUID) {
        let rows = try session.prepared("SELECT \(knowledgeColumns(patient: "$1::text"))", [PostgresData(string: patientID)])
        return try knowledge(rows.first?.decode((String?, String?, String?, String?).self), session: session)
    }

    /// The four columns `knowledge(_:session:)` reads, for the patient `patient` (an SQL
    /// expression), each as text (see `PostgresSession.prepared`).
    static func knowledgeColumns(patient: String) -> String {
        """
        (SELECT clock::text FROM patient_clock WHERE patient_id = \(patient)),
        (SELECT gateway_revision::text FROM patient_clock WHERE patient_id = \(patient)),
        (SELECT vector FROM patient_knowledge WHERE patient_id = \(patient)),
        (SELECT value FROM store_meta WHERE key = 'processID')
        """
    }

    /// The patient's knowledge, clock and the store's process from the columns `knowledgeColumns` names.
    static func knowledge(_ columns: (clock: String?, gateway: String?, vector: String?, process: String?)?,
                          session: PostgresSession) throws -> (knowledge: KnowledgeVector, clock: Int, process: UUID) {
        guard let columns, let own = columns.process.flatMap(UUID.init(uuidString:)) else {
            throw StoreError.database(path: session.database.location.description, message: "the store has no sync process id")
        }
        let devices = try columns.vector.map { try KnowledgeVector(json: JSONValue.parse($0)) } ?? KnowledgeVector()
        let newest = columns.gateway.flatMap { Int($0) } ?? 0
        return (devices.setting(own, to: max(newest, devices.clock(for: own))), columns.clock.flatMap { Int($0) } ?? 0, own)
    }

    /// The patient's knowledge as of `revision` (now, when nil or not behind the clock), the
    /// revision it is read up to, and the store's process (read once, with the knowledge now).
    static func knowledge(of patientID: String, upTo revision: Int?, session: PostgresSession) throws -> (knowledge: KnowledgeVector, revision: Int, process: UUID) {
        let now = try knowledgeNow(patientID, session: session)
        guard let revision, revision < now.clock else { return (now.knowledge, revision ?? now.clock, now.process) }
        // Knowledge as it stood at an earlier revision: worked out from the versions up to it.
        let gateway = try session.query("""
            SELECT max(revision) FROM entity_version WHERE patient_id = \(patientID) AND stamp IS NULL AND revision <= \(revision)
            """).first?.decode(Int?.self) ?? nil
        var devices = KnowledgeVector()
        for row in try session.query("""
            SELECT DISTINCT stamp FROM entity_version WHERE patient_id = \(patientID) AND stamp IS NOT NULL AND revision <= \(revision)
            """) {
            devices = devices.merged(with: try KnowledgeVector(json: JSONValue.parse(try row.decode(String.self))))
        }
        return (devices.setting(now.process, to: max(gateway ?? 0, devices.clock(for: now.process))), revision, now.process)
    }

    static func patientKnowledge(_ patientID: String, upTo revision: Int?, session: PostgresSession) throws -> KnowledgeVector {
        try knowledge(of: patientID, upTo: revision, session: session).knowledge
    }

    static func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?,
                                session: PostgresSession) throws -> PatientVersions {
        let (knowledge, upTo, own) = try knowledge(of: patientID, upTo: revision, session: session)
        // An up-to-date device (the common case: CareKit syncs after every change) costs these reads only.
        guard !knowledge.isCovered(by: since) else { return PatientVersions(versions: [], knowledge: knowledge, revision: upTo) }
        var stamps: [String: Bool] = [:]
        var versions: [StoredVersion] = []
        // Successors written after the pull's revision (none when it reads up to now).
        let newer = revision == nil ? [] : Set(try session.query("SELECT uuid FROM entity_version WHERE patient_id = \(patientID) AND revision > \(upTo)")
            .map { try $0.decode(UUID.self) })
        for row in try session.query("""
            SELECT uuid, kind, effective_date, json, next_uuids, stamp FROM entity_version
            WHERE patient_id = \(patientID) AND revision <= \(upTo) AND (stamp IS NOT NULL OR revision > \(since.clock(for: own)))
            """) {
            let (uuid, kind, effective, json, stored, stamp) = try row.decode((UUID, String, Double, ByteBuffer, [UUID]?, String?).self)
            let next = PatientVersions.successors(stored, notIn: newer)
            // Outcomes go as current versions only (see `PatientVersions`).
            if next != nil && kind == "outcome" { continue }
            if let stamp {
                let covered = try stamps[stamp] ?? KnowledgeVector(json: JSONValue.parse(stamp)).isCovered(by: since)
                stamps[stamp] = covered
                if covered { continue }
            }
            let bytes = Array(buffer: json)
            let date = Date(timeIntervalSinceReferenceDate: effective)
            if let next {
                // Stored without successors: given them, and written again.
                var entity = try CareKitJSON.decode(storedKind: kind, value: JSONValue.parse(bytes))
                entity.version.nextVersionUUIDs = next
                versions.append(StoredVersion(type: entity.entityType, uuid: uuid, effectiveDate: date, json: CareKitJSON.bytes(entity, version: .v4)))
            } else {
                let type: EntityType = kind == "task" ? (CareKitJSON.mentionsHealthKitLinkage(bytes) ? .healthKitTask : .task) : EntityType(rawValue: kind) ?? .task
                versions.append(StoredVersion(type: type, uuid: uuid, effectiveDate: date, json: bytes))
            }
        }
        return PatientVersions(versions: RevisionRecord.applyOrder(versions) { ($0.type, $0.effectiveDate, $0.uuid) }, knowledge: knowledge, revision: upTo)
    }
}
