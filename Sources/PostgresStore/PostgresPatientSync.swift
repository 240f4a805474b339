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

    /// The patient's clock now: the number of its newest version.
    static func clock(of patientID: String, session: PostgresSession) throws -> Int {
        try session.query("SELECT clock FROM patient_clock WHERE patient_id = \(patientID)").first?.decode(Int.self) ?? 0
    }

    static func patientKnowledge(_ patientID: String, upTo revision: Int?, session: PostgresSession) throws -> KnowledgeVector {
        let limit = revision ?? Int(Int64.max)
        let gateway = try session.query("""
            SELECT max(revision) FROM entity_version WHERE patient_id = \(patientID) AND stamp IS NULL AND revision <= \(limit)
            """).first?.decode(Int?.self) ?? 0
        var devices = KnowledgeVector()
        if limit >= (try clock(of: patientID, session: session)) {
            if let stored = try PostgresVersionRows.devicesKnowledge(of: patientID, session: session) { devices = stored }
        } else {
            for row in try session.query("""
                SELECT DISTINCT stamp FROM entity_version WHERE patient_id = \(patientID) AND stamp IS NOT NULL AND revision <= \(limit)
                """) {
                devices = devices.merged(with: try KnowledgeVector(json: JSONValue.parse(try row.decode(String.self))))
            }
        }
        let own = try PostgresVersionRows(session: session).processID()
        return devices.setting(own, to: max(gateway ?? 0, devices.clock(for: own)))
    }

    static func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?,
                                session: PostgresSession) throws -> PatientVersions {
        let upTo = try revision ?? clock(of: patientID, session: session)
        let knowledge = try patientKnowledge(patientID, upTo: upTo, session: session)
        // An up-to-date device (the common case: CareKit syncs after every change) costs these reads only.
        guard !knowledge.isCovered(by: since) else { return PatientVersions(versions: [], knowledge: knowledge, revision: upTo) }
        let own = try PostgresVersionRows(session: session).processID()
        var stamps: [String: Bool] = [:]
        var versions: [StoredVersion] = []
        for row in try session.query("""
            SELECT uuid, kind, effective_date, json, next_uuids, stamp FROM entity_version
            WHERE patient_id = \(patientID) AND revision <= \(upTo) AND (stamp IS NOT NULL OR revision > \(since.clock(for: own)))
            """) {
            let (uuid, kind, effective, json, next, stamp) = try row.decode((UUID, String, Double, ByteBuffer, [UUID]?, String?).self)
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
