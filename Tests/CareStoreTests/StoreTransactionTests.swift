import Foundation
import Testing
@testable import CareStore

/// `read {}` and `write {}` (GRDB's model) and the in-memory store.
@Suite("Store transactions and the in-memory store")
struct StoreTransactionTests {
    let zone = newYork
    let start = local("2026-11-01", newYork)

    func plan(_ id: String, _ title: String) -> (Patient, CarePlan) {
        let patient = Patient(id: "p-\(id)", name: PersonName(givenName: "Ana", familyName: id), effectiveDate: start, timezone: zone)
        return (patient, CarePlan(id: id, title: title, patientUUID: patient.uuid, effectiveDate: start, timezone: zone))
    }

    struct Refused: Error {}

    @Test("an in-memory store has the file store's rules, and two of them share nothing")
    func inMemory() throws {
        let a = try SQLiteCarePlanStore(inMemory: ())
        let b = try SQLiteCarePlanStore(inMemory: ())
        #expect(a.path == ":memory:")
        let (patient, carePlan) = plan("home", "Home care")
        try a.add([.patient(patient), .carePlan(carePlan)])
        #expect(try a.fetchCarePlans().map(\.title) == ["Home care"])
        #expect(try b.fetchCarePlans().isEmpty)
        #expect(throws: StoreError.alreadyExists(.carePlan, id: "home")) { try a.add([.carePlan(carePlan)]) }
        #expect(try a.knowledgeVector().first?.clock == 2)
        #expect(try a.knowledgeVector().first?.id == (try a.knowledgeVector().first?.id), "the process id is stable")
    }

    @Test("write {} commits what its body wrote when it returns, and nothing when it throws; reads inside see the writes", arguments: Backend.allCases)
    func writeTransaction(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (patient, carePlan) = plan("home", "Home care")
        #expect(throws: Refused.self) {
            try store.write { tx in
                try tx.add([.patient(patient), .carePlan(carePlan)])
                #expect(try tx.fetchCarePlans().count == 1, "the transaction sees its own write")
                throw Refused()
            }
        }
        #expect(try store.fetchCarePlans().isEmpty, "rolled back")
        let written = try store.write { tx in
            try tx.add([.patient(patient), .carePlan(carePlan)])
            var next = try #require(try tx.fetchCarePlans(EntityQuery(ids: ["home"])).first)
            next.title = "Home care, week 2"
            return try tx.update([.carePlan(next)]).count
        }
        #expect(written == 1)
        #expect(try store.fetchCarePlans().map(\.title) == ["Home care, week 2"])
        // A failed store rule inside the body rolls back the body's other writes too.
        let (other, otherPlan) = plan("clinic", "Clinic")
        #expect(throws: StoreError.self) {
            try store.write { tx in
                try tx.add([.patient(other), .carePlan(otherPlan)])
                try tx.add([.carePlan(carePlan)])
            }
        }
        #expect(try store.fetchPatients().count == 1)
    }

    @Test("a revision record is one snapshot: read while another connection writes tasks with outcomes, every outcome's task is in it",
          arguments: Backend.allCases)
    func consistentRevisionRecord(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (patient, carePlan) = plan("home", "Home care")
        try store.add([.patient(patient), .carePlan(carePlan)])
        let writer = try Backend.reopen(store)
        let start = self.start, zone = self.zone
        // The writer has a thread of its own: both stores block their caller, and the reading
        // loop below holds one of Swift's cooperative threads (another backend's run, the other).
        let finished = Locked<Result<Void, any Error>?>(nil)
        Thread.detachNewThread {
            let result = Result {
                for i in 0..<150 {
                    let task = CareTask(id: "t\(i)", title: "Task \(i)", carePlanUUID: carePlan.uuid,
                                        schedule: try Schedule.allDay(start: start, timeZone: zone), timezone: zone)
                    let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.boolean(true))])
                    try writer.add([.task(task), .outcome(outcome)])
                }
            }
            finished.withLock { $0 = result }
        }
        var records = 0
        while true {
            let done = finished.withLock { $0 != nil }
            let record = try store.revisionRecord()
            let tasks = Set(record.entities.compactMap { if case .task(let task) = $0 { task.uuid } else { nil } })
            let outcomes = record.entities.compactMap { if case .outcome(let outcome) = $0 { outcome } else { nil } }
            #expect(outcomes.allSatisfy { tasks.contains($0.taskUUID) }, "an outcome without its task version: not one snapshot")
            #expect(record.knowledgeVector.first?.clock == record.entities.count, "the clock is the snapshot's latest revision")
            records += 1
            if done { break }
        }
        try finished.withLock { $0 }?.get()
        #expect(try store.fetchTasks().count == 150)
        #expect(records > 1)
    }
}
