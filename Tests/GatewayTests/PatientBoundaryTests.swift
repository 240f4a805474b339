import CarePages
import CareStore
import FHIR
import FHIRClient
import Foundation
import Testing
@testable import Gateway

/// Ids belong to one patient: what one patient's device or import names can neither write into
/// nor tell anything about another patient's entities of the same id.
@Suite("The patient boundary: ids are unique within a patient")
struct PatientBoundaryTests {
    /// What John's operators and devices see: his page's tasks, contacts and events, his pull.
    struct Seen: Equatable {
        var tasks: [String]
        var taskUUIDs: [UUID]
        var contacts: [String]
        var events: Int
        var outcomes: Int
        var pulled: [UUID]
        var knowledge: KnowledgeVector
    }

    func seen(_ patient: String, in fixture: SyncFixture) throws -> Seen {
        let now = local("2026-11-03 12:00")
        let page = try fixture.store.read { try PatientDashboard(patientID: patient, now: now, calendar: Schedule.calendar(newYork), devices: [], in: $0) }
        let pulled = try fixture.pullAll(patient, since: KnowledgeVector())
        return Seen(tasks: page.summary.tasks.map(\.id), taskUUIDs: page.taskVersions.map(\.uuid), contacts: page.contacts.map(\.id),
                    events: page.summary.events.count, outcomes: page.summary.events.filter { $0.outcome != nil }.count,
                    pulled: pulled.entities.map(\.version.uuid), knowledge: pulled.catchUp)
    }

