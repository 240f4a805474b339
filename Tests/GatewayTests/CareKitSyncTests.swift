import CareStore
import Foundation
import Testing
@testable import Gateway

/// Two patients' plans written by the gateway (as an import does), and devices syncing.
struct SyncFixture {
    let store: Backend.Store
    let sync: CareKitSync
    /// Per patient id: the plan's task (daily at 08:00 from 2026-11-01).
    var tasks: [String: CareTask] = [:]

    /// The fixture on a new store of `backend`; nil (after a SKIPPED line) without PostgreSQL.
    init?(_ backend: Backend, test: String = #function) throws {
        guard let store = try backend.freshStore(test) else { return nil }
        self.store = store
        sync = CareKitSync(store: store)
        for id in ["maria", "john"] { tasks[id] = try addPlan(for: id) }
    }

    func addPlan(for id: String) throws -> CareTask {
        let start = local("2026-11-01 00:00")
        let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: newYork)
        let plan = CarePlan(id: "plan-\(id)", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: newYork)
        var task = CareTask(id: "walk-\(id)", title: "Walk", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
        task.effectiveDate = start
        try store.add([.patient(patient), .carePlan(plan), .task(task)])
        return task
    }

    /// An outcome a device recorded for occurrence `occurrence` of the patient's task.
    func outcome(_ patient: String, occurrence: Int, steps: Int, created: Date = local("2026-11-02 09:00")) -> Outcome {
        var outcome = Outcome(taskUUID: tasks[patient]!.uuid, taskOccurrenceIndex: occurrence,
                              values: [OutcomeValue(.integer(steps), kind: "steps", createdDate: created)], effectiveDate: created, timezone: newYork)
        outcome.version.createdDate = created
        return outcome
    }

