import CareStore
import Dispatch
import Foundation
import PostgresStore
import Testing

/// The store's write rules, each write its own transaction, on either backend.
struct RuleWrites {
    var add: ([CareEntity], String?) throws -> [CareEntity]
    var update: ([CareEntity], String?) throws -> [CareEntity]
    var delete: (EntityType, [String], String?, Date) throws -> [CareEntity]
    var mergeDevice: ([RevisionRecord], String, KnowledgeVector) throws -> Int

    /// A new, empty store of `backend`, or nil after a SKIPPED line.
    static func fresh(_ backend: Backend, _ test: String = #function) throws -> RuleWrites? {
        switch backend {
        case .sqlite:
            let store = try SQLiteCarePlanStore(inMemory: ())
            return RuleWrites(add: { e, p in try store.apply([.add(e)], for: p) },
                              update: { e, p in try store.apply([.update(e)], for: p) },
                              delete: { t, ids, p, d in try store.delete(t, ids: ids, of: p, at: d) },
                              mergeDevice: { r, p, k in try store.mergeDeviceRecords(r, patientID: p, deviceKnowledge: k) })
        case .postgres:
            guard let (location, password) = try TestPostgres.freshLocation(test) else { return nil }
            let store = try PostgresCarePlanStore(location, password: password)
            return RuleWrites(add: { e, p in try store.writeVersions { try $0.add(e, patientID: p) } },
                              update: { e, p in try store.writeVersions { try $0.update(e, patientID: p) } },
                              delete: { t, ids, p, d in try store.writeVersions { try $0.delete(t, ids: ids, patientID: p, at: d) } },
                              mergeDevice: { r, p, k in try store.writeVersions { try $0.mergeDeviceRecords(r, patientID: p, deviceKnowledge: k) } })
        }
    }
}

@Suite("The store's write rules, on every backend")
struct VersionRulesBackendTests {
    static let zone = TimeZone(identifier: "America/New_York")!
    static let start = Date(timeIntervalSinceReferenceDate: 815_202_000)  // 2026-11-01 00:00 in New York

