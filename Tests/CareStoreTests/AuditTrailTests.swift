import CareStore
import Foundation
import GRDB
import PostgresNIO
import PostgresStore
import Testing

/// The audit trail on both backends: appended in one chain, read back by patient, actor and
/// time, and any entry changed, removed or inserted afterwards found by `AuditChain.verify`.
@Suite("Audit trail")
struct AuditTrailTests {
    static let start = Date(timeIntervalSinceReferenceDate: 817_000_000.125)

    static func entry(_ n: Int, patient: String? = "Patient/p1", actor: String = "device-1") -> AuditEntry {
        AuditEntry(recorded: start.addingTimeInterval(Double(n)), actor: .init(kind: .device, id: actor), action: n % 2 == 0 ? .read : .update,
                   event: n % 2 == 0 ? "carekit.pull" : "carekit.push", patientID: patient, entities: n == 3 ? ["Task/a", "Outcome/b"] : [],
                   source: "203.0.113.\(n)", outcome: n == 4 ? .refused : .success, detail: n == 5 ? "12 versions" : nil)
    }

    @Test("entries come back as recorded, in order, by patient, actor and time; the chain verifies", arguments: Backend.allCases)
    func recordAndRead(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        #expect(try AuditChain.verify(store) == (0, nil), "an empty trail holds")
        try store.record((1...4).map { Self.entry($0) })
        try store.record([Self.entry(5, patient: "Patient/p2", actor: "device-2"), Self.entry(6, patient: nil, actor: "device-9")])
        let all = try store.auditEntries(AuditQuery())
        #expect(all.map(\.sequence) == [1, 2, 3, 4, 5, 6])
        #expect(all.map(\.entry) == (1...4).map { Self.entry($0) } + [Self.entry(5, patient: "Patient/p2", actor: "device-2"), Self.entry(6, patient: nil, actor: "device-9")])
        #expect(all.first?.previousHash == AuditChain.genesis && zip(all, all.dropFirst()).allSatisfy { $1.previousHash == $0.hash })
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p2")).map(\.sequence) == [5])
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p1", since: Self.start.addingTimeInterval(2), until: Self.start.addingTimeInterval(4))).map(\.sequence) == [2, 3])
        #expect(try store.auditEntries(AuditQuery(actorID: "device-9")).map(\.sequence) == [6])
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p1", limit: 2)).map(\.sequence) == [3, 4], "the newest, oldest first")
        #expect(try AuditChain.verify(store, page: 4) == (6, nil))
    }

    @Test("a query read a page at a time after a sequence gives every match once, oldest first, whatever the page size; the whole chain likewise; an append of 1,227 entries is kept whole", arguments: Backend.allCases)
    func pages(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        try store.record((1...23).map { Self.entry($0, patient: $0 % 3 == 0 ? "Patient/p2" : "Patient/p1") })
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p2", limit: 3, after: 6)).map(\.sequence) == [9, 12, 15], "the first after it")
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p2", limit: 3)).map(\.sequence) == [15, 18, 21], "without it, the last")
        for size in [1, 2, 5, 7, 1_000] {
            var rows = AuditPages(store, matching: AuditQuery(patientID: "Patient/p2"), size: size)
            var seen: [Int64] = []
            while let row = try rows.next() { seen.append(row.sequence) }
            #expect(seen == [3, 6, 9, 12, 15, 18, 21], "pages of \(size)")
            var chain = AuditPages(store, after: 20, size: size)
            var rest: [Int64] = []
            while let row = try chain.next() { rest.append(row.sequence) }
            #expect(rest == [21, 22, 23], "the chain after 20, pages of \(size)")
        }
        // One append larger than a statement's rows (PostgreSQL inserts 500 a statement): kept whole, in order.
        try store.record((24...1_250).map { Self.entry($0, patient: "Patient/p3") })
        #expect(try AuditChain.verify(store, page: 300) == (1_250, nil))
        #expect(try store.auditEntries(AuditQuery(patientID: "Patient/p3", limit: 2_000)).map(\.sequence) == Array(24...1_250))
    }

