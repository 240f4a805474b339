import Foundation
import GRDB
import Testing
@testable import CareStore

@Suite("Upgrading a store to per-patient sync")
struct PatientSyncMigrationTests {
    let zone = TimeZone(identifier: "America/New_York")!
    let start = Date(timeIntervalSinceReferenceDate: 815_202_000)

    func temporaryFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    @Test("a store written before per-patient knowledge gets every version's patient from its parents when it is opened, and syncs as a new one does")
    func backfill() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("care.sqlite").path
        var task: CareTask?
        do {
            let store = try SQLiteCarePlanStore(path: path)
            for id in ["maria", "john"] {
                let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: zone)
                let plan = CarePlan(id: "plan-\(id)", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
                var walk = CareTask(id: "walk-\(id)", title: "Walk", carePlanUUID: plan.uuid,
                                    schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
                walk.effectiveDate = start
                try store.add([.patient(patient), .carePlan(plan), .task(walk)])
                if id == "maria" { task = walk }
            }
            try store.add([.outcome(Outcome(taskUUID: task!.uuid, taskOccurrenceIndex: 1, values: [], effectiveDate: start.addingTimeInterval(90_000), timezone: zone))])
        }
        // Undo the migrations, as a store of the version before them was.
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
                DROP INDEX entity_version_identity; CREATE INDEX entity_version_kind_id ON entity_version(kind, id, effective_date);
                DELETE FROM grdb_migrations WHERE identifier = 'v7-patient-identity';
                DROP INDEX entity_version_patient; DROP INDEX entity_version_patient_gateway;
                ALTER TABLE entity_version DROP COLUMN patient_id; ALTER TABLE entity_version DROP COLUMN stamp;
                DROP TABLE sync_process; DROP TABLE patient_knowledge; DROP TABLE enrollment_code; DROP TABLE device;
                DELETE FROM grdb_migrations WHERE identifier IN ('v3-patient-sync', 'v4-devices');
                """)
        }
        try queue.close()
        let store = try SQLiteCarePlanStore(path: path)
        let maria = try store.patientVersions("maria", notCoveredBy: KnowledgeVector()).versions.entities()
        #expect(maria.map(\.version.id) == ["maria", "plan-maria", "walk-maria", maria.last!.version.id])
        #expect(maria.last?.entityType == .outcome)
        #expect(try store.patientVersions("john", notCoveredBy: KnowledgeVector()).versions.count == 3)
        #expect(try store.patientKnowledge("maria").clocks.values.max() == 7)
        #expect(try store.devices(patientID: nil).isEmpty)
    }

    @Test("a store written before ids were unique per patient is opened in place: its versions keep their patients, look-ups by id go through the patient, and two patients may then hold one id")
    func identityPerPatient() throws {
        let folder = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("care.sqlite").path
        var plans: [String: CarePlan] = [:]
        do {
            let store = try SQLiteCarePlanStore(path: path)
            for id in ["maria", "john"] {
                let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: zone)
                let plan = CarePlan(id: "plan-\(id)", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
                try store.add([.patient(patient), .carePlan(plan)])
                plans[id] = plan
            }
        }
        // The schema of the version before: one (kind, id) index, no migration v7.
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
                DROP INDEX entity_version_identity; CREATE INDEX entity_version_kind_id ON entity_version(kind, id, effective_date);
                DELETE FROM grdb_migrations WHERE identifier = 'v7-patient-identity';
                """)
        }
        try queue.close()
        let store = try SQLiteCarePlanStore(path: path)
        let indexes = try store.pool.read { db in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'entity_version'") }
        #expect(indexes.contains("entity_version_identity") && !indexes.contains("entity_version_kind_id"))
        for id in ["maria", "john"] {
            var task = CareTask(id: "doxylamine", title: "Doxylamine", carePlanUUID: plans[id]!.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 20, minutes: 0, start: start, timeZone: zone), timezone: zone)
            task.effectiveDate = start
            try store.add([.task(task)])
        }
        #expect(try store.conflicts().isEmpty)
        #expect(try store.fetchTasks(EntityQuery(ids: ["doxylamine"], patientIDs: ["john"])).map(\.carePlanUUID) == [plans["john"]!.uuid])
        #expect(try store.fetchCarePlans(EntityQuery(patientIDs: ["maria"])).map(\.id) == ["plan-maria"])
        #expect(try store.integrityCheck() == ["ok"])
    }
}