    /// A patient with a plan and a daily task `doxylamine` (CareKit's sample app's fixed id).
    func patient(_ id: String) throws -> (entities: [CareEntity], task: CareTask) {
        let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: Self.start, timezone: Self.zone)
        let plan = CarePlan(id: "plan", title: "Home care", patientUUID: patient.uuid, effectiveDate: Self.start, timezone: Self.zone)
        var task = CareTask(id: "doxylamine", title: "Doxylamine", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: Self.start, timeZone: Self.zone), timezone: Self.zone)
        task.effectiveDate = Self.start
        return ([.patient(patient), .carePlan(plan), .task(task)], task)
    }

    func outcome(_ task: CareTask, _ occurrence: Int, id: String = UUID().uuidString) -> Outcome {
        Outcome(taskUUID: task.uuid, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.boolean(true))],
                effectiveDate: Self.start.addingTimeInterval(Double(occurrence) * 86_400 + 9 * 3600), id: id, timezone: Self.zone)
    }

    func refusal(_ body: () throws -> Any) -> StoreError? {
        do { _ = try body(); return nil } catch { return error as? StoreError }
    }

    @Test("identity is (patient, kind, id); one live outcome per occurrence; no orphaned outcomes; links, parents and tombstones as the rules say; a refused write leaves nothing",
          arguments: Backend.allCases)
    func rules(backend: Backend) throws {
        guard let writes = try RuleWrites.fresh(backend) else { return }
        let (maria, mariasTask) = try patient("maria")
        let (zoe, zoesTask) = try patient("zoe")
        #expect(try writes.add(maria, nil).count == 3)
        #expect(try writes.add(zoe, nil).count == 3, "another patient's task `doxylamine` is a task of its own")
        #expect(refusal { try writes.add([maria[2]], "maria") } == .alreadyExists(.task, id: "doxylamine"))

        let first = outcome(mariasTask, 2)
        #expect(try writes.add([.outcome(first)], "maria").count == 1)
        #expect(refusal { try writes.add([.outcome(outcome(mariasTask, 2))], "maria") } == .duplicateOutcome(taskID: "doxylamine", occurrence: 2))
        #expect(refusal { try writes.add([.outcome(outcome(mariasTask, 3, id: "ok")), .outcome(outcome(zoesTask, 2, id: "zoes"))], "maria") }
                == .missingParent(.outcome, id: "zoes", field: "taskUUID", uuid: zoesTask.uuid), "zoe's task is not maria's")
        #expect(refusal { try writes.add([.outcome(outcome(mariasTask, 3, id: "ok"))], "zoe") }
                == .missingParent(.outcome, id: "ok", field: "taskUUID", uuid: mariasTask.uuid))
        #expect(try writes.add([.outcome(outcome(mariasTask, 3, id: "ok"))], "maria").count == 1, "the refused write above left nothing behind")

        var earlier = mariasTask
        earlier.version.effectiveDate = Self.start.addingTimeInterval(86_400)
        earlier.title = "Doxylamine 25 mg"
        guard case .wouldOrphanOutcomes(let taskID, let count, _, _)? = refusal({ try writes.update([.task(earlier)], "maria") }) else {
            Issue.record("an update before the outcome's event must be refused")
            return
        }
        #expect(taskID == "doxylamine" && count == 2, "the outcomes at occurrences 2 and 3")
        #expect(refusal { try writes.delete(.task, ["doxylamine"], "maria", Self.start) } != nil, "a deletion orphaning the outcome is refused too")
        #expect(refusal { try writes.update([.task(earlier)], "nobody") } == .notFound(.task, id: "doxylamine"))

        var later = mariasTask
        later.version.effectiveDate = Self.start.addingTimeInterval(10 * 86_400)
        later.title = "Doxylamine 25 mg"
        let updated = try writes.update([.task(later)], "maria")
        #expect(updated.first?.version.previousVersionUUIDs == [mariasTask.uuid])

        let tombstones = try writes.delete(.outcome, [first.id], "maria", Self.start.addingTimeInterval(3 * 86_400))
        #expect(tombstones.first?.version.deletedDate != nil && tombstones.first?.version.previousVersionUUIDs == [first.uuid])
        #expect(try writes.add([.outcome(outcome(mariasTask, 2))], "maria").count == 1, "a deleted outcome's occurrence takes a new one")
    }

    @Test("a device's records merge once, for its patient, with their links; its knowledge is kept", arguments: Backend.allCases)
    func deviceRecords(backend: Backend) throws {
        guard let writes = try RuleWrites.fresh(backend) else { return }
        let (maria, task) = try patient("maria")
        _ = try writes.add(maria, nil)
        let device = UUID()
        let first = outcome(task, 1)
        var amended = first
        amended.version.uuid = .timeOrdered()
        amended.version.previousVersionUUIDs = [first.uuid]
        amended.values = [OutcomeValue(.boolean(false))]
        amended.version.effectiveDate = first.version.effectiveDate.addingTimeInterval(60)
        let record = RevisionRecord(entities: [.outcome(first), .outcome(amended)], knowledgeVector: [RevisionRecord.Process(id: device, clock: 3)])
        let knowledge = KnowledgeVector([device: 3])
        #expect(try writes.mergeDevice([record], "maria", knowledge) == 2)
        #expect(try writes.mergeDevice([record], "maria", knowledge) == 0, "versions already stored are not merged twice")
        #expect(refusal { try writes.add([.outcome(outcome(task, 1))], "maria") } == .duplicateOutcome(taskID: "doxylamine", occurrence: 1),
                "the amended version is the occurrence's live outcome")
    }

    @Test("a write's versions go in in writing order with every column as it was (a null stays null); in a write of several, a refused version is the one named, and nothing of the write stays",
          arguments: Backend.allCases)
    func versionsOfOneWrite(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (maria, doxylamine) = try patient("maria")
        guard case .carePlan(let plan) = maria[1] else { return }
        var melatonin = CareTask(id: "melatonin", title: "Melatonin", carePlanUUID: plan.uuid,
                                 schedule: try Schedule.dailyAtTime(hour: 21, minutes: 0, start: Self.start, timeZone: Self.zone), timezone: Self.zone)
        melatonin.effectiveDate = Self.start
        melatonin.remoteID = "MedicationRequest/7"
        melatonin.groupIdentifier = "sleep"
        melatonin.tags = ["night", "sleep"]
        _ = try store.add(maria + [.task(melatonin)])
        #expect(try store.changes(since: 0, limit: nil).entities.map(\.version.id) == ["maria", "plan", "doxylamine", "melatonin"])
        #expect(try store.fetchTasks(EntityQuery(tags: ["sleep"])).map(\.id) == ["melatonin"])
        #expect(try store.fetchTasks(EntityQuery(remoteIDs: ["MedicationRequest/7"])).map(\.id) == ["melatonin"])
        #expect(try store.fetchTasks(EntityQuery(groupIdentifiers: ["sleep"])).map(\.id) == ["melatonin"])
        #expect(try store.fetchTasks(EntityQuery(remoteIDs: [""])).isEmpty, "doxylamine's missing remote id is null, not empty")
        #expect(try store.fetchTasks(EntityQuery(groupIdentifiers: [""])).isEmpty)

        _ = try store.add([.outcome(outcome(melatonin, 1))])
        let refused = refusal { try store.add([.outcome(outcome(doxylamine, 5)), .outcome(outcome(melatonin, 1)), .outcome(outcome(doxylamine, 6))]) }
        #expect(refused == .duplicateOutcome(taskID: "melatonin", occurrence: 1), "the second version broke the rule, not the first")
        #expect(try store.fetchOutcomes(EntityQuery(versions: .history, taskIDs: ["doxylamine"])).isEmpty)

        // Each outcome's event is kept: the day's events show it.
        _ = try store.add([.outcome(outcome(doxylamine, 5)), .outcome(outcome(doxylamine, 6))])
        let day = try store.events(from: Self.start.addingTimeInterval(5 * 86_400), to: Self.start.addingTimeInterval(6 * 86_400),
                                   tasks: EntityQuery(ids: ["doxylamine"]))
        #expect(day.map(\.occurrence) == [5])
        #expect(day.first?.outcome?.taskOccurrenceIndex == 5)
    }

    @Test("a body of a group refused after some of its versions were written keeps none of them; the next body's are stored",
          arguments: Backend.allCases)
    func refusedBodyInGroup(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (maria, doxylamine) = try patient("maria")
        _ = try store.add(maria)
        // The first body's second outcome repeats the first's id: refused with nothing read in
        // between, while the first may still be held back.
        let results = store.writeGroup([
            { tx in try tx.add([.outcome(outcome(doxylamine, 1, id: "twice")), .outcome(outcome(doxylamine, 3, id: "twice"))]).count },
            { tx in try tx.add([.outcome(outcome(doxylamine, 2, id: "stored"))]).count },
        ])
        #expect(results.map { (try? $0.get()) ?? -1 } == [-1, 1])
        #expect(try store.fetchOutcomes(EntityQuery(versions: .history)).map(\.id) == ["stored"])
    }
}

