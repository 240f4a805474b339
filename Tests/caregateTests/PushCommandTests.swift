import CareStore
import Foundation
import Testing

@Suite("caregate push and status")
struct PushCommandTests {
    let cli = CommandLineTests()

    @Test("a dry run queues and shows what would be sent; an unreachable server leaves the outcome queued and exits 1; status shows the outbox")
    func pushWithoutServer() throws {
        let path = cli.temporaryPath("push.sqlite")
        _ = try cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", path, "--tz", "America/New_York"])
        // The app records a walk.
        let store = try SQLiteCarePlanStore(path: path)
        let walk = try #require(store.fetchTasks(EntityQuery(ids: ["CarePlan/maria-lopez-home-care/229065009"])).first)
        let outcome = Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.boolean(true))])
        try store.add([.outcome(outcome)])
        let dry = try cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--store", path, "--dry-run"])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("would create (unless an Observation with its identifier exists): Observation urn:caregate:outcome|\(outcome.id)"))
        #expect(dry.stdout.contains("dry run: 1 newly queued"))
        let status = try cli.caregate(["status", "--store", path])
        #expect(status.stdout == "outbox: 1 queued, 0 pushed, 0 failed\n")
        let down = try cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--store", path])
        #expect(down.status == 1)
        #expect(down.stdout.contains("0 newly queued, 0 pushed, 0 refused, 0 deferred") == false)
        #expect(down.stdout.contains("deferred") || down.stderr.contains("error"))
        let after = try cli.caregate(["status", "--store", path])
        #expect(after.stdout.hasPrefix("outbox: 1 queued, 0 pushed, 0 failed\n"))
    }
}
