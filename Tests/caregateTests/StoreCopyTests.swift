import CareStore
import Foundation
import JSON
import PostgresStore
import Testing

/// `caregate store copy` between SQLite and PostgreSQL.
@Suite("caregate store copy")
struct StoreCopyTests {
    let cli = CommandLineTests()

    let refreshed = Date(timeIntervalSinceReferenceDate: 815_000_000)

    /// The demo patient imported, a device enrolled that pushed an outcome, the outbox with
    /// one outcome pushed and one queued, and the patient on the refresh schedule.
    func populatedStore(at path: String) async throws -> (device: Device, outcome: UUID) {
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", path, "--tz", "America/New_York"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let store = try SQLiteCarePlanStore(path: path)
        try store.addEnrollment(codeHash: "code-hash", patientID: "Patient/maria-lopez", expires: Date().addingTimeInterval(600))
        let device = try #require(try store.redeemEnrollment(codeHash: "code-hash", device: Device(id: "dev-1", patientID: "Patient/maria-lopez", tokenHash: "token-hash", enrolledAt: Date()), now: Date()))
        let walk = try #require(try store.fetchTasks(EntityQuery(patientIDs: ["Patient/maria-lopez"])).first { $0.id.hasSuffix("/229065009") })
        let outcome = Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.boolean(true))], effectiveDate: Date())
        let process = UUID()
        let knowledge = KnowledgeVector().setting(try #require(store.knowledgeVector().first?.id), to: try #require(store.knowledgeVector().first?.clock)).setting(process, to: 1)
        #expect(try store.mergeDeviceRecords([RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: knowledge.processes)],
                                             patientID: "Patient/maria-lopez", deviceKnowledge: knowledge) == 1)
        let pushed = UUID()
        try store.enqueue([OutboxItem(versionUUID: outcome.uuid, entityID: "Patient/maria-lopez/\(outcome.id)", idempotencyKey: "urn:caregate:outcome|x", payload: [1, 2]),
                           OutboxItem(versionUUID: pushed, entityID: "Patient/maria-lopez/old", idempotencyKey: "urn:caregate:outcome|old", payload: [3])])
        try store.record([.pushed(pushed, location: "https://ehr.example/Observation/9/_history/1")])
        // Maria refreshed from the EHR once: due again in fifteen minutes, changes looked for since then.
        try store.scheduleRefreshes([EnrolledPatient(storeID: "Patient/maria-lopez", ehrID: "maria-lopez")], now: refreshed)
        let claim = try #require(try store.claimRefresh(worker: "w", lease: 60, now: refreshed))
        try store.finishRefresh(claim, worker: "w", next: refreshed.addingTimeInterval(900), succeeded: true)
        // A survey form kept for her (bytes that are not UTF-8 too: kept as they are).
        try store.keep([StoredQuestionnaire(patientID: "Patient/maria-lopez", url: "https://clinic.example.org/fhir/Questionnaire/phq-9", version: "2.0",
                                            digest: "d1", title: "PHQ-9", resource: [0x7B, 0xFF, 0x7D], storedAt: refreshed)])
        return (device, outcome.uuid)
    }

    @Test("SQLite to PostgreSQL and back: the same versions, patients, stamps and knowledge, devices that still authenticate, the outbox in its states; into a store that is not empty, refused")
    func roundTrip() async throws {
        guard let (location, password) = try TestPostgres.freshLocation(), let passwordFile = ProcessInfo.processInfo.environment["CAREGATE_TEST_POSTGRES_PASSWORD_FILE"] else { return }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-copy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let original = dir.appendingPathComponent("original.sqlite").path
        let (device, outcome) = try await populatedStore(at: original)
        let url = "postgres://\(location.user)@\(location.host):\(location.port)/\(location.database)?sslmode=disable"

        let there = try await cli.caregate(["store", "copy", "--from", original, "--to", url, "--to-password-file", passwordFile])
        #expect(there.status == 0 && there.stdout.contains("version by version"), "\(there.stderr)")
        let back = dir.appendingPathComponent("back.sqlite").path
        let again = try await cli.caregate(["store", "copy", "--from", url, "--from-password-file", passwordFile, "--to", back])
        #expect(again.status == 0, "\(again.stderr)")

        let a = try SQLiteCarePlanStore(path: original), b = try PostgresCarePlanStore(location, password: password), c = try SQLiteCarePlanStore(path: back)
        let stores: [any StoreArchive & Outbox & DeviceRegistry & RefreshSchedule] = [a, b, c]
        let records = try stores.map { try $0.revisionRecord() }
        #expect(records[0].entities.count > 10)
        #expect(Set(records.map { RevisionRecord(entities: $0.entities, knowledgeVector: []).bytes() }).count == 1, "the same versions on all three")
        for store in stores {
            #expect(try store.knowledgeVector().first?.id == records[0].knowledgeVector.first?.id, "the CareKit process is the source's")
            #expect(try store.patientKnowledge("Patient/maria-lopez", upTo: nil) == a.patientKnowledge("Patient/maria-lopez", upTo: nil))
            #expect(try store.scopes(of: [outcome])[outcome]?.patientID == "Patient/maria-lopez")
            #expect(try store.device(tokenHash: "token-hash") == device)
            #expect(try store.outboxCounts() == OutboxCounts(queued: 1, pushed: 1, failed: 0))
            #expect(try store.lastPushed(entityIDs: ["Patient/maria-lopez/old"]).count == 1)
            #expect(try store.nextRefreshDue() == refreshed.addingTimeInterval(900))
            #expect(try store.questionnaires(of: "Patient/maria-lopez", url: "https://clinic.example.org/fhir/Questionnaire/phq-9", version: nil)
                .map { "\($0.version ?? "-") \($0.digest) \($0.title ?? "-") \($0.resource) \($0.storedAt == refreshed)" } == ["2.0 d1 PHQ-9 [123, 255, 125] true"])
            // What a device that synced against the source would pull next: nothing new.
            let knowledge = try a.patientKnowledge("Patient/maria-lopez", upTo: nil)
            #expect(try store.patientVersions("Patient/maria-lopez", notCoveredBy: knowledge, upTo: nil).versions.isEmpty)
        }
        // A write after the copy gets a number a device's old knowledge does not cover.
        let before = try a.patientKnowledge("Patient/maria-lopez", upTo: nil)
        let plan = try #require(try b.fetchCarePlans(EntityQuery(patientIDs: ["Patient/maria-lopez"])).first)
        var renamed = plan
        renamed.title = "Renamed after the copy"
        try b.update([.carePlan(renamed)])
        #expect(try b.patientVersions("Patient/maria-lopez", notCoveredBy: before, upTo: nil).versions.count == 1)

        let refused = try await cli.caregate(["store", "copy", "--from", original, "--to", url, "--to-password-file", passwordFile])
        #expect(refused.status != 0 && refused.stderr.contains("not empty"), "\(refused.stderr)")
        b.database.close()
    }
}