@Suite("The sync clock on PostgreSQL", .serialized)
struct PostgresClockTests {
    @Test("two instances writing one patient take turns on the patient's clock: the second's number follows the first's commit")
    func commitOrder() throws {
        guard let (location, password) = try TestPostgres.freshLocation() else { return }
        let a = try PostgresCarePlanStore(location, password: password)
        let b = try PostgresCarePlanStore(location, password: password)
        let tests = VersionRulesBackendTests()
        let (maria, task) = try tests.patient("maria")
        _ = try a.writeVersions { try $0.add(maria, patientID: nil) }
        // The first holds its transaction open 0.4 s after writing; the second starts once it has written.
        let written = DispatchSemaphore(value: 0)
        let waited = try concurrently(2) { i -> TimeInterval in
            if i == 0 {
                try a.writeVersions { writer in
                    _ = try writer.add([.outcome(tests.outcome(task, 1))], patientID: "maria")
                    written.signal()
                    Thread.sleep(forTimeInterval: 0.4)
                }
                return 0
            }
            written.wait()
            let started = Date()
            try b.writeVersions { writer in _ = try writer.add([.outcome(tests.outcome(task, 2))], patientID: "maria") }
            return Date().timeIntervalSince(started)
        }
        #expect(waited[1] >= 0.3, "the second write waited for the first to commit (\(waited[1]) s)")
        let revisions = try a.database.withSession { session in
            try session.query("SELECT revision FROM entity_version WHERE patient_id = 'maria' AND kind = 'outcome' ORDER BY seq").map { try $0.decode(Int.self) }
        }
        #expect(revisions.count == 2 && revisions[0] < revisions[1], "\(revisions)")
    }

