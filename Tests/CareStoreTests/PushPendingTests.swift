@testable import CareStore
import Foundation
import GRDB
import Testing

/// The outcome versions a push has still to look at: noted by the store as it takes them, in the
/// writing transaction, and settled with their queueing, so that a push cycle reads what is new.
@Suite("Pending outcome versions, on every backend")
struct PushPendingTests {
    let rules = VersionRulesBackendTests()

    @Test("every outcome version the store takes is pending (a device's, an update, a deletion; no other kind) until settled; a dead letter retried is pending again",
          arguments: Backend.allCases)
    func noted(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (entities, task) = try rules.patient("maria")
        try store.apply([.add(entities)], for: nil)
        #expect(try store.pendingOutcomeVersions(limit: 10).isEmpty, "patients, plans and tasks are not pending")
        let first = rules.outcome(task, 1), second = rules.outcome(task, 2)
        try store.apply([.add([.outcome(first), .outcome(second)])], for: "maria")
        #expect(try store.pendingOutcomeVersions(limit: 10) == [first.uuid, second.uuid])
        #expect(try store.pendingOutcomeVersions(limit: 1) == [first.uuid])
        // Queued and settled together: the first; the second gave nothing to send, settled alone.
        let item = OutboxItem(versionUUID: first.uuid, entityID: "maria/\(first.id)", idempotencyKey: "urn:caregate:outcome|maria/\(first.id)", payload: [])
        #expect(try store.enqueue([item], settling: [first.uuid, second.uuid]) == 1)
        #expect(try store.pendingOutcomeVersions(limit: 10).isEmpty)
        // An update and a deletion are new versions: pending.
        var edited = first
        edited.values = [OutcomeValue(.boolean(false))]
        let updated = try store.apply([.update([.outcome(edited)])], for: "maria")
        let deleted = try store.apply([.delete(.outcome, ids: [second.id], at: VersionRulesBackendTests.start.addingTimeInterval(3 * 86_400))], for: "maria")
        #expect(try store.pendingOutcomeVersions(limit: 10) == (updated + deleted).map(\.version.uuid))
        try store.enqueue([], settling: (updated + deleted).map(\.version.uuid))
        // A dead letter retried is pending again; settled, it is not.
        try store.markAttempt(first.uuid, error: "422", dead: true)
        #expect(try store.forgetFailed(versions: [first.uuid]) == 1)
        #expect(try store.pendingOutcomeVersions(limit: 10) == [first.uuid])
        #expect(try store.outboxEntities(versions: [first.uuid]).isEmpty)
    }

    @Test("a store written before outcomes were noted gets its current outcome versions not queued yet pending once, when it is opened",
          arguments: Backend.allCases)
    func upgraded(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (entities, task) = try rules.patient("maria")
        try store.apply([.add(entities)], for: nil)
        let sent = rules.outcome(task, 1), unsent = rules.outcome(task, 2), replaced = rules.outcome(task, 3)
        try store.apply([.add([.outcome(sent), .outcome(unsent), .outcome(replaced)])], for: "maria")
        var edited = replaced
        edited.values = [OutcomeValue(.boolean(false))]
        let tip = try #require(try store.apply([.update([.outcome(edited)])], for: "maria").first)
        try store.enqueue([OutboxItem(versionUUID: sent.uuid, entityID: "maria/\(sent.id)", idempotencyKey: "k", payload: [])])
        // Back to the store as the release before left it: no pending table, no trigger.
        if backend == .sqlite {
            try Backend.tamper(store, """
                DROP TRIGGER push_pending_outcome; DROP TABLE push_pending; DELETE FROM grdb_migrations WHERE identifier = 'v14-push-pending'
                """)
        } else {
            for statement in ["DROP TABLE push_pending", "DROP FUNCTION push_pending_note() CASCADE", "DELETE FROM caregate_migration WHERE name = 'v10-push-pending'"] {
                try Backend.tamper(store, statement)
            }
        }
        let reopened = try Backend.reopen(store)
        #expect(Set(try reopened.pendingOutcomeVersions(limit: 10)) == [unsent.uuid, tip.version.uuid])
    }
}

/// Versions asked for by uuid are read through the uuid's index, however many are asked.
@Suite("Version queries by uuid")
struct VersionQueryPlanTests {
    @Test("a query of 2, 10 or 500 uuids of one kind searches the uuid index (SQLite took the kind's index from eight on, reading every outcome), and finds the same versions")
    func byUUID() throws {
        guard let store = try Backend.sqlite.freshStore() as? SQLiteCarePlanStore else { return }
        let rules = VersionRulesBackendTests()
        let (entities, task) = try rules.patient("maria")
        try store.add(entities)
        let outcomes = (1...12).map { rules.outcome(task, $0) }
        try store.add(outcomes.map { .outcome($0) })
        for count in [2, 10, 500] {
            let uuids = Array(outcomes.map(\.uuid).prefix(count)) + (0..<max(0, count - outcomes.count)).map { _ in UUID() }
            let select = VersionSelect(kind: "outcome", EntityQuery(versions: .history, uuids: uuids), dialect: .sqlite)
            let plan = try store.readDatabase { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + select.sql, arguments: StatementArguments(uuids)).map { $0["detail"] as String }
            }
            #expect(plan.contains { $0.contains("USING INDEX sqlite_autoindex_entity_version_1 (uuid=?)") }, "\(count): \(plan)")
            #expect(!plan.contains { $0.contains("entity_version_identity") }, "\(count): \(plan)")
            #expect(Set(try store.fetchOutcomes(EntityQuery(versions: .history, uuids: uuids)).map(\.uuid)) == Set(uuids.filter { u in outcomes.contains { $0.uuid == u } }))
        }
        // Through the uuid's index, a query scoped to another patient still finds none of Maria's versions.
        let (zoe, _) = try rules.patient("zoe")
        try store.add(zoe)
        #expect(try store.fetchOutcomes(EntityQuery(versions: .history, uuids: outcomes.map(\.uuid), patientIDs: ["zoe"])).isEmpty)
        #expect(try store.fetchOutcomes(EntityQuery(versions: .history, uuids: outcomes.map(\.uuid), patientIDs: ["maria"])).count == outcomes.count)
    }
}
