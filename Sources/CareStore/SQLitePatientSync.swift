import Foundation
import GRDB
import GRDBSQLite
import JSON

/// Per-patient CareKit knowledge on SQLite. Each version row carries its patient
/// (`patient_id`, derived from its parents when written) and, when a device sent it, the
/// vector of the record it came in (`stamp`); versions the gateway writes have no stamp and
/// are stamped with the store's own process at their revision.
extension SQLiteCarePlanStore {
    static func registerPatientSync(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v3-patient-sync") { db in
            try db.execute(sql: """
                ALTER TABLE entity_version ADD COLUMN patient_id TEXT;
                ALTER TABLE entity_version ADD COLUMN stamp TEXT;
                CREATE TABLE sync_process (process TEXT PRIMARY KEY NOT NULL, patient_id TEXT NOT NULL) WITHOUT ROWID;
                CREATE TABLE patient_knowledge (patient_id TEXT PRIMARY KEY NOT NULL, vector TEXT NOT NULL) WITHOUT ROWID;
                """)
            try scopeVersions(from: 0, db: db)
            try db.execute(sql: """
                CREATE INDEX entity_version_patient ON entity_version(patient_id, revision) WHERE patient_id IS NOT NULL;
                CREATE INDEX entity_version_patient_gateway ON entity_version(patient_id, revision) WHERE patient_id IS NOT NULL AND stamp IS NULL;
                """)
        }
    }

    /// Gives the versions written from `revision` on that have none their patient, from their
    /// parents (which come first: patients, then care plans, then tasks and contacts, then
    /// outcomes): what the migrations do for versions written before writes set it.
    static func scopeVersions(from revision: Int, db: Database) throws {
        // `+kind`: the new rows by revision (the primary key), not every row of a kind through
        // the kind index, which the planner would otherwise pick (a store of a million outcomes
        // made each write scan them all).
        try db.cachedStatement(sql: "UPDATE entity_version SET patient_id = id WHERE revision >= ? AND +kind = 'patient'").execute(arguments: [revision])
        for kinds in ["'carePlan'", "'task', 'contact'", "'outcome'"] {
            try db.cachedStatement(sql: """
                UPDATE entity_version SET patient_id = (SELECT p.patient_id FROM entity_version p WHERE p.uuid = entity_version.parent_uuid)
                WHERE revision >= ? AND +kind IN (\(kinds)) AND patient_id IS NULL AND parent_uuid IS NOT NULL
                """).execute(arguments: [revision])
        }
    }

    /// The store's own sync process.
    func processID(db: Database) throws -> UUID {
        guard let text = try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM store_meta WHERE key = 'processID'")),
              let id = UUID(uuidString: text) else {
            throw StoreError.database(path: path, message: "the store has no sync process id")
        }
        return id
    }

    func patientKnowledge(_ patientID: String, upTo revision: Int?, db: Database) throws -> KnowledgeVector {
        // Every sync call asks this (an up-to-date device's whole answer): statements kept prepared.
        let limit = revision ?? Int.max
        let gateway = try Int.fetchOne(db.cachedStatement(sql: """
            SELECT MAX(revision) FROM entity_version WHERE patient_id = ? AND stamp IS NULL AND revision <= ?
            """), arguments: [patientID, limit]) ?? 0
        var devices = KnowledgeVector()
        let current = try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(revision) FROM entity_version")) ?? 0
        if limit >= current {
            if let text = try String.fetchOne(db.cachedStatement(sql: "SELECT vector FROM patient_knowledge WHERE patient_id = ?"), arguments: [patientID]) {
                devices = try Self.vector(text)
            }
        } else {
            for text in try String.fetchAll(db, sql: """
                SELECT DISTINCT stamp FROM entity_version WHERE patient_id = ? AND stamp IS NOT NULL AND revision <= ?
                """, arguments: [patientID, limit]) {
                devices = devices.merged(with: try Self.vector(text))
            }
        }
        let own = try processID(db: db)
        return devices.setting(own, to: max(gateway, devices.clock(for: own)))
    }

    /// The patient's knowledge up to `upTo` (the newest when nil), and the empty answer when
    /// `since` covers it: an up-to-date device (the common case: CareKit syncs after every
    /// change) costs these reads.
    func knowledgeAnswer(_ patientID: String, since: KnowledgeVector, upTo revision: Int?,
                         db: Database) throws -> (knowledge: KnowledgeVector, upTo: Int, upToDate: PatientVersions?) {
        let upTo = try revision ?? (Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(revision) FROM entity_version")) ?? 0)
        let knowledge = try patientKnowledge(patientID, upTo: upTo, db: db)
        return (knowledge, upTo, knowledge.isCovered(by: since) ? PatientVersions(versions: [], knowledge: knowledge, revision: upTo) : nil)
    }

    func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?, db: Database, committed: Bool) throws -> PatientVersions {
        let (knowledge, upTo, upToDate) = try knowledgeAnswer(patientID, since: since, upTo: revision, db: db)
        if let upToDate { return upToDate }
        let own = try processID(db: db)
        // Successors written after the pull's revision (none when it reads up to now).
        let newer = revision == nil ? [] : Set(try UUID.fetchAll(db.cachedStatement(sql: "SELECT uuid FROM entity_version WHERE patient_id = ? AND revision > ?"),
                                                                 arguments: [patientID, upTo]))
        let rows = try Row.fetchCursor(db.cachedStatement(sql: """
            SELECT uuid, kind, effective_date, json, next_uuids, stamp FROM entity_version
            WHERE patient_id = ? AND revision <= ? AND (stamp IS NOT NULL OR revision > ?)
            """), arguments: [patientID, upTo, since.clock(for: own)])
        var stamps: [String: Bool] = [:]
        var versions: [StoredVersion] = []
        while let row = try rows.next() {
            let stored: String? = row["next_uuids"]
            let nextUUIDs = PatientVersions.successors(stored.map(SQLiteCarePlanStore.uuids(in:)), notIn: newer)
            // Outcomes go as current versions only (see `PatientVersions`).
            if nextUUIDs != nil && (row["kind"] as String) == "outcome" { continue }
            if let stamp = row["stamp"] as String? {
                let covered = try stamps[stamp] ?? Self.vector(stamp).isCovered(by: since)
                stamps[stamp] = covered
                if covered { continue }
            }
            versions.append(try storedVersion(row, nextUUIDs: nextUUIDs, caching: committed))
        }
        return PatientVersions(versions: RevisionRecord.applyOrder(versions) { ($0.type, $0.effectiveDate, $0.uuid) },
                               knowledge: knowledge, revision: upTo)
    }

    /// A row as a stored version: its JSON as stored when it has no successors (a version is
    /// stored with none), else decoded, given `nextUUIDs` and written again.
    func storedVersion(_ row: Row, nextUUIDs: [UUID]?, caching: Bool) throws -> StoredVersion {
        let uuid: UUID = row["uuid"]
        let effective = Date(timeIntervalSinceReferenceDate: row["effective_date"])
        if let nextUUIDs {
            var decoded = try decoded(uuid: uuid, kind: row["kind"], caching: caching) { try JSONValue.parse(row["json"] as String) }
            var version = decoded.version
            version.nextVersionUUIDs = nextUUIDs
            decoded = SQLiteCarePlanStore.replacing(decoded, version: version)
            return StoredVersion(type: decoded.entityType, uuid: uuid, effectiveDate: effective, json: CareKitJSON.bytes(decoded, version: .v4))
        }
        let kind: String = row["kind"]
        let json: [UInt8] = try row.withUnsafeData(atIndex: 3) { data in data.map { Array($0) } ?? [] }
        let type: EntityType = kind == "task" ? (CareKitJSON.mentionsHealthKitLinkage(json) ? .healthKitTask : .task) : EntityType(rawValue: kind) ?? .task
        return StoredVersion(type: type, uuid: uuid, effectiveDate: effective, json: json)
    }


    /// Every device push asks this for each version it sends or links to: stepped through
    /// SQLite's C API, a task's JSON read in place (not copied into a row) for its HealthKit link.
    func scopes(of uuids: [UUID], db: Database) throws -> [UUID: VersionScope] {
        let p = try db.cachedStatement(sql: "SELECT kind, json, patient_id FROM entity_version WHERE uuid = ?").sqliteStatement
        var result: [UUID: VersionScope] = [:]
        defer { sqlite3_reset(p) }
        for uuid in Set(uuids) {
            guard try SQLiteBinding.step(p, uuid: uuid, db: db) else { continue }
            let kind = SQLiteBinding.text(p, 0) ?? ""
            let type: EntityType = if kind == "task" {
                CareKitJSON.mentionsHealthKitLinkage(SQLiteBinding.bytes(p, 1)) ? .healthKitTask : .task
            } else {
                EntityType(rawValue: kind) ?? .task
            }
            result[uuid] = VersionScope(type: type, patientID: SQLiteBinding.text(p, 2))
        }
        return result
    }

    func processOwners(_ processes: [UUID], db: Database) throws -> [UUID: String] {
        let statement = try db.cachedStatement(sql: "SELECT patient_id FROM sync_process WHERE process = ?")
        var owners: [UUID: String] = [:]
        for process in Set(processes) {
            if let patient = try String.fetchOne(statement, arguments: [process.uuidString]) { owners[process] = patient }
        }
        return owners
    }

    /// A stored vector (`KnowledgeVector.json`).
    static func vector(_ text: String) throws -> KnowledgeVector {
        try KnowledgeVector(json: JSONValue.parse(text))
    }
}