    @Test("two instances write one patient as fast as they can while a third pulls in a loop with the knowledge it gets: every version is pulled exactly once, and the knowledge never goes back")
    func pullsDuringConcurrentWrites() throws {
        guard let (location, password) = try TestPostgres.freshLocation() else { return }
        let (a, b, c) = (try PostgresCarePlanStore(location, password: password), try PostgresCarePlanStore(location, password: password),
                         try PostgresCarePlanStore(location, password: password))
        let tests = VersionRulesBackendTests()
        let (maria, task) = try tests.patient("maria")
        try a.add(maria)
        let perWriter = 150
        let writing = Locked(2)
        let results = try concurrently(3) { i -> [UUID] in
            guard i < 2 else {
                // The puller: each pull asks from the knowledge the last one gave.
                var knowledge = KnowledgeVector()
                var seen: [UUID] = []
                var lastClock = 0
                while true {
                    let done = writing.withLock { $0 == 0 }
                    let pulled = try c.patientVersions("maria", notCoveredBy: knowledge, upTo: nil)
                    seen += pulled.versions.map(\.uuid)
                    let clock = pulled.knowledge.clocks.values.max() ?? 0
                    #expect(clock >= lastClock, "the knowledge went back from \(lastClock) to \(clock)")
                    lastClock = clock
                    knowledge = pulled.knowledge
                    if done { return seen }
                }
            }
            defer { writing.withLock { $0 -= 1 } }
            let store = i == 0 ? a : b
            for n in 0..<perWriter { try store.add([.outcome(tests.outcome(task, 2 * n + i))]) }
            return []
        }
        let seen = results[2]
        let written = try a.fetchOutcomes(EntityQuery(patientIDs: ["maria"])).map(\.uuid) + maria.map(\.version.uuid)
        #expect(written.count == 2 * perWriter + 3)
        #expect(seen.count == written.count, "pulled \(seen.count) versions for \(written.count) written")
        #expect(Set(seen) == Set(written) && Set(seen).count == seen.count, "every version exactly once")
    }
}

/// The same writes to a SQLite store and a PostgreSQL store, for the suites that compare their answers.
struct BothBackends {
    let sqlite: SQLiteCarePlanStore
    let postgres: PostgresCarePlanStore
    /// The PostgreSQL store's password, for opening it again as another instance would.
    let password: String?

    /// New, empty stores, or nil after a SKIPPED line.
    static func fresh(_ test: String = #function) throws -> BothBackends? {
        guard let (location, password) = try TestPostgres.freshLocation(test) else { return nil }
        return BothBackends(sqlite: try SQLiteCarePlanStore(inMemory: ()), postgres: try PostgresCarePlanStore(location, password: password),
                            password: password)
    }

    func add(_ entities: [CareEntity], for patient: String? = nil) throws {
        _ = try sqlite.apply([.add(entities)], for: patient)
        _ = try postgres.writeVersions { try $0.add(entities, patientID: patient) }
    }

    func mergeDevice(_ record: RevisionRecord, for patient: String, knowledge: KnowledgeVector) throws {
        _ = try sqlite.mergeDeviceRecords([record], patientID: patient, deviceKnowledge: knowledge)
        _ = try postgres.writeVersions { try $0.mergeDeviceRecords([record], patientID: patient, deviceKnowledge: knowledge) }
    }
}

