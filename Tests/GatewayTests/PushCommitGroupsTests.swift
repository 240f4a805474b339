import CareStore
import Foundation
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
}
