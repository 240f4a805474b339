import CareStore
import Foundation
import Testing
@testable import Gateway

/// A push cycle reads what the store noted since the last, not the history: its cost is what it
/// sends (the figures for a million pushed outcomes are the push-cycle benchmark's).
@Suite("A push cycle reads only what is new")
struct PushCycleTests {
    @Test("imported results are settled unsent; pushed outcomes are never exported again (even with their outbox items gone); an edit is queued under the identifier its outcome went under; pages of pending versions are all queued",
          arguments: Backend.allCases)
    func onlyWhatIsNew(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        var push = try pusher(store, "http://127.0.0.1:9/fhir")
        #expect(try store.pendingOutcomeVersions(limit: 100).count > 3, "the EHR's own results are pending too, until a cycle settles them")
        #expect(try push.enqueue() == 3)
        #expect(try store.pendingOutcomeVersions(limit: 100).isEmpty)
        #expect(try push.enqueue() == 0)
        // The walk is edited: its new version, under the walk's identifier.
        var walk = try #require(store.fetchOutcomes().first { $0.values.first?.value == .boolean(true) })
        let first = try #require(store.outboxEntities(versions: [walk.uuid])[walk.uuid])
        walk.values = [OutcomeValue(.boolean(false), createdDate: local("2026-11-04 08:00"))]
        let edited = try #require(try store.update([.outcome(walk)]).first)
        #expect(try push.enqueue() == 1)
        #expect(try store.outboxEntities(versions: [edited.version.uuid]) == [edited.version.uuid: first])
        // What was queued is not looked at again: with the outbox emptied behind the gateway's
        // back, a cycle still queues nothing (one that read the history would send all four again).
        try Backend.tamper(store, "DELETE FROM push_outbox")
        #expect(try push.enqueue() == 0)
        // Five new outcomes, read two at a time: all five queued.
        let task = try #require(store.fetchTasks(EntityQuery(ids: ["CarePlan/maria-lopez-home-care/229065009"])).first)
        try store.add((10..<15).map { day in
            .outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: day, values: [OutcomeValue(.boolean(true))],
                             effectiveDate: local("2026-11-03 22:00").addingTimeInterval(Double(day) * 86_400), timezone: newYork))
        })
        push.pendingPage = 2
        #expect(try push.enqueue() == 5)
        #expect(try store.pendingOutcomeVersions(limit: 100).isEmpty && store.queuedCount() == 5)
    }
}