    /// A task a device makes: daily at `hour` from November 1.
    func dailyTask(_ id: String, _ title: String, plan: UUID?, hour: Int) throws -> CareTask {
        let start = local("2026-11-01 00:00")
        var task = CareTask(id: id, title: title, carePlanUUID: plan,
                            schedule: try Schedule.dailyAtTime(hour: hour, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
        task.effectiveDate = start
        return task
    }

    /// Maria's device, caught up: its vector with one write of its own.
    func mariasDevice(_ fixture: SyncFixture) throws -> KnowledgeVector {
        try fixture.pullAll("maria", since: KnowledgeVector()).catchUp.setting(UUID(), to: 1)
    }

    @Test("a device's care plan named with another patient's plan id, with a task, a contact and an outcome under it, stays its patient's: the other's page, events and pulls are unchanged and the answer names no conflict", arguments: Backend.allCases)
    func foreignPlanID(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let johnBefore = try seen("john", in: fixture)
        let maria = try #require(fixture.store.fetchPatients(EntityQuery(ids: ["maria"])).first)
        let start = local("2026-11-01 00:00")
        let plan = CarePlan(id: "plan-john", title: "Mine", patientUUID: maria.uuid, effectiveDate: start, timezone: newYork)
        let task = try dailyTask("walk-john", "Intruder", plan: plan.uuid, hour: 9)
        let contact = Contact(id: "intruder", name: PersonName(givenName: "Eve"), carePlanUUID: plan.uuid, effectiveDate: start, timezone: newYork)
        let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(1))],
                              effectiveDate: local("2026-11-02 09:30"), timezone: newYork)
        let vector = try mariasDevice(fixture)
        let record = RevisionRecord(entities: [.carePlan(plan), .task(task), .contact(contact), .outcome(outcome)], knowledgeVector: vector.processes)
        let result = try fixture.sync.push(patientID: "maria", records: [record], deviceKnowledge: vector)
        #expect(result.merged == 4)
        #expect(result.conflicts.isEmpty, "the answer must not tell the device that another patient has these ids")
        #expect(try seen("john", in: fixture) == johnBefore)
        // Maria has her plan and task of those ids, beside her own.
        let mariaSeen = try seen("maria", in: fixture)
        #expect(mariaSeen.tasks.sorted() == ["walk-john", "walk-maria"])
        #expect(mariaSeen.contacts == ["intruder"])
        #expect(try fixture.store.conflicts().isEmpty)
        // John's own plan and task are still single tips, unlinked to Maria's.
        let johnsTasks = try fixture.store.fetchTasks(EntityQuery(ids: ["walk-john"], patientIDs: ["john"]))
        #expect(johnsTasks.map(\.uuid) == [fixture.tasks["john"]!.uuid] && johnsTasks[0].version.nextVersionUUIDs.isEmpty)
        let events = try fixture.store.events(from: local("2026-11-02 00:00"), to: local("2026-11-03 00:00"), tasks: EntityQuery(patientIDs: ["john"]))
        #expect(events.map(\.task.uuid) == [fixture.tasks["john"]!.uuid] && events.allSatisfy { $0.outcome == nil })
    }

    @Test("two patients' apps each creating task `doxylamine` (CareKit's sample app's fixed ids) make two tasks, each with its own outcomes and events, neither a conflict", arguments: Backend.allCases)
    func sameTaskIDForTwoPatients(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let start = local("2026-11-01 00:00")
        var created: [String: CareTask] = [:]
        for patient in ["maria", "john"] {
            let vector = try fixture.pullAll(patient, since: KnowledgeVector()).catchUp.setting(UUID(), to: 1)
            var task = CareTask(id: "doxylamine", title: "Doxylamine (\(patient))", carePlanUUID: fixture.tasks[patient]!.carePlanUUID,
                                schedule: try Schedule.dailyAtTime(hour: 20, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
            task.effectiveDate = start
            let taken = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: patient == "maria" ? 0 : 1, values: [OutcomeValue(.boolean(true))],
                                effectiveDate: local("2026-11-02 21:00"), timezone: newYork)
            let result = try fixture.sync.push(patientID: patient, records: [RevisionRecord(entities: [.task(task), .outcome(taken)], knowledgeVector: vector.processes)],
                                               deviceKnowledge: vector)
            #expect(result.merged == 2 && result.conflicts.isEmpty)
            created[patient] = task
        }
        #expect(try fixture.store.conflicts().isEmpty)
        for patient in ["maria", "john"] {
            let own = try fixture.store.fetchTasks(EntityQuery(ids: ["doxylamine"], patientIDs: [patient]))
            #expect(own.map(\.uuid) == [created[patient]!.uuid] && own[0].version.previousVersionUUIDs.isEmpty)
            let outcomes = try fixture.store.fetchOutcomes(EntityQuery(patientIDs: [patient], taskIDs: ["doxylamine"]))
            #expect(outcomes.map(\.taskUUID) == [created[patient]!.uuid])
            let events = try fixture.store.events(from: start, to: local("2026-11-03 00:00"), tasks: EntityQuery(ids: ["doxylamine"], patientIDs: [patient]))
            #expect(events.map(\.task.title) == Array(repeating: "Doxylamine (\(patient))", count: 2))
            #expect(events.compactMap(\.outcome).map(\.taskOccurrenceIndex) == [patient == "maria" ? 0 : 1])
            let pulled = try fixture.pullAll(patient, since: KnowledgeVector()).entities
            #expect(pulled.filter { $0.version.id == "doxylamine" }.map(\.version.uuid) == [created[patient]!.uuid])
        }
        // Across patients, the events of the two tasks stay two runs of one task each.
        let all = try fixture.store.events(from: start, to: local("2026-11-03 00:00"), tasks: EntityQuery(ids: ["doxylamine"]))
        #expect(all.count == 4 && all.compactMap(\.outcome).count == 2)
        // A device updating its own doxylamine updates that one only.
        var renamed = created["john"]!
        renamed.title = "Doxylamine, half a tablet"
        renamed.version.effectiveDate = local("2026-11-03 00:00")
        try fixture.store.update([.task(renamed)])
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["doxylamine"], patientIDs: ["maria"])).map(\.title) == ["Doxylamine (maria)"])
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["doxylamine"], patientIDs: ["john"])).map(\.title) == ["Doxylamine, half a tablet"])
        // Deleting is by patient too.
        try fixture.store.delete(.task, ids: ["doxylamine"], of: "maria", at: local("2026-11-04 00:00"))
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["doxylamine"])).map(\.title) == ["Doxylamine, half a tablet"])
    }

    @Test("ids a device pushed before another patient is imported are not that patient's: the import's versions link to none of them", arguments: Backend.allCases)
    func idsPushedBeforeTheirPatient(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let maria = try #require(fixture.store.fetchPatients(EntityQuery(ids: ["maria"])).first)
        let start = local("2026-11-01 00:00")
        let plan = CarePlan(id: "plan-zoe", title: "Squatted", patientUUID: maria.uuid, effectiveDate: start, timezone: newYork)
        let task = try dailyTask("walk-zoe", "Squatted", plan: plan.uuid, hour: 9)
        let vector = try mariasDevice(fixture)
        _ = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: [.carePlan(plan), .task(task)], knowledgeVector: vector.processes)],
                                  deviceKnowledge: vector)
        let zoesTask = try fixture.addPlan(for: "zoe")
        let zoes = try fixture.pullAll("zoe", since: KnowledgeVector()).entities
        #expect(zoes.map(\.version.id) == ["zoe", "plan-zoe", "walk-zoe"])
        #expect(zoes.allSatisfy { $0.version.previousVersionUUIDs.isEmpty })
        #expect(!zoes.map(\.version.uuid).contains(plan.uuid) && !zoes.map(\.version.uuid).contains(task.uuid))
        #expect(zoesTask.uuid != task.uuid)
        // Maria's versions are untouched: still tips, still hers.
        let mariasPlans = try fixture.store.fetchCarePlans(EntityQuery(ids: ["plan-zoe"], patientIDs: ["maria"]))
        #expect(mariasPlans.map(\.uuid) == [plan.uuid] && mariasPlans[0].version.nextVersionUUIDs.isEmpty)
        #expect(try fixture.store.conflicts().isEmpty)
    }

    @Test("a second patient's Bundle whose MedicationRequest ids equal the first's gets tasks of its own: the first patient's medication tasks stay on the first patient's plan")
    func importWithAnotherPatientsIDs() throws {
        let store = try temporaryStore()
        #expect(try importer(store).run([demoBundle]).failedPatients.isEmpty)
        let first = try #require(store.fetchPatients().first).id
        let before = try store.fetchTasks(EntityQuery(patientIDs: [first]))
        #expect(before.contains { $0.id.hasPrefix("MedicationRequest/metformin") })
        // Zoe's Bundle: the same MedicationRequests (ids and all), her own Patient, plan and results.
        let text = try String(contentsOfFile: demoBundle, encoding: .utf8).replacingOccurrences(of: "maria-lopez", with: "zoe-park")
        let zoeBundle = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-zoe-\(UUID().uuidString).json").path
        try text.write(toFile: zoeBundle, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: zoeBundle) }
        let report = try importer(store).run([zoeBundle])
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { $0.failure ?? "" })")
        let zoe = try #require(store.fetchPatients().map(\.id).first { $0 != first })
        #expect(try store.fetchTasks(EntityQuery(patientIDs: [first])).map(\.uuid) == before.map(\.uuid))
        let zoesTasks = try store.fetchTasks(EntityQuery(patientIDs: [zoe]))
        let medications = { (tasks: [CareTask]) in tasks.map(\.id).filter { $0.hasPrefix("MedicationRequest/") } }
        #expect(medications(zoesTasks) == medications(before) && medications(before).count == 4)
        #expect(Set(zoesTasks.map(\.uuid)).isDisjoint(with: before.map(\.uuid)))
        let zoesPlans = Set(try store.fetchCarePlans(EntityQuery(patientIDs: [zoe])).map(\.uuid))
        #expect(zoesTasks.allSatisfy { $0.carePlanUUID.map(zoesPlans.contains) == true })
        #expect(zoesTasks.allSatisfy { $0.version.previousVersionUUIDs.isEmpty })
        // Importing both again changes nothing for either.
        let again = try importer(store).run([demoBundle, zoeBundle])
        #expect(again.counts[.create] == nil && again.counts[.update] == nil, "\(again.counts)")
        #expect(try store.conflicts().isEmpty)
    }

    @Test("a write for one patient cannot link to another patient's versions, nor write another patient", arguments: Backend.allCases)
    func writesStayInTheirPatient(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let johnsPlan = try #require(fixture.store.fetchCarePlans(EntityQuery(patientIDs: ["john"])).first)
        let task = try dailyTask("sneak", "Sneak", plan: johnsPlan.uuid, hour: 9)
        #expect(throws: StoreError.missingParent(.task, id: "sneak", field: "carePlanUUID", uuid: johnsPlan.uuid)) {
            try fixture.store.apply([.add([.task(task)])], for: "maria")
        }
        let john = try #require(fixture.store.fetchPatients(EntityQuery(ids: ["john"])).first)
        var renamed = john
        renamed.name = PersonName(givenName: "Renamed")
        renamed.version.effectiveDate = local("2026-11-02 00:00")
        #expect(throws: StoreError.self) { try fixture.store.apply([.update([.patient(renamed)])], for: "maria") }
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["sneak"])).isEmpty)
        #expect(try fixture.store.fetchPatients(EntityQuery(ids: ["john"])).map(\.name.givenName) == ["john"])
    }
}

