import Foundation
import GRDB
import Testing
@testable import CareStore

@Suite("Upgrading a store to per-patient sync")
struct PatientSyncMigrationTests {
    @Test("a store written before per-patient knowledge gets every version's patient from its parents when it is opened, and syncs as a new one does")
    func backfill() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-migrate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("care.sqlite").path
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
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
        // Undo the two migrations, as a store of the version before them was.
        let queue = try DatabaseQueue(path: path)
        try queue.write { db in
            try db.execute(sql: """
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
}
