import CareStore
import FHIR
import FHIRClient
import Foundation
import Testing
@testable import Gateway

@Suite("AuditEvents pushed with ehr.audit", .serialized)
struct AuditPushTests {
    /// Three entries kept and queued for the EHR as `AuditEvent`s, as `caregate serve` does with `ehr.audit: true`.
    func queueEntries(_ store: Backend.Store) throws -> [ChainedAuditEntry] {
        let resource = AuditEventResource(observer: "caregate-test")
        let entries = (0..<3).map { i in
            AuditEntry(recorded: Date(timeIntervalSince1970: 1_795_000_000 + Double(i)), actor: .device("device-\(i)"), action: .read,
                       event: AuditEvent.pull, patientID: "Patient/maria-lopez", outcome: .success, detail: "\(i) versions")
        }
        try store.record(entries, queueing: { resource.outboxItem($0) })
        return try store.auditChain(from: 1, limit: 10)
    }

    @Test("an EHR whose statement does not let AuditEvents be written at their ids dead-letters them, saying why, and the outcomes still go; once it does, a retry of the dead letters queues them again and sends each at its id, the outcomes not resent", arguments: Backend.allCases)
    func withoutUpdateCreate(backend: Backend) async throws {
        guard let server = await LocalFHIRServer() else { return }
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let kept = try queueEntries(store)
        let proxy = try FaultProxy(upstream: server.port)
        try proxy.configure(["no_update_create": ["AuditEvent"]])

        let first = try await pusher(store, proxy.base).run()
        #expect(first.pushedOutcomes.count == 3 && first.pushed.count == 3, "\(first.pushed) \(first.failed) \(first.deferred)")
        #expect(first.failed.count == 3 && first.auditEvents.count == 3)
        #expect(first.failed.allSatisfy { $0.error.contains("does not take AuditEvents at the gateway's ids") }, "\(first.failed)")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 3, failed: 3))
        #expect(try await serverObservations(server.base).values.sorted() == [1, 1, 1])
        let client = FHIRRESTClient(base: server.base, retry: quickRetry)
        for row in kept {
            await #expect(throws: FHIRClientError.self) { try await client.read("AuditEvent", AuditEventResource.id(of: row)) }
        }
        // The run's entries name Maria's outcomes, and nothing of the AuditEvents.
        let entries = first.auditEntries(actor: .worker(server.base), source: nil)
        #expect(entries.map { "\($0.patientID ?? "-") \($0.outcome) \($0.entities.count)" } == ["Patient/maria-lopez success 3"], "\(entries)")

        // The EHR takes them now: a retry of the dead letters queues the AuditEvents again (an
        // export cannot make them), and each is written at its id.
        try proxy.configure([:])
        let retried = try await pusher(store, proxy.base).run(retryFailed: true)
        #expect(retried.retriedFailed == 3 && retried.newlyQueued == 0)
        #expect(retried.pushed.count == 3 && retried.pushedOutcomes.isEmpty && retried.failed.isEmpty, "\(retried.pushed) \(retried.failed)")
        #expect(retried.auditEntries(actor: .worker(server.base), source: nil).isEmpty)
        for row in kept {
            #expect(try await client.read("AuditEvent", AuditEventResource.id(of: row)).string("id") == AuditEventResource.id(of: row))
        }
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 6, failed: 0))
        #expect(try await serverObservations(server.base).values.sorted() == [1, 1, 1])
    }
}
