import Foundation
import GRDB
import Testing
@testable import CareStore
@testable import PostgresStore

/// A store left by any earlier CareGate opens in place: each earlier schema (every prefix of the
/// migrations) is written, then opened by today's store, which must work as a new one does.
@Suite("Upgrading a store written by each earlier schema")
struct SchemaUpgradeTests {
    /// What today's store must do after an upgrade: write the care plan and an outcome, queue
    /// and claim an outcome for the push, count an attempt, keep a session.
    func exercise(_ store: some CarePlanWriter & Outbox & AccessLedger, patient: String) throws {
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
        let (entities, task) = try VersionRulesBackendTests().patient(patient)
        _ = try store.apply([.add(entities)], for: nil)
        _ = try store.apply([.add([.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.boolean(true))],
                                                     effectiveDate: start.addingTimeInterval(90_000), timezone: zone))])], for: patient)
        let item = outboxItem(1)
        #expect(try store.enqueue([item]) == 1)
        #expect(try store.claim(limit: 5, worker: "upgraded", lease: 60, now: Date()).map(\.versionUUID) == [item.versionUUID])
        #expect(try store.reserveAttempt(client: "203.0.113.9", limit: 1, window: 60, now: Date()) == nil)
        try store.openSession(idHash: "h", csrf: "c", now: Date())
        #expect(try store.touchSession(idHash: "h", idleTimeout: 60, now: Date()) == "c")
    }

    @Test("SQLite: a store left at each earlier migration opens in place and works (the upgrades of stores holding data: the patient-sync and identity tests)")
    func sqlite() throws {
        let names = SQLiteCarePlanStore.migrator.migrations
        for count in 1..<names.count {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-upgrade-\(UUID().uuidString).sqlite").path
            defer { try? FileManager.default.removeItem(atPath: path) }
            let queue = try DatabaseQueue(path: path)
            try SQLiteCarePlanStore.migrator.migrate(queue, upTo: names[count - 1])
            try queue.close()
            let store = try SQLiteCarePlanStore(path: path)
            #expect(try store.readDatabase { try SQLiteCarePlanStore.migrator.hasCompletedMigrations($0) }, "after \(names[count - 1])")
            try exercise(store, patient: "maria")
        }
    }

    @Test("PostgreSQL: a database at each earlier migration opens in place, migrates under its lock, and works")
    func postgres() throws {
        for count in 1..<PostgresSchema.migrations.count {
            guard let (location, password) = try TestPostgres.freshLocation() else { return }
            let database = try PostgresDatabase(location, password: password, maximumConnections: 2)
            #expect(try PostgresSchema.migrate(database, upTo: count).count == count)
            let store = try PostgresCarePlanStore(database)
            #expect(try PostgresSchema.applied(database) == PostgresSchema.migrations.map(\.name))
            #expect(try store.outboxCounts() == OutboxCounts())
            try store.writeVersions { writer in
                let (entities, _) = try VersionRulesBackendTests().patient("maria")
                #expect(try writer.add(entities, patientID: nil).count == 3)
            }
        }
    }

    @Test("PostgreSQL v4: a store holding versions gets each patient's newest gateway version on its clock row, the device versions above it not counted, and reads the same knowledge as before")
    func postgresGatewayRevision() throws {
        guard let (location, password) = try TestPostgres.freshLocation() else { return }
        let store = try PostgresCarePlanStore(location, password: password)
        let rules = VersionRulesBackendTests()
        let (entities, task) = try rules.patient("maria")
        try store.apply([.add(entities)], for: nil)
        _ = try store.apply([.add(try rules.patient("john").entities)], for: nil)
        // A device's outcome above the gateway's three versions of Maria.
        let device = KnowledgeVector().setting(UUID(), to: 1)
        let known = try store.patientKnowledge("maria").merged(with: device)
        try store.write { tx in
            try tx.mergeDeviceRecords([RevisionRecord(entities: [.outcome(rules.outcome(task, 1))], knowledgeVector: device.processes)],
                                      patientID: "maria", deviceKnowledge: known)
        }
        let before = try store.patientKnowledge("maria")
        #expect(before.clocks.values.sorted() == [1, 3], "the device's process at 1, the gateway's at its third version")
        // The store as v3 left it: no column, the migration not applied.
        try store.database.withSession { session in
            try session.execute("ALTER TABLE patient_clock DROP COLUMN gateway_revision")
            try session.execute("DELETE FROM caregate_migration WHERE name = 'v4-gateway-revision'")
        }
        let upgraded = try PostgresCarePlanStore(PostgresDatabase(location, password: password))
        #expect(try PostgresSchema.applied(upgraded.database).last == "v4-gateway-revision")
        #expect(try upgraded.patientKnowledge("maria") == before)
        #expect(try upgraded.patientKnowledge("john").clocks.values.sorted() == [3])
    }
    /// A dead AuditEvent and a dead outcome as a store before the `sole_copy` column kept them,
    /// with the backend's literals for the two version UUIDs and the payload.
    static func deadLetters(_ first: String, _ second: String, payload: String) -> String {
        """
        INSERT INTO push_outbox (version_uuid, entity_id, idempotency_key, payload, state, queued_at) VALUES
        (\(first), 'audit-1', 'urn:caregate:audit|caregate-1', \(payload), 'failed', 1), (\(second), 'outcome-1', 'urn:caregate:outcome|o-1', \(payload), 'failed', 2)
        """
    }

    @Test("SQLite and PostgreSQL: an AuditEvent dead-lettered before the sole-copy column is known by its key as the upgrade adds it: a retry queues it again and takes out the dead outcome", arguments: ["sqlite", "postgres"])
    func soleCopyBackfill(backend: String) throws {
        let store: any Outbox
        if backend == "sqlite" {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-upgrade-\(UUID().uuidString).sqlite").path
            let queue = try DatabaseQueue(path: path)
            try SQLiteCarePlanStore.migrator.migrate(queue, upTo: "v12-audit-trail")
            try queue.write { db in
                try db.execute(sql: Self.deadLetters("x'00000000000000000000000000000001'", "x'00000000000000000000000000000002'", payload: "x'7B7D'"))
            }
            try queue.close()
            store = try SQLiteCarePlanStore(path: path)
        } else {
            guard let (location, password) = try TestPostgres.freshLocation() else { return }
            let database = try PostgresDatabase(location, password: password, maximumConnections: 2)
            _ = try PostgresSchema.migrate(database, upTo: try #require(PostgresSchema.migrations.firstIndex { $0.name == "v9-outbox-sole-copy" }))
            try database.withSession { session in
                try session.execute(Self.deadLetters("'00000000-0000-0000-0000-000000000001'", "'00000000-0000-0000-0000-000000000002'", payload: "'\\x7b7d'"))
            }
            store = try PostgresCarePlanStore(database)
        }
        #expect(try store.outbox(state: .failed, limit: 10).map { "\($0.entityID) \($0.soleCopy)" }.sorted() == ["audit-1 true", "outcome-1 false"])
        #expect(try store.forgetFailed() == 2)
        #expect(try store.outbox(state: .queued, limit: 10).map(\.entityID) == ["audit-1"])
        #expect(try store.outboxCounts() == OutboxCounts(queued: 1, pushed: 0, failed: 0))
    }
}