    /// Pulls every page for a device, as the CareKit client does, and returns the entities and the catch-up vector.
    func pullAll(_ patient: String, since: KnowledgeVector, limit: Int = 1_000) throws -> (entities: [CareEntity], catchUp: KnowledgeVector) {
        var cursor: CareKitSync.PullCursor?
        var entities: [CareEntity] = []
        while true {
            let page = try sync.pull(patientID: patient, since: since, limit: limit, cursor: cursor)
            entities += try page.record().entities
            guard let next = page.next else { return (entities, try #require(page.catchUp)) }
            #expect(page.catchUp == nil)
            cursor = next
        }
    }
}

@Suite("CareKit sync: knowledge per patient")
struct CareKitSyncTests {
    @Test("a first pull gets the patient's own versions, parents first, and a catch-up vector naming only the gateway; another patient's writes never show in it", arguments: Backend.allCases)
    func firstPull(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let (entities, catchUp) = try fixture.pullAll("maria", since: KnowledgeVector())
        #expect(entities.map(\.entityType) == [.patient, .carePlan, .task])
        #expect(entities.map(\.version.id) == ["maria", "plan-maria", "walk-maria"])
        #expect(catchUp.clocks.count == 1)
        // John's plan changes: Maria's vector does not move, and her device gets nothing.
        _ = try fixture.addPlan(for: "john2")
        var changed = fixture.tasks["john"]!
        changed.title = "Walk further"
        changed.version.effectiveDate = local("2026-11-05 00:00")
        try fixture.store.update([.task(changed)])
        #expect(try fixture.store.patientKnowledge("maria") == catchUp)
        let again = try fixture.sync.pull(patientID: "maria", since: catchUp)
        #expect(try again.record().entities.isEmpty && again.catchUp == catchUp && again.next == nil)
        // Maria's plan changes: her device gets the new task version only.
        var walk = fixture.tasks["maria"]!
        walk.title = "Walk 20 minutes"
        walk.version.effectiveDate = local("2026-11-05 00:00")
        try fixture.store.update([.task(walk)])
        let update = try fixture.pullAll("maria", since: catchUp)
        #expect(update.entities.map(\.version.id) == ["walk-maria"])
        #expect(update.entities.first?.version.previousVersionUUIDs == [fixture.tasks["maria"]!.uuid])
        #expect(!update.catchUp.isCovered(by: catchUp) && catchUp.isCovered(by: update.catchUp))
    }

    @Test("pages of one version each end with the catch-up vector; earlier pages carry only what the device knew", arguments: Backend.allCases)
    func paging(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let whole = try fixture.pullAll("maria", since: KnowledgeVector())
        let paged = try fixture.pullAll("maria", since: KnowledgeVector(), limit: 1)
        #expect(paged.entities.map(\.version.uuid) == whole.entities.map(\.version.uuid))
        #expect(paged.catchUp == whole.catchUp)
        let first = try fixture.sync.pull(patientID: "maria", since: KnowledgeVector(), limit: 1)
        #expect(first.knowledgeVector.isEmpty && first.next == CareKitSync.PullCursor(revision: first.next!.revision, offset: 1))
    }

    @Test("a pull's later pages come from the kept list, the same as worked out again; a write between pages does not change them; a dropped list is worked out again; the last page lets the list go", arguments: Backend.allCases)
    func pagesFromTheKeptList(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let kept = CareKitSync(store: fixture.store, pages: PullPageCache(capacity: 1))
        let first = try kept.pull(patientID: "maria", since: KnowledgeVector(), limit: 1)
        // Another write for Maria between the pages: the pages read up to the first's revision either way.
        var walk = fixture.tasks["maria"]!
        walk.title = "Walk further"
        try fixture.store.update([.task(walk)])
        let second = try kept.pull(patientID: "maria", since: KnowledgeVector(), limit: 1, cursor: first.next)
        let recomputed = try fixture.sync.pull(patientID: "maria", since: KnowledgeVector(), limit: 1, cursor: first.next)
        #expect(try second.record().entities.map(\.version.uuid) == recomputed.record().entities.map(\.version.uuid))
        #expect(second.next == recomputed.next)
        // John's pull takes the one place: Maria's next page is worked out again, the same.
        _ = try kept.pull(patientID: "john", since: KnowledgeVector(), limit: 1)
        let third = try kept.pull(patientID: "maria", since: KnowledgeVector(), limit: 1, cursor: second.next)
        let thirdAgain = try fixture.sync.pull(patientID: "maria", since: KnowledgeVector(), limit: 1, cursor: second.next)
        #expect(try third.record().entities.map(\.version.uuid) == thirdAgain.record().entities.map(\.version.uuid) && third.catchUp == thirdAgain.catchUp)

        let cache = PullPageCache()
        let paging = CareKitSync(store: fixture.store, pages: cache)
        var page = try paging.pull(patientID: "john", since: KnowledgeVector(), limit: 1)
        #expect(cache.count == 1)
        var pages = 1
        while let next = page.next {
            #expect(cache.count == 1)
            page = try paging.pull(patientID: "john", since: KnowledgeVector(), limit: 1, cursor: next)
            pages += 1
        }
        #expect(pages > 2 && page.catchUp != nil)
        #expect(cache.count == 0, "the last page served, the list is let go")
    }

    @Test("a paged pull whose later pages another instance works out again (no kept list) after an outcome on them was superseded gets the same list: nothing missed, nothing twice", arguments: Backend.allCases)
    func pagesAcrossInstances(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        // A device of Maria's records three outcomes; a second device pulls them a version a page.
        let pulled = try fixture.pullAll("maria", since: KnowledgeVector())
        let device = pulled.catchUp.setting(UUID(), to: 1)
        let outcomes = (1...3).map { fixture.outcome("maria", occurrence: $0, steps: $0) }
        _ = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: device.processes)],
                                  deviceKnowledge: device)
        let whole = try fixture.pullAll("maria", since: KnowledgeVector()).entities.map(\.version.uuid)
        let instanceA = CareKitSync(store: fixture.store, pages: PullPageCache())
        var page = try instanceA.pull(patientID: "maria", since: KnowledgeVector(), limit: 1)
        var received = try page.record().entities.map(\.version.uuid)
        // The first outcome is corrected after the first page (a new version superseding it).
        var corrected = outcomes[0]
        corrected.values = [OutcomeValue(.integer(100), kind: "steps")]
        try fixture.store.update([.outcome(corrected)])
        // The other pages come from another instance, which keeps no list.
        while let next = page.next {
            page = try fixture.sync.pull(patientID: "maria", since: KnowledgeVector(), limit: 1, cursor: next)
            received += try page.record().entities.map(\.version.uuid)
        }
        #expect(received == whole, "pages worked out again elsewhere differ from the list of the first page")
        // The correction comes with the next pull.
        let after = try fixture.pullAll("maria", since: try #require(page.catchUp)).entities
        let values: [OutcomeValue.Value] = after.compactMap { if case .outcome(let o) = $0 { o.values.first?.value } else { nil } }
        #expect(values == [.integer(100)])
    }