    @Test("an entry changed, removed or inserted, or entries cut from the end, are found where it happened", arguments: Backend.allCases)
    func tampering(backend: Backend) throws {
        let cases: [(sql: String, sequence: Int64, says: String)] = [
            ("UPDATE audit_entry SET patient_id = 'Patient/p9' WHERE sequence = 3", 3, "do not give its hash"),
            ("DELETE FROM audit_entry WHERE sequence = 4", 5, "removed"),
            ("UPDATE audit_entry SET sequence = sequence + 100 WHERE sequence >= 4; UPDATE audit_entry SET sequence = sequence - 99 WHERE sequence >= 104; "
                + "INSERT INTO audit_entry SELECT 4, recorded, actor_kind, actor_id, action, event, patient_id, entities, source, outcome, detail, previous_hash, hash FROM audit_entry WHERE sequence = 3", 4, "previous hash"),
            ("DELETE FROM audit_entry WHERE sequence >= 5", 5, "entries removed from the end"),
        ]
        for (sql, sequence, says) in cases {
            guard let store = try backend.freshStore() else { return }
            try store.record((1...6).map { Self.entry($0) })
            for statement in sql.components(separatedBy: "; ") { try Backend.tamper(store, statement) }
            let (_, found) = try AuditChain.verify(store)
            #expect(found?.sequence == sequence && found?.description.contains(says) == true, "\(sql): \(String(describing: found))")
        }
    }

    @Test("appends from two handles at once (two instances) make one chain with no gaps", arguments: Backend.allCases)
    func concurrentAppends(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let other = try Backend.reopen(store)
        _ = try concurrently(16) { i in try (i % 2 == 0 ? store : other).record([Self.entry(i), Self.entry(i + 100)]) }
        #expect(try AuditChain.verify(store) == (32, nil))
        #expect(try store.auditHead()?.sequence == 32)
    }

    @Test("entries queued for the EHR go into the outbox with their append; a dead AuditEvent retried is queued again, not forgotten", arguments: Backend.allCases)
    func queuedForTheEHR(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let queueing: @Sendable (ChainedAuditEntry) -> OutboxItem = { row in
            var item = OutboxItem(versionUUID: UUID(), entityID: "audit-\(row.sequence)", idempotencyKey: "urn:test:entry|" + row.hash, payload: Array(row.hash.utf8))
            item.soleCopy = true
            return item
        }
        try store.record([Self.entry(1), Self.entry(2)], queueing: queueing)
        let queued = try store.outbox(state: .queued, limit: 10)
        #expect(queued.map(\.entityID) == ["audit-1", "audit-2"])
        let outcome = OutboxItem(versionUUID: UUID(), entityID: "outcome-1", idempotencyKey: "urn:caregate:outcome|outcome-1", payload: [])
        try store.enqueue([outcome])
        for item in queued + [outcome] { try store.markAttempt(item.versionUUID, error: "422", dead: true) }
        // Retried one by one (the dashboard) and all at once (push --retry-failed).
        #expect(try store.forgetFailed(versions: [queued[0].versionUUID]) == 1)
        #expect(try store.outbox(state: .queued, limit: 10).map(\.entityID) == ["audit-1"])
        #expect(try store.forgetFailed() == 2)
        let again = try store.outbox(state: .queued, limit: 10)
        #expect(Set(again.map(\.entityID)) == ["audit-1", "audit-2"] && again.allSatisfy { $0.attempts == 0 && $0.lastError == nil })
        #expect(try store.outboxCounts().failed == 0 && store.outboxEntities(versions: [outcome.versionUUID]).isEmpty)
        // The outcome's version is pending again, for the next push to export anew; the audit entries (their payload the only copy) are not.
        #expect(try store.pendingOutcomeVersions(limit: 10) == [outcome.versionUUID])
    }
}
