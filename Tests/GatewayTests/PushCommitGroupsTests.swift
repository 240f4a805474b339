import CareStore
import Foundation
import PostgresStore
import Testing
@testable import Gateway

@Suite("Device pushes sharing one commit")
struct PushCommitGroupsTests {
    @Test("pushes arriving together are each merged or refused on their own: a refused push (another patient's task) undoes only itself", arguments: Backend.allCases)
    func concurrentPushes(backend: Backend) async throws {
        guard var fixture = try SyncFixture(backend) else { return }
        let patients = (0..<30).map { "patient-\($0)" }
        for patient in patients { fixture.tasks[patient] = try fixture.addPlan(for: patient) }
        let pushes = PushCommitGroups(sync: fixture.sync, groupLimit: 8)
        // One device per patient records occurrence 1; patient 13's device names patient 14's
        // task and must be refused alone.
        var sends: [(patient: String, record: RevisionRecord, vector: KnowledgeVector)] = []
        for (i, patient) in patients.enumerated() {
            let vector = try fixture.pullAll(patient, since: KnowledgeVector()).catchUp.setting(UUID(), to: 1)
            let outcome = fixture.outcome(i == 13 ? patients[14] : patient, occurrence: 1, steps: i)
            sends.append((patient, RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: vector.processes), vector))
        }
        let results = await withTaskGroup(of: (Int, Result<CareKitSync.PushResult, SyncError>).self) { group in
            for (i, send) in sends.enumerated() {
                group.addTask { (i, await pushes.push(patientID: send.patient, records: [send.record], deviceKnowledge: send.vector)) }
            }
            var all: [Int: Result<CareKitSync.PushResult, SyncError>] = [:]
            for await (i, result) in group { all[i] = result }
            return all
        }
        for (i, result) in results.sorted(by: { $0.key < $1.key }) {
            switch result {
            case .success(let pushed): #expect(i != 13 && pushed.merged == 1 && pushed.knowledge == sends[i].vector, "push \(i)")
            case .failure(let error):
                #expect(i == 13, "push \(i): \(error)")
                #expect("\(error)".contains("names no version of this patient's that the gateway holds or this request sends"))
            }
        }
        let outcomes = try fixture.store.fetchOutcomes()
        #expect(outcomes.count == 29)
        #expect(Set(outcomes.compactMap { $0.values.first?.value }) == Set((0..<30).filter { $0 != 13 }.map { OutcomeValue.Value.integer($0) }))
    }

    @Test("on PostgreSQL each patient's pushes keep to one lane and the lanes merge at once: a patient another instance holds locked does not hold back another patient's push")
    func lanes() async throws {
        guard var fixture = try SyncFixture(.postgres) else { return }
        for i in 0..<8 { fixture.tasks["patient-\(i)"] = try fixture.addPlan(for: "patient-\(i)") }
        let pushes = PushCommitGroups(sync: fixture.sync)
        let held = "patient-0"
        let free = try #require((1..<8).map { "patient-\($0)" }.first { pushes.lane(of: $0) !== pushes.lane(of: held) })
        #expect(pushes.lane(of: held) === pushes.lane(of: held))
        func send(_ patient: String, steps: Int) throws -> (RevisionRecord, KnowledgeVector, UUID) {
            let vector = try fixture.pullAll(patient, since: KnowledgeVector()).catchUp.setting(UUID(), to: 1)
            let outcome = fixture.outcome(patient, occurrence: 1, steps: steps)
            return (RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: vector.processes), vector, outcome.uuid)
        }
        let (heldRecord, heldVector, _) = try send(held, steps: 1)
        let (freeRecord, freeVector, freeOutcome) = try send(free, steps: 2)
        // Another instance takes the held patient's clock row and keeps it until it sees the free
        // patient's outcome committed, or for a minute after it sees the held patient's push
        // waiting for the row (the lanes failed). It watches from its own thread and counts from
        // what the database shows, so a test run's busy threads cannot make the free push look late.
        let other = try #require(try Backend.reopen(fixture.store) as? PostgresCarePlanStore)
        let locked = DispatchSemaphore(value: 0)
        let freeCommittedWhileHeld = Locked(false)
        let waits = Locked("")
        Thread.detachNewThread {
            try? other.database.transaction { session in
                try session.query("SELECT clock FROM patient_clock WHERE patient_id = \(held) FOR UPDATE")
                locked.signal()
                func freeCommitted() throws -> Bool { try !session.query("SELECT 1 FROM entity_version WHERE uuid = \(freeOutcome)").isEmpty }
                func heldWaiting() throws -> Bool {
                    try !session.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").isEmpty
                }
                var deadline = Date().addingTimeInterval(600)
                var seen = false
                while Date() < deadline {
                    if try freeCommitted() {
                        freeCommittedWhileHeld.withLock { $0 = true }
                        return
                    }
                    if !seen, try heldWaiting() { seen = true; deadline = Date().addingTimeInterval(60) }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                // What the store's other connections wait on, for the failure's message.
                let activity = try session.query("""
                    SELECT coalesce(wait_event_type, '') || ' ' || coalesce(wait_event, '') || ': ' || left(query, 100) FROM pg_stat_activity
                    WHERE datname = current_database() AND pid <> pg_backend_pid()
                    """)
                waits.withLock { $0 = (try? activity.map { try $0.decode(String.self) }.joined(separator: "\n")) ?? "" }
            }
        }
        await Task.detached { locked.wait() }.value
        let heldPush = Task { await pushes.push(patientID: held, records: [heldRecord], deviceKnowledge: heldVector) }
        try await Task.sleep(for: .milliseconds(200))
        let freeResult = await pushes.push(patientID: free, records: [freeRecord], deviceKnowledge: freeVector)
        guard case .success(let merged) = await heldPush.value, case .success = freeResult else {
            Issue.record("a push failed"); return
        }
        #expect(freeCommittedWhileHeld.withLock { $0 }, "another patient's push waited for the held patient's lock: \(waits.withLock { $0 })")
        let values = Set(try fixture.store.fetchOutcomes().compactMap(\.values.first?.value))
        #expect(merged.merged == 1 && values == [.integer(1), .integer(2)])
    }
}