    @Test("a device's push is merged for its patient, stamped with its record's vector; the same push twice changes nothing; its own versions never come back to it", arguments: Backend.allCases)
    func push(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let pulled = try fixture.pullAll("maria", since: KnowledgeVector())
        let device = UUID()
        let vector = pulled.catchUp.setting(device, to: 1)
        let record = RevisionRecord(entities: [.outcome(fixture.outcome("maria", occurrence: 1, steps: 4200))], knowledgeVector: vector.processes)
        let result = try fixture.sync.push(patientID: "maria", records: [record], deviceKnowledge: vector)
        #expect(result.merged == 1 && result.conflicts.isEmpty && result.resolutions.isEmpty)
        #expect(result.knowledge == vector)
        #expect(try fixture.store.fetchOutcomes().count == 1)
        let twice = try fixture.sync.push(patientID: "maria", records: [record], deviceKnowledge: vector)
        #expect(twice.merged == 0 && twice.knowledge == vector)
        #expect(try fixture.store.fetchOutcomes(EntityQuery(versions: .history)).count == 1)
        // The device itself is up to date; a second device of Maria's gets the outcome.
        #expect(try fixture.sync.pull(patientID: "maria", since: vector).record().entities.isEmpty)
        let second = try fixture.pullAll("maria", since: KnowledgeVector())
        #expect(second.entities.map(\.entityType) == [.patient, .carePlan, .task, .outcome])
        #expect(second.catchUp == vector)
        // John's knowledge never names Maria's device.
        #expect(try fixture.store.patientKnowledge("john").clocks[device] == nil)
    }