@Suite("Entity queries read the same on both backends")
struct VersionQueryBackendTests {
    @Test("the same writes on SQLite and PostgreSQL: every kind of query returns the same versions in the same order")
    func sameAnswers() throws {
        guard let (location, password) = try TestPostgres.freshLocation() else { return }
        let postgres = try PostgresCarePlanStore(location, password: password)
        let sqlite = try SQLiteCarePlanStore(inMemory: ())
        let tests = VersionRulesBackendTests()
        let start = VersionRulesBackendTests.start
        // Two patients with one task id, an outcome a day, a changed task, a deleted outcome, tags and remote ids.
        var writes: [(entities: [CareEntity], update: Bool, patient: String?)] = []
        var tasks: [String: CareTask] = [:]
        for id in ["maria", "zoe"] {
            var (entities, task) = try tests.patient(id)
            if case .patient(var patient) = entities[0] {
                patient.version.remoteID = "Patient/\(id)-ehr"
                entities[0] = .patient(patient)
            }
            task.version.tags = ["medication", id]
            task.version.groupIdentifier = "night"
            entities[2] = .task(task)
            writes.append((entities, false, nil))
            writes.append(((1...4).map { .outcome(tests.outcome(task, $0, id: "\(id)-\($0)")) }, false, id))
            tasks[id] = task
        }
        var changed = tasks["maria"]!
        changed.version.effectiveDate = start.addingTimeInterval(10 * 86_400)
        changed.title = "Doxylamine 25 mg"
        writes.append(([.task(changed)], true, "maria"))
        for (entities, update, patient) in writes {
            if update {
                _ = try sqlite.apply([.update(entities)], for: patient)
                _ = try postgres.writeVersions { try $0.update(entities, patientID: patient) }
            } else {
                _ = try sqlite.apply([.add(entities)], for: patient)
                _ = try postgres.writeVersions { try $0.add(entities, patientID: patient) }
            }
        }
        _ = try sqlite.delete(.outcome, ids: ["maria-3"], of: "maria", at: start.addingTimeInterval(5 * 86_400))
        _ = try postgres.writeVersions { try $0.delete(.outcome, ids: ["maria-3"], patientID: "maria", at: start.addingTimeInterval(5 * 86_400)) }

        let week = DateInterval(start: start, duration: 7 * 86_400)
        var queries: [(String, EntityQuery)] = [
            ("latest", EntityQuery()), ("history", EntityQuery(versions: .history)), ("in effect", EntityQuery(versions: .inEffect(week))),
            ("by id", EntityQuery(versions: .history, ids: ["doxylamine", "maria-3"])), ("by patient", EntityQuery(patientIDs: ["zoe"])),
            ("by tag", EntityQuery(tags: ["maria"])), ("by group", EntityQuery(groupIdentifiers: ["night"])),
            ("by remote id", EntityQuery(remoteIDs: ["Patient/zoe-ehr"])), ("by plan", EntityQuery(patientIDs: ["maria"], carePlanIDs: ["plan"])),
            ("by task", EntityQuery(versions: .history, taskIDs: ["doxylamine"])), ("limited", EntityQuery(versions: .history, limit: 3)),
            ("by uuid", EntityQuery(versions: .history, uuids: [changed.uuid, tasks["zoe"]!.uuid])), ("none", EntityQuery(ids: [])),
        ]
        var written = EntityQuery(versions: .history)
        written.gatewayWrittenOnly = true
        queries.append(("gateway-written", written))
        // Versions the store makes (an update's, a tombstone) get uuids of their own on each
        // backend: versions are compared by what they are, and by their links' count.
        func signature(_ version: VersionInfo) -> String {
            "\(version.id)@\(version.effectiveDate.timeIntervalSinceReferenceDate)\(version.deletedDate == nil ? "" : " deleted")"
                + " <\(version.previousVersionUUIDs.count) >\(version.nextVersionUUIDs.count)"
        }
        for (name, query) in queries {
            #expect(try sqlite.fetchPatients(query).map { signature($0.version) } == postgres.fetchPatients(query).map { signature($0.version) }, "patients \(name)")
            #expect(try sqlite.fetchCarePlans(query).map { signature($0.version) } == postgres.fetchCarePlans(query).map { signature($0.version) }, "plans \(name)")
            #expect(try sqlite.fetchTasks(query).map { signature($0.version) + ($0.title ?? "") } == postgres.fetchTasks(query).map { signature($0.version) + ($0.title ?? "") },
                    "tasks \(name)")
            let (c, d) = (try sqlite.fetchOutcomes(query), try postgres.fetchOutcomes(query))
            #expect(c.map { signature($0.version) } == d.map { signature($0.version) } && c.map(\.values) == d.map(\.values), "outcomes \(name)")
        }
        #expect(try postgres.fetchTasks(EntityQuery(versions: .history)).count == 3, "the queries found something to compare")
        #expect(try postgres.fetchOutcomes(EntityQuery(versions: .history)).count == 9)
    }
}