/// Fields the gateway derives from the EHR stay the gateway's: a device can neither set them nor
/// make the export, the refresh or the EHR identifier name another patient through them.
@Suite("The patient boundary: fields the gateway owns")
struct GatewayOwnedFieldsTests {
    /// Maria (the demo Bundle) and Zoe (the same Bundle under another patient), both imported.
    func twoImportedPatients() throws -> (store: SQLiteCarePlanStore, maria: String, zoe: String, cleanup: () -> Void) {
        let store = try temporaryStore()
        #expect(try importer(store).run([demoBundle]).failedPatients.isEmpty)
        let maria = try #require(store.fetchPatients().first).id
        let text = try String(contentsOfFile: demoBundle, encoding: .utf8).replacingOccurrences(of: "maria-lopez", with: "zoe-park")
        let zoeBundle = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-zoe-\(UUID().uuidString).json").path
        try text.write(toFile: zoeBundle, atomically: true, encoding: .utf8)
        #expect(try importer(store).run([zoeBundle]).failedPatients.isEmpty)
        let zoe = try #require(store.fetchPatients().map(\.id).first { $0 != maria })
        return (store, maria, zoe, { try? FileManager.default.removeItem(atPath: zoeBundle) })
    }

    /// A device of `patient` pushes `entities` after a full pull.
    func push(_ entities: [CareEntity], for patient: String, in store: SQLiteCarePlanStore) throws -> CareKitSync.PushResult {
        let sync = CareKitSync(store: store)
        var since = KnowledgeVector()
        while true {
            let page = try sync.pull(patientID: patient, since: since)
            if let catchUp = page.catchUp { since = catchUp; break }
        }
        let vector = since.setting(UUID(), to: 1)
        return try sync.push(patientID: patient, records: [RevisionRecord(entities: entities, knowledgeVector: vector.processes)], deviceKnowledge: vector)
    }