    @Test("a push from a device that has not pulled the gateway's newer knowledge is refused (409), and nothing of it is stored", arguments: Backend.allCases)
    func pullFirst(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let pulled = try fixture.pullAll("maria", since: KnowledgeVector())
        var walk = fixture.tasks["maria"]!
        walk.title = "Walk 20 minutes"
        walk.version.effectiveDate = local("2026-11-05 00:00")
        try fixture.store.update([.task(walk)])
        let vector = pulled.catchUp.setting(UUID(), to: 1)
        let record = RevisionRecord(entities: [.outcome(fixture.outcome("maria", occurrence: 1, steps: 10))], knowledgeVector: vector.processes)
        #expect(throws: SyncError.pullFirst(try fixture.store.patientKnowledge("maria"))) {
            try fixture.sync.push(patientID: "maria", records: [record], deviceKnowledge: vector)
        }
        #expect(try fixture.store.fetchOutcomes().isEmpty)
    }

    @Test("a device stays inside its patient's data: another patient's task, patient or process, a forged vector, a record ahead of its device are refused, naming record, entity and field", arguments: Backend.allCases)
    func scope(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let maria = try fixture.pullAll("maria", since: KnowledgeVector()).catchUp
        let device = UUID()
        let vector = maria.setting(device, to: 1)
        func refusal(_ entities: [CareEntity], record: KnowledgeVector? = nil, device deviceVector: KnowledgeVector? = nil) -> String {
            let deviceVector = deviceVector ?? vector
            let stamp = (record ?? deviceVector).processes
            do {
                _ = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: entities, knowledgeVector: stamp)], deviceKnowledge: deviceVector)
                return "accepted"
            } catch {
                return "\(error)"
            }
        }
        let johnsOutcome = fixture.outcome("john", occurrence: 1, steps: 1)
        // Another patient's task reads as no task at all: the answer does not tell that it exists.
        #expect(refusal([.outcome(johnsOutcome)]) == "revisions[0] outcome \"\(johnsOutcome.id)\" taskUUID: \(fixture.tasks["john"]!.uuid.uuidString) names no version of this patient's that the gateway holds or this request sends")
        let john = try #require(fixture.store.fetchPatients(EntityQuery(ids: ["john"])).first)
        #expect(refusal([.patient(john)]).contains("uuid: \(john.uuid.uuidString) is a version outside this patient's data"))
        var renamed = Patient(id: "john", name: PersonName(givenName: "x"), effectiveDate: local("2026-11-01 00:00"))
        renamed.version.timezone = newYork
        #expect(refusal([.patient(renamed)]).contains("patient \"john\" id: a device writes its own patient only (\"maria\")"))
        let forged = vector.setting(maria.clocks.keys.first!, to: 999)
        #expect(refusal([.outcome(fixture.outcome("maria", occurrence: 1, steps: 1))], device: forged)
            .hasPrefix("knowledgeVector: claims clock 999 of the gateway's process"))
        #expect(refusal([.outcome(fixture.outcome("maria", occurrence: 1, steps: 1))], record: vector.setting(device, to: 2))
            .hasPrefix("revisions[0] knowledgeVector: is ahead of the device's own knowledge vector"))
        let stray = fixture.outcome("maria", occurrence: 1, steps: 1)
        var orphan = stray
        orphan.taskUUID = UUID()
        #expect(refusal([.outcome(orphan)]) == "revisions[0] outcome \"\(orphan.id)\" taskUUID: \(orphan.taskUUID.uuidString) names no version of this patient's that the gateway holds or this request sends")
        // A process John's device wrote with cannot write for Maria.
        let john0 = try fixture.pullAll("john", since: KnowledgeVector()).catchUp
        let johnsDevice = UUID()
        let johnVector = john0.setting(johnsDevice, to: 1)
        _ = try fixture.sync.push(patientID: "john", records: [RevisionRecord(entities: [.outcome(johnsOutcome)], knowledgeVector: johnVector.processes)],
                                  deviceKnowledge: johnVector)
        #expect(refusal([], device: vector.setting(johnsDevice, to: 1)).contains("names process \(johnsDevice.uuidString), which writes another patient's data"))
        #expect(try fixture.store.fetchOutcomes().map(\.id) == [johnsOutcome.id])
    }

    @Test("two devices record the same occurrence: the first recorded wins, the gateway appends one version superseding both, and each device receives that version, never the other's outcome", arguments: Backend.allCases)
    func duplicateOutcome(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let start = try fixture.pullAll("maria", since: KnowledgeVector()).catchUp
        let (d1, d2) = (UUID(), UUID())
        let v1 = start.setting(d1, to: 1)
        let early = fixture.outcome("maria", occurrence: 1, steps: 5000, created: local("2026-11-02 08:30"))
        let late = fixture.outcome("maria", occurrence: 1, steps: 7000, created: local("2026-11-02 09:30"))
        // Device 2 pushes first; device 1 (recorded earlier, offline) pulls then pushes its own.
        let v2 = start.setting(d2, to: 1)
        _ = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: [.outcome(late)], knowledgeVector: v2.processes)], deviceKnowledge: v2)
        let caught = try fixture.pullAll("maria", since: v1)
        let v1b = caught.catchUp.merged(with: v1).setting(d1, to: 2)
        let result = try fixture.sync.push(patientID: "maria", records: [RevisionRecord(entities: [.outcome(early)], knowledgeVector: v1.processes)], deviceKnowledge: v1b)
        let resolution = try #require(result.resolutions.first)
        #expect(result.resolutions.count == 1)
        #expect(resolution.kept == early.uuid && resolution.superseded == late.uuid && resolution.taskID == "walk-maria" && resolution.occurrence == 1)
        #expect(resolution.version.values == early.values && Set(resolution.version.version.previousVersionUUIDs) == [early.uuid, late.uuid])
        // One live outcome for the occurrence; both recorded ones in history.
        #expect(try fixture.store.fetchOutcomes().map(\.uuid) == [resolution.version.uuid])
        #expect(try fixture.store.fetchOutcomes(EntityQuery(versions: .history)).count == 3)
        // Each device gets the resolution and not the other's outcome.
        let toD1 = try fixture.pullAll("maria", since: v1b).entities.map(\.version.uuid)
        let toD2 = try fixture.pullAll("maria", since: v2).entities.map(\.version.uuid)
        #expect(toD1 == [resolution.version.uuid])
        #expect(toD2 == [resolution.version.uuid])
    }

    @Test("a page's bytes are its versions' CareKit JSON as stored, the same bytes as writing them decoded: versions with successors, HealthKit tasks, tombstones and outcomes' values included", arguments: Backend.allCases)
    func pageBytesAsStored(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        var walk = fixture.tasks["maria"]!
        walk.title = "Walk 20 minutes"
        walk.version.effectiveDate = local("2026-11-05 00:00")
        try fixture.store.update([.task(walk)])  // the first version now has a successor
        var steps = CareTask(id: "steps-maria", title: "Steps", carePlanUUID: fixture.tasks["maria"]!.carePlanUUID,
                             schedule: try Schedule.allDay(start: local("2026-11-01 00:00"), timeZone: newYork), timezone: newYork)
        steps.healthKitLinkage = HealthKitLinkage(quantityIdentifier: "HKQuantityTypeIdentifierStepCount", quantityType: .cumulative, unitString: "count")
        try fixture.store.add([.task(steps)])
        var outcome = fixture.outcome("maria", occurrence: 1, steps: 4200)
        outcome.values.append(OutcomeValue(.text("felt \"fine\" é"), kind: "note", createdDate: local("2026-11-02 09:00")))
        try fixture.store.add([.outcome(outcome)])
        _ = try fixture.store.delete(.task, ids: ["steps-maria"], of: "maria")
        var cursor: CareKitSync.PullCursor?
        var types: Set<EntityType> = []
        repeat {
            let page = try fixture.sync.pull(patientID: "maria", since: KnowledgeVector(), limit: 3, cursor: cursor)
            let decoded = try page.record()
            #expect(page.bytes() == decoded.bytes(), "page at \(String(describing: cursor))")
            #expect(decoded.entities.map(\.version.uuid) == page.versions.map(\.uuid), "the decoded record keeps the page's order")
            types.formUnion(page.versions.map(\.type))
            cursor = page.next
        } while cursor != nil
        #expect(types == [.patient, .carePlan, .task, .healthKitTask, .outcome])
        let history = try fixture.pullAll("maria", since: KnowledgeVector()).entities
        let walks = history.filter { $0.version.id == "walk-maria" }
        #expect(walks.count == 2 && walks[0].version.uuid == fixture.tasks["maria"]!.uuid && walks[0].version.nextVersionUUIDs == [walks[1].version.uuid],
                "a version with a successor is sent with it")
        #expect(history.contains { $0.version.id == "steps-maria" && $0.version.deletedDate != nil }, "the tombstone is sent")
    }
}