@Suite("Conflicts, live outcomes, scopes and process owners read the same on both backends")
struct SyncReadsBackendTests {
    @Test("two devices' concurrent edits of one plan are one conflict on both; the live outcome, the outcome count, the versions' scopes and the processes' patients agree")
    func sameAnswers() throws {
        guard let both = try BothBackends.fresh() else { return }
        let (sqlite, postgres) = (both.sqlite, both.postgres)
        let tests = VersionRulesBackendTests()
        let (maria, task) = try tests.patient("maria")
        let (zoe, _) = try tests.patient("zoe")
        let first = tests.outcome(task, 2, id: "maria-2")
        guard case .carePlan(let plan) = maria[1] else { Issue.record("the fixture's second entity is the plan"); return }
        // Two devices each edit the plan from the same version: two tips.
        let (deviceA, deviceB) = (UUID(), UUID())
        var records: [(RevisionRecord, KnowledgeVector)] = []
        for (device, title) in [(deviceA, "Home care (A)"), (deviceB, "Home care (B)")] {
            var edit = plan
            edit.version.uuid = .timeOrdered()
            edit.version.previousVersionUUIDs = [plan.uuid]
            edit.version.effectiveDate = plan.version.effectiveDate.addingTimeInterval(3600)
            edit.title = title
            records.append((RevisionRecord(entities: [.carePlan(edit)], knowledgeVector: [.init(id: device, clock: 1)]), KnowledgeVector([device: 1])))
        }
        try both.add(maria + zoe)
        try both.add([.outcome(first)], for: "maria")
        for (record, knowledge) in records { try both.mergeDevice(record, for: "maria", knowledge: knowledge) }
        func pairs(_ list: [(EntityType, String)]) -> [String] { list.map { "\($0.0.rawValue)/\($0.1)" } }
        #expect(pairs(try sqlite.conflicts()) == ["carePlan/plan"])
        #expect(pairs(try sqlite.conflicts()) == pairs(try postgres.conflicts(among: nil, of: nil)))
        let asked: [(type: EntityType, id: String)] = [(.carePlan, "plan"), (.task, "doxylamine"), (.carePlan, "plan")]
        #expect(pairs(try sqlite.conflicts(among: asked, of: "maria")) == pairs(try postgres.conflicts(among: asked, of: "maria")))
        #expect(try postgres.conflicts(among: asked, of: "zoe").isEmpty, "zoe's plan of the same id has one tip")
        #expect(try sqlite.liveOutcome(taskUUID: task.uuid, occurrence: 2)?.uuid == first.uuid)
        #expect(try postgres.liveOutcome(taskUUID: task.uuid, occurrence: 2)?.uuid == first.uuid)
        #expect(try postgres.liveOutcome(taskUUID: task.uuid, occurrence: 3) == nil)
        #expect(try sqlite.currentOutcomeCount() == 1 && postgres.currentOutcomeCount() == 1)
        let uuids = maria.map(\.version.uuid) + zoe.map(\.version.uuid) + [first.uuid, UUID()]
        #expect(try sqlite.scopes(of: uuids) == postgres.scopes(of: uuids))
        #expect(try postgres.scopes(of: uuids)[first.uuid] == VersionScope(type: .outcome, patientID: "maria"))
        #expect(try sqlite.processOwners([deviceA, deviceB, UUID()]) == postgres.processOwners([deviceA, deviceB, UUID()]))
        #expect(try postgres.processOwners([deviceA, deviceB]) == [deviceA: "maria", deviceB: "maria"])
    }
}

@Suite("The change feed, whole-store reads and the export's outcome order, on both backends")
struct WholeStoreReadsBackendTests {
    @Test("1,050 outcomes of one patient and some of another: the change feed in pages, every entity, and the outcomes in export order (across the thousand-row pages) agree; every instance shares one sync process")
    func sameAnswers() throws {
        guard let both = try BothBackends.fresh() else { return }
        let (sqlite, postgres) = (both.sqlite, both.postgres)
        let tests = VersionRulesBackendTests()
        for (patient, count) in [("maria", 1_050), ("zoe", 3)] {
            let (entities, task) = try tests.patient(patient)
            try both.add(entities)
            try both.add((1...count).map { CareEntity.outcome(tests.outcome(task, $0, id: "\(patient)-\($0)")) }, for: patient)
        }
        func ids(_ entities: [CareEntity]) -> [String] { entities.map { "\($0.entityType.rawValue)/\($0.version.id)" } }
        func feed(_ changes: (Int, Int?) throws -> StoreChanges) throws -> [String] {
            var all: [String] = []
            var revision = 0
            while true {
                let page = try changes(revision, 400)
                if page.entities.isEmpty { return all }
                all += ids(page.entities)
                revision = page.revision
            }
        }
        let fed = try feed { try postgres.changes(since: $0, limit: $1) }
        #expect(fed.count == 6 + 1_053)
        #expect(try feed { try sqlite.changes(since: $0, limit: $1) } == fed)
        #expect(try ids(sqlite.allEntities()) == ids(postgres.allEntities()))
        var (exportedA, exportedB): ([String], [String]) = ([], [])
        try sqlite.forEachCurrentOutcome { exportedA.append($0.id) }
        try postgres.forEachCurrentOutcome { exportedB.append($0.id) }
        #expect(exportedB.count == 1_053 && exportedA == exportedB)
        let other = try PostgresCarePlanStore(postgres.database.location, password: both.password)
        #expect(try other.knowledgeVector().map(\.id) == postgres.knowledgeVector().map(\.id), "one sync process per store, whichever instance asks")
    }
}