    @Test("a device's Patient naming another patient's EHR id, a task naming that patient's plan as its source and its outcome: stored without them; the export's subject is the device's own patient, with no basedOn of the other's; the refresh still pulls its own patient")
    func exportSubjectAndRefresh() throws {
        let (store, maria, zoe, cleanup) = try twoImportedPatients()
        defer { cleanup() }
        let zoeEHR = try #require(store.fetchPatients(EntityQuery(ids: [zoe])).first?.remoteID)
        let mariaEHR = try #require(store.fetchPatients(EntityQuery(ids: [maria])).first?.remoteID)
        let zoesPlan = try #require(store.fetchCarePlans(EntityQuery(patientIDs: [zoe])).first?.remoteID)
        var patient = try #require(store.fetchPatients(EntityQuery(ids: [maria])).first)
        patient.version.uuid = .timeOrdered()
        patient.version.previousVersionUUIDs = [try #require(store.fetchPatients(EntityQuery(ids: [maria])).first).uuid]
        patient.version.effectiveDate = local("2026-11-02 00:00")
        patient.version.remoteID = zoeEHR
        patient.version.source = VersionInfo.importedFromEHR
        patient.version.userInfo = ["caregate.resource": zoeEHR, "app.theme": "dark"]
        let plan = try #require(store.fetchCarePlans(EntityQuery(patientIDs: [maria])).first)
        var task = CareTask(id: "my-steps", title: "Steps", carePlanUUID: plan.uuid,
                            schedule: try Schedule.allDay(start: local("2026-11-01 00:00"), timeZone: newYork), timezone: newYork)
        task.effectiveDate = local("2026-11-01 00:00")
        task.version.remoteID = zoesPlan
        task.version.userInfo = ["caregate.resource": zoesPlan]
        var outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(5000), units: "count")],
                              effectiveDate: local("2026-11-02 20:00"), timezone: newYork)
        outcome.version.remoteID = "Observation/zoe-park-steps-2026-11-01"
        outcome.version.source = VersionInfo.importedFromEHR
        _ = try push([.patient(patient), .task(task), .outcome(outcome)], for: maria, in: store)

        // Stored without what the gateway owns; what the app keeps for itself stays.
        let stored = try #require(store.fetchPatients(EntityQuery(ids: [maria])).first)
        #expect(stored.uuid == patient.uuid && stored.remoteID == nil && stored.version.source == nil)
        #expect(stored.userInfo == ["app.theme": "dark"])
        #expect(try store.fetchTasks(EntityQuery(ids: ["my-steps"], patientIDs: [maria])).first.map { $0.remoteID == nil && $0.userInfo == nil } == true)

        let exported = try OutcomeExport(store: store, builder: try builder()).observations()
        let mine = try #require(exported.first { $0.outcomeVersion == outcome.uuid }, "a device's outcome is exported, whatever source it claims")
        #expect(mine.observation.first("subject")?.string("reference") == mariaEHR)
        #expect(mine.observation.first("basedOn") == nil)
        #expect(mine.identifier == Outcome.scopedID(patientID: maria, outcomeID: outcome.id))
        #expect(exported.allSatisfy { $0.observation.first("subject")?.string("reference") != zoeEHR })

        // The refresh pulls Maria from her own EHR id, not the one her device named.
        let enrollment = DeviceEnrollment(store: store)
        _ = try enrollment.redeem(code: try enrollment.issueCode(patientID: maria).code)
        let refresh = PatientRefresh(client: FHIRRESTClient(base: "http://127.0.0.1:9/fhir"), importer: try importer(store), devices: store)
        #expect(try refresh.enrolledPatients().map(\.ehrID) == [String(mariaEHR.dropFirst("Patient/".count))])
    }

    @Test("two patients' devices using one outcome id get two EHR identifiers: neither amends nor voids the other's resource")
    func outcomeIdentifiers() throws {
        let (store, maria, zoe, cleanup) = try twoImportedPatients()
        defer { cleanup() }
        var pushed: [String: Outcome] = [:]
        for patient in [maria, zoe] {
            let plan = try #require(store.fetchCarePlans(EntityQuery(patientIDs: [patient])).first)
            var task = CareTask(id: "mood", title: "Mood", carePlanUUID: plan.uuid,
                                schedule: try Schedule.allDay(start: local("2026-11-01 00:00"), timeZone: newYork), timezone: newYork)
            task.effectiveDate = local("2026-11-01 00:00")
            let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(patient == maria ? 3 : 4))],
                                  effectiveDate: local("2026-11-02 20:00"), id: "outcome-1", timezone: newYork)
            _ = try push([.task(task), .outcome(outcome)], for: patient, in: store)
            pushed[patient] = outcome
        }
        let exported = try OutcomeExport(store: store, builder: try builder()).observations()
        let identifiers = Set(exported.filter { [pushed[maria]!.uuid, pushed[zoe]!.uuid].contains($0.outcomeVersion) }.map(\.identifier))
        #expect(identifiers == [Outcome.scopedID(patientID: maria, outcomeID: "outcome-1"), Outcome.scopedID(patientID: zoe, outcomeID: "outcome-1")])
        #expect(Outcome.scopedID(patientID: "a/b", outcomeID: "c") != Outcome.scopedID(patientID: "a", outcomeID: "b/c"))
    }

    @Test("an outcome queued before identifiers named their patient is amended and voided under the identifier it went out with; another patient's outcome of the same id, and new outcomes, get scoped ones")
    func identifiersFromBeforeTheUpgrade() throws {
        let (store, maria, zoe, cleanup) = try twoImportedPatients()
        defer { cleanup() }
        var firsts: [String: Outcome] = [:]
        for patient in [maria, zoe] {
            let plan = try #require(store.fetchCarePlans(EntityQuery(patientIDs: [patient])).first)
            var task = CareTask(id: "mood", title: "Mood", carePlanUUID: plan.uuid,
                                schedule: try Schedule.allDay(start: local("2026-11-01 00:00"), timeZone: newYork), timezone: newYork)
            task.effectiveDate = local("2026-11-01 00:00")
            let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(3))],
                                  effectiveDate: local("2026-11-02 20:00"), id: "outcome-1", timezone: newYork)
            _ = try push([.task(task), .outcome(outcome)], for: patient, in: store)
            firsts[patient] = outcome
        }
        // The gateway before the upgrade queued Maria's outcome under its bare id.
        try store.enqueue([OutboxItem(versionUUID: firsts[maria]!.uuid, entityID: "outcome-1", idempotencyKey: "urn:caregate:outcome|outcome-1", payload: [])])
        let push = OutcomePush(outbox: store, export: OutcomeExport(store: store, builder: try builder()),
                               client: FHIRRESTClient(base: "http://127.0.0.1:9/fhir"))
        func queued(_ version: UUID) throws -> (entity: String, key: String, identifier: String?, status: String?) {
            let item = try #require(try store.outbox(state: .queued, limit: 100).first { $0.versionUUID == version })
            let resource = try #require(try FHIRJSONReader().read(item.payload).resource)
            return (item.entityID, item.idempotencyKey, resource.first("identifier")?.string("value"), resource.string("status"))
        }
        #expect(try push.enqueue() == 1)
        #expect(try queued(firsts[zoe]!.uuid).entity == Outcome.scopedID(patientID: zoe, outcomeID: "outcome-1"))

        // Both devices amend their outcome; then Maria's device deletes hers.
        var amended: [String: Outcome] = [:]
        for patient in [maria, zoe] {
            var next = firsts[patient]!
            next.version.uuid = .timeOrdered()
            next.version.previousVersionUUIDs = [firsts[patient]!.uuid]
            next.values = [OutcomeValue(.integer(4))]
            next.version.effectiveDate = local("2026-11-02 21:00")
            _ = try self.push([.outcome(next)], for: patient, in: store)
            amended[patient] = next
        }
        #expect(try push.enqueue() == 2)
        let mariaAmended = try queued(amended[maria]!.uuid)
        #expect(mariaAmended.entity == "outcome-1" && mariaAmended.key == "urn:caregate:outcome|outcome-1")
        #expect(mariaAmended.identifier == "outcome-1" && mariaAmended.status == "amended")
        let zoeAmended = try queued(amended[zoe]!.uuid)
        #expect(zoeAmended.entity == Outcome.scopedID(patientID: zoe, outcomeID: "outcome-1") && zoeAmended.identifier == zoeAmended.entity)

        var tombstone = amended[maria]!
        tombstone.version.uuid = .timeOrdered()
        tombstone.version.previousVersionUUIDs = [amended[maria]!.uuid]
        tombstone.version.deletedDate = local("2026-11-02 22:00")
        tombstone.version.effectiveDate = local("2026-11-02 22:00")
        _ = try self.push([.outcome(tombstone)], for: maria, in: store)
        #expect(try push.enqueue() == 1)
        let voided = try queued(tombstone.uuid)
        #expect(voided.identifier == "outcome-1" && voided.status == "entered-in-error")

        // A new outcome of Maria's, after the upgrade, is scoped.
        let task = try #require(store.fetchTasks(EntityQuery(ids: ["mood"], patientIDs: [maria])).first)
        let later = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 2, values: [OutcomeValue(.integer(5))],
                            effectiveDate: local("2026-11-03 20:00"), id: "outcome-2", timezone: newYork)
        _ = try self.push([.outcome(later)], for: maria, in: store)
        #expect(try push.enqueue() == 1)
        #expect(try queued(later.uuid).identifier == Outcome.scopedID(patientID: maria, outcomeID: "outcome-2"))
    }
}

