import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping
import Testing
@testable import Gateway

let quickRetry = RetryPolicy(maxAttempts: 8, baseDelay: 0.05, maxDelay: 1, maxTotal: 30)

func pusher(_ store: SQLiteCarePlanStore, _ base: String) throws -> OutcomePush {
    OutcomePush(store: store, export: OutcomeExport(store: store, builder: try builder()),
                client: FHIRRESTClient(base: base, retry: quickRetry, timeout: 20))
}

/// The Observations the server holds with the gateway's identifiers, by identifier value.
func serverObservations(_ base: String) async throws -> [String: Int] {
    let found = try await FHIRRESTClient(base: base, retry: quickRetry).search("Observation", [("identifier", "urn:caregate:outcome|"), ("_count", "100")])
    var counts: [String: Int] = [:]
    for observation in found {
        for identifier in observation.children(named: "identifier") where identifier.string("system") == "urn:caregate:outcome" {
            counts[identifier.string("value") ?? "", default: 0] += 1
        }
    }
    return counts
}

@Suite("Exactly-once push to a real FHIR server", .serialized)
struct PushTests {
    @Test("through dropped connections after commit and a 503 storm, every outcome arrives exactly once; re-runs send nothing new; an amended outcome updates its Observation")
    func exactlyOnce() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let proxy = try FaultProxy(upstream: server.port)
        let store = try storeWithAppOutcomes()
        // Two writes reach the server but their answers are lost; then three 503s with Retry-After.
        try proxy.configure(["drop_after_forward": 2, "storm": 3, "status": 503, "retry_after": "0"])
        let first = try await pusher(store, proxy.base).run()
        #expect(first.newlyQueued == 3)
        #expect(first.pushed.count == 3, "deferred: \(first.deferred), failed: \(first.failed)")
        #expect(proxy.counts["dropped"] == 2 && proxy.counts["stormed"] == 3)
        var onServer = try await serverObservations(server.base)
        #expect(onServer.count == 3 && onServer.values.allSatisfy { $0 == 1 }, "\(onServer)")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 3, failed: 0))
        #expect(first.provenanceLocation != nil)
        // Again: nothing new to send.
        try proxy.configure([:])
        let again = try await pusher(store, proxy.base).run()
        #expect(again.newlyQueued == 0 && again.pushed.isEmpty)
        // The patient corrects the walk: a new outcome version, pushed as an amendment.
        var walk = try #require(store.fetchOutcomes().first { $0.values.first?.value == .boolean(true) })
        walk.values = [OutcomeValue(.boolean(false), createdDate: local("2026-11-04 08:00"))]
        walk.version.effectiveDate = local("2026-11-04 08:00")
        try store.update([.outcome(walk)])
        let amended = try await pusher(store, proxy.base).run()
        #expect(amended.newlyQueued == 1 && amended.pushed.count == 1, "\(amended.deferred) \(amended.failed)")
        onServer = try await serverObservations(server.base)
        #expect(onServer.count == 3 && onServer.values.allSatisfy { $0 == 1 }, "\(onServer)")
        let walkOnServer = try await FHIRRESTClient(base: server.base).search("Observation", [("identifier", "urn:caregate:outcome|\(walk.id)")])
        #expect(walkOnServer.first?.string("status") == "amended")
        #expect(walkOnServer.first?.first("value")?.value == "false")
    }

    @Test("a server that refuses an Observation puts it in the dead-letter list with the OperationOutcome; a server that is down leaves everything queued")
    func refusalsAndOutages() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let store = try storeWithAppOutcomes()
        let proxy = try FaultProxy(upstream: server.port)
        // Down: every request answered 503 for longer than the retries last.
        try proxy.configure(["storm": 1000, "status": 503, "retry_after": "0"])
        var push = try pusher(store, proxy.base)
        push.maxConsecutiveFailures = 2
        let down = try? await push.run()
        #expect(down == nil || down?.pushed.isEmpty == true)
        #expect(try store.outboxCounts().queued == 3)
        // Up again: the queue drains.
        try proxy.configure([:])
        let proxy2 = try FaultProxy(upstream: server.port)
        let up = try await pusher(store, proxy2.base).run()
        #expect(up.pushed.count == 3)
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 3, failed: 0))
        // A payload the server refuses (an Observation without its required code): dead-lettered
        // with the server's reason.
        var bad = OutboxItem(versionUUID: UUID(), entityID: "bad", idempotencyKey: "urn:caregate:outcome|bad",
                             payload: Array(#"{"resourceType":"Observation","status":"final","valueBoolean":true}"#.utf8))
        bad.state = .queued
        try store.enqueue([bad])
        let refused = try await pusher(store, server.base).run()
        #expect(refused.failed.count == 1, "\(refused.pushed) \(refused.deferred)")
        #expect(try store.outboxCounts().failed == 1)
        #expect(try store.outbox(state: .failed).first?.lastError?.contains("HTTP 4") == true)
    }

    @Test("batches: a lost answer to a whole batch and a 503 storm still leave exactly one Observation per outcome; a refused entry is dead-lettered while the rest of its batch goes")
    func batches() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let proxy = try FaultProxy(upstream: server.port)
        let store = try storeWithAppOutcomes()
        var bad = OutboxItem(versionUUID: UUID(), entityID: "bad", idempotencyKey: "urn:caregate:outcome|bad",
                             payload: Array(#"{"resourceType":"Observation","status":"final","valueBoolean":true}"#.utf8))
        bad.state = .queued
        try store.enqueue([bad])
        // The first batch reaches the server but its answer is lost; then two 503s.
        try proxy.configure(["drop_after_forward": 1, "storm": 2, "status": 503, "retry_after": "0"])
        var push = try pusher(store, proxy.base)
        push.batchSize = 2
        let first = try await push.run()
        #expect(proxy.counts["dropped"] == 1 && proxy.counts["stormed"] == 2)
        #expect(first.pushed.count == 3, "deferred: \(first.deferred), failed: \(first.failed)")
        #expect(first.failed.map(\.identifier) == ["urn:caregate:outcome|bad"])
        #expect(first.failed.first?.error.hasPrefix("HTTP 4") == true, "\(first.failed)")
        let onServer = try await serverObservations(server.base)
        #expect(onServer.count == 3 && onServer.values.allSatisfy { $0 == 1 }, "\(onServer)")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 3, failed: 1))
        // An amendment goes as a conditional update inside a batch.
        var walk = try #require(store.fetchOutcomes().first { $0.values.first?.value == .boolean(true) })
        walk.values = [OutcomeValue(.boolean(false), createdDate: local("2026-11-04 08:00"))]
        walk.version.effectiveDate = local("2026-11-04 08:00")
        try store.update([.outcome(walk)])
        try proxy.configure([:])
        let amended = try await push.run()
        #expect(amended.newlyQueued == 1 && amended.pushed.count == 1, "\(amended.deferred) \(amended.failed)")
        let walkOnServer = try await FHIRRESTClient(base: server.base).search("Observation", [("identifier", "urn:caregate:outcome|\(walk.id)")])
        #expect(walkOnServer.count == 1)
        #expect(walkOnServer.first?.string("status") == "amended")
        // Every write went in a batch: no single POST or PUT of an Observation.
        #expect(proxy.counts["single_observation_posts", default: 0] == 0)
    }
}