@Suite("A patient's pull reads the same on both backends")
struct PatientPullBackendTests {
    @Test("what the gateway wrote and a device pushed: a first pull sends the same versions in the same order with the same JSON, the knowledge has the device's clock, a pull with it sends nothing, the other patient's pull is its own")
    func sameAnswers() throws {
        guard let both = try BothBackends.fresh() else { return }
        let (sqlite, postgres) = (both.sqlite, both.postgres)
        let tests = VersionRulesBackendTests()
        let (maria, task) = try tests.patient("maria")
        let (zoe, _) = try tests.patient("zoe")
        let gatewayOutcomes = (1...3).map { CareEntity.outcome(tests.outcome(task, $0, id: "maria-\($0)")) }
        let device = UUID()
        guard case .outcome(let second) = gatewayOutcomes[1] else { return }
        var amended = second
        amended.version.uuid = .timeOrdered()
        amended.version.previousVersionUUIDs = [second.uuid]
        amended.version.effectiveDate = second.version.effectiveDate.addingTimeInterval(60)
        amended.values = [OutcomeValue(.boolean(false))]
        let record = RevisionRecord(entities: [.outcome(amended), .outcome(tests.outcome(task, 4, id: "maria-4"))],
                                    knowledgeVector: [.init(id: device, clock: 2)])
        try both.add(maria + zoe)
        try both.add(gatewayOutcomes, for: "maria")
        try both.mergeDevice(record, for: "maria", knowledge: KnowledgeVector([device: 2]))

        let (a, b) = (try sqlite.patientVersions("maria", notCoveredBy: KnowledgeVector()), try postgres.patientVersions("maria", notCoveredBy: KnowledgeVector()))
        #expect(b.versions.count == 7, "patient, plan, task, three outcomes of which one amended, and the device's new one")
        #expect(a.versions.map(\.uuid) == b.versions.map(\.uuid))
        // Each store stamps the creation time of what it is given without one: compared without it.
        func content(_ versions: [StoredVersion]) throws -> [[UInt8]] {
            try versions.map { stored in
                var entity = try stored.entity()
                entity.version.createdDate = nil
                return CareKitJSON.bytes(entity, version: .v4)
            }
        }
        #expect(try content(a.versions) == content(b.versions))
        #expect(a.versions.map(\.type) == b.versions.map(\.type))
        #expect(b.knowledge.clock(for: device) == 2 && a.knowledge.clocks.count == b.knowledge.clocks.count)
        #expect(try postgres.patientVersions("maria", notCoveredBy: b.knowledge).versions.isEmpty)
        #expect(try sqlite.patientVersions("maria", notCoveredBy: a.knowledge).versions.isEmpty)
        // A device that knows only its own push gets the gateway's versions, not its own again.
        let deviceOnly = try postgres.patientVersions("maria", notCoveredBy: KnowledgeVector([device: 2]))
        #expect(!deviceOnly.versions.contains { $0.uuid == amended.uuid } && deviceOnly.versions.count == 5)
        #expect(try sqlite.patientVersions("maria", notCoveredBy: KnowledgeVector([device: 2])).versions.map(\.uuid) == deviceOnly.versions.map(\.uuid))
        let zoes = try postgres.patientVersions("zoe", notCoveredBy: KnowledgeVector())
        #expect(zoes.versions.map(\.uuid) == (try sqlite.patientVersions("zoe", notCoveredBy: KnowledgeVector())).versions.map(\.uuid))
        #expect(zoes.versions.count == 3 && zoes.knowledge.clock(for: device) == 0)
    }
}