/// The sizes and links a device's push is held to.
@Suite("The patient boundary: what one device may cost and link")
struct DevicePushBoundsTests {
    func refusal(_ entities: [CareEntity], in fixture: SyncFixture, vector: KnowledgeVector? = nil) throws -> String {
        let pulled = try fixture.pullAll("maria", since: KnowledgeVector()).catchUp
        let vector = vector ?? pulled.setting(UUID(), to: 1)
        do {
            _ = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: entities, knowledgeVector: vector.processes)], deviceKnowledge: vector)
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    func task(_ id: String, plan: UUID?, interval: DateComponents, elements: Int = 1) throws -> CareTask {
        let start = local("2026-11-01 00:00")
        let calendar = Schedule.calendar(newYork)
        let schedule = try Schedule(elements: (0..<elements).map { i in
            ScheduleElement(start: start.addingTimeInterval(Double(i) * 60), interval: interval, calendar: calendar)
        })
        var task = CareTask(id: id, title: id, carePlanUUID: plan, schedule: schedule, timezone: newYork)
        task.effectiveDate = start
        return task
    }

    @Test("a device task's schedule is bounded: one every second, or 65 elements, is refused naming the field; hourly is stored; nothing of a refused push is", arguments: Backend.allCases)
    func scheduleBounds(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let plan = fixture.tasks["maria"]!.carePlanUUID
        let everySecond = try task("flood", plan: plan, interval: DateComponents(second: 1))
        #expect(try refusal([.task(everySecond)], in: fixture)
            == "revisions[0] task \"flood\" schedule: has up to 86400 occurrences a day; a task has at most 96 (one every 15 minutes)")
        let many = try task("many", plan: plan, interval: DateComponents(day: 1), elements: 65)
        #expect(try refusal([.task(many)], in: fixture) == "revisions[0] task \"many\" schedule: has 65 elements; a task has at most 64")
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["flood", "many"])).isEmpty)
        #expect(try refusal([.task(try task("hourly", plan: plan, interval: DateComponents(hour: 1)))], in: fixture) == "accepted")
    }

    @Test("a knowledge vector of many invented processes is refused: one vector, and so one patient, holds at most 256 device processes", arguments: Backend.allCases)
    func vectorBounds(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let pulled = try fixture.pullAll("maria", since: KnowledgeVector()).catchUp
        var wide = pulled
        for _ in 0..<300 { wide = wide.setting(UUID(), to: 1) }
        #expect(try refusal([], in: fixture, vector: wide) == "knowledgeVector: names 301 processes; a vector names at most 257")
        // 256 device processes over several pushes, then one more is refused.
        var known = pulled
        for _ in 0..<4 {
            var vector = known
            for _ in 0..<64 { vector = vector.setting(UUID(), to: 1) }
            _ = try fixture.sync.push(patientID: "maria", records: [], deviceKnowledge: vector)
            known = try fixture.store.patientKnowledge("maria")
        }
        #expect(known.clocks.count == 257)
        // A device's vector covers its patient's knowledge (else: pull first), so the patient is full.
        #expect(try refusal([], in: fixture, vector: known.setting(UUID(), to: 1)) == "knowledgeVector: names 258 processes; a vector names at most 257")
        let gateway = try #require(fixture.store.knowledgeVector().first?.id)
        let other = try #require(known.clocks.keys.first { $0 != gateway })
        let swapped = try KnowledgeVector(processes: known.processes.filter { $0.id != other }).setting(UUID(), to: 1)
        #expect(try refusal([], in: fixture, vector: swapped) == "the gateway has knowledge this device has not pulled: pull first")
        #expect(try refusal([], in: fixture, vector: known) == "accepted")
    }

    @Test("links are the gateway's: a device's successors are ignored, a version naming itself or a cycle is refused, versions of one record are merged in the order their links give, and an unknown or another patient's previous version reads the same", arguments: Backend.allCases)
    func links(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let plan = fixture.tasks["maria"]!.carePlanUUID
        // A successor a device names does not end a version.
        var named = try task("named", plan: plan, interval: DateComponents(day: 1))
        named.version.nextVersionUUIDs = [fixture.tasks["maria"]!.uuid]
        #expect(try refusal([.task(named)], in: fixture) == "accepted")
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["named"])).map(\.uuid) == [named.uuid])
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["walk-maria"])).map(\.uuid) == [fixture.tasks["maria"]!.uuid])
        // Itself, and a cycle.
        var selfish = try task("selfish", plan: plan, interval: DateComponents(day: 1))
        selfish.version.previousVersionUUIDs = [selfish.uuid]
        #expect(try refusal([.task(selfish)], in: fixture) == "revisions[0] task \"selfish\" previousVersionUUIDs: names the version itself")
        var a = try task("loop", plan: plan, interval: DateComponents(day: 1)), b = a
        b.version.uuid = UUID()
        a.version.previousVersionUUIDs = [b.uuid]
        b.version.previousVersionUUIDs = [a.uuid]
        #expect(try refusal([.task(a), .task(b)], in: fixture) == "revisions[0] task \"loop\" previousVersionUUIDs: versions of this record name each other as previous versions")
        // A second version listed before the first: merged after it, one current version.
        let first = try task("ordered", plan: plan, interval: DateComponents(day: 1))
        var second = first
        second.version.uuid = UUID()
        second.title = "second"
        second.version.effectiveDate = local("2026-11-02 00:00")
        second.version.previousVersionUUIDs = [first.uuid]
        #expect(try refusal([.task(second), .task(first)], in: fixture) == "accepted")
        #expect(try fixture.store.fetchTasks(EntityQuery(ids: ["ordered"])).map(\.title) == ["second"])
        #expect(try fixture.store.conflicts().isEmpty)
        // Another patient's version and no version at all read the same.
        func previous(_ uuid: UUID) throws -> String {
            var next = try task("walk-maria", plan: plan, interval: DateComponents(day: 1))
            next.version.previousVersionUUIDs = [uuid]
            next.version.uuid = UUID(uuidString: "00000000-0000-7000-8000-000000000001")!
            return try refusal([.task(next)], in: fixture).replacingOccurrences(of: uuid.uuidString, with: "X")
        }
        let johns = try previous(fixture.tasks["john"]!.uuid)
        #expect(johns == "revisions[0] task \"walk-maria\" previousVersionUUIDs: X names no earlier task version of this patient's that the gateway holds or this request sends")
        #expect(try previous(UUID()) == johns)
        // A previous version of another kind is refused too.
        #expect(try previous(plan!).hasSuffix("names no earlier task version of this patient's that the gateway holds or this request sends"))
    }

    @Test("a device revoked while its push waits merges nothing: the enrollment is checked again inside the push's transaction", arguments: Backend.allCases)
    func revokedInFlight(backend: Backend) async throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let enrollment = DeviceEnrollment(store: fixture.store)
        let (device, token) = try enrollment.redeem(code: try enrollment.issueCode(patientID: "maria").code)
        #expect(try enrollment.authenticate(token: token)?.id == device.id)  // what the route did before reading the body
        #expect(try fixture.store.revokeDevice(id: device.id, at: Date()))
        let vector = try fixture.pullAll("maria", since: KnowledgeVector()).catchUp.setting(UUID(), to: 1)
        let record = RevisionRecord(entities: [.outcome(fixture.outcome("maria", occurrence: 1, steps: 10))], knowledgeVector: vector.processes)
        let pushes = PushCommitGroups(sync: fixture.sync)
        let result = await pushes.push(patientID: "maria", records: [record], deviceKnowledge: vector, deviceID: device.id)
        #expect(throws: SyncError.revoked) { try result.get() }
        #expect(try fixture.store.fetchOutcomes().isEmpty)
        // Another patient's device id is no key to Maria's data either.
        let (johns, _) = try enrollment.redeem(code: try enrollment.issueCode(patientID: "john").code)
        #expect(throws: SyncError.revoked) { try fixture.sync.push(patientID: "maria", records: [record], deviceKnowledge: vector, deviceID: johns.id) }
    }
}
