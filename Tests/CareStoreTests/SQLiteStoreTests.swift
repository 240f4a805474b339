import Foundation
import GRDB
import GRDBSQLite
import Testing
@testable import CareStore

/// A fresh store in a temporary folder, removed afterwards.
final class TemporaryStore {
    let directory: URL
    let store: SQLiteCarePlanStore
    var path: String { store.path }

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = try SQLiteCarePlanStore(path: directory.appendingPathComponent("care.sqlite").path)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }
}

@Suite("The care-plan store, on every backend")
struct SQLiteStoreTests {
    let zone = newYork
    let start = local("2026-11-01", newYork)

    /// A patient, a plan and two tasks (daily pill at 08:00, weekly weight on Mondays).
    func seed(_ store: any CarePlanStore) throws -> (Patient, CarePlan, CareTask, CareTask) {
        var patient = Patient(id: "maria", name: PersonName(givenName: "María", familyName: "López"), effectiveDate: start, timezone: zone)
        patient.remoteID = "ehr/Patient/maria-lopez"
        var plan = CarePlan(id: "home", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        plan.tags = ["heart-failure"]
        plan.groupIdentifier = "clinic-a"
        var pill = CareTask(id: "metformin", title: "Metformin", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
        pill.effectiveDate = start
        pill.tags = ["medication"]
        var weight = CareTask(id: "weight", title: "Weight", carePlanUUID: plan.uuid,
                              schedule: try Schedule.weeklyAtTime(weekday: 2, hours: 7, minutes: 30, start: start, timeZone: zone), timezone: zone)
        weight.effectiveDate = start
        try store.add([.patient(patient), .carePlan(plan), .task(pill), .task(weight)])
        return (patient, plan, pill, weight)
    }

    @Test("a task's stored JSON names healthKitLinkage when it has the member, wherever it stands; a text value of that name is not the member")
    func healthKitLinkageSearch() throws {
        let zone = TimeZone(identifier: "UTC")!
        let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
        var steps = CareTask(id: "steps", title: "Walk", carePlanUUID: UUID(), schedule: try Schedule.allDay(start: start, timeZone: zone), timezone: zone)
        let plain = CareKitJSON.bytes(.task(steps), version: .v4)
        steps.healthKitLinkage = HealthKitLinkage(quantityIdentifier: "HKQuantityTypeIdentifierStepCount", quantityType: .cumulative, unitString: "count")
        #expect(CareKitJSON.mentionsHealthKitLinkage(CareKitJSON.bytes(.task(steps), version: .v4)))
        #expect(!CareKitJSON.mentionsHealthKitLinkage(plain))
        var named = CareTask(id: "healthKitLinkage", title: "healthKitLinkage", carePlanUUID: UUID(), schedule: steps.schedule, timezone: zone)
        named.instructions = #""healthKitLinkage":"#
        #expect(!CareKitJSON.mentionsHealthKitLinkage(CareKitJSON.bytes(.task(named), version: .v4)))

        let key = #""healthKitLinkage":"#
        for found in [key, key + "{}", "{" + key + "1}", #"{"id":"a\"b","# + key + "2}", String(repeating: "\"", count: 40) + key] {
            #expect(CareKitJSON.mentionsHealthKitLinkage(Array(found.utf8)), "\(found)")
            #expect(CareKitJSON.mentionsHealthKitLinkage(Data(found.utf8)), "\(found)")
        }
        for absent in ["", "\"", #""healthKitLinkage""#, #""healthKitLinkag":"#, #"healthKitLinkage":1"#, String(repeating: "\"", count: 40),
                       #"{"healthKitLinkages":1}"#, #"{"title":"healthKitLinkage"}"#] {
            #expect(!CareKitJSON.mentionsHealthKitLinkage(Array(absent.utf8)), "\(absent)")
        }
    }

    @Test("add and fetch by id, remoteID, tags, group, patient and care plan", arguments: Backend.allCases)
    func addAndQuery(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (patient, plan, pill, weight) = try seed(store)
        #expect(try store.fetchPatients(EntityQuery(remoteIDs: ["ehr/Patient/maria-lopez"])).map(\.id) == ["maria"])
        #expect(try store.fetchCarePlans(EntityQuery(patientIDs: ["maria"])).map(\.uuid) == [plan.uuid])
        #expect(try store.fetchCarePlans(EntityQuery(tags: ["heart-failure"])).count == 1)
        #expect(try store.fetchCarePlans(EntityQuery(groupIdentifiers: ["clinic-b"])).isEmpty)
        #expect(try store.fetchTasks(EntityQuery(carePlanIDs: ["home"])).map(\.id) == ["metformin", "weight"])
        #expect(try store.fetchTasks(EntityQuery(tags: ["medication"])).map(\.uuid) == [pill.uuid])
        let fetched = try #require(try store.fetchTasks(EntityQuery(ids: ["weight"])).first)
        #expect(fetched.schedule == weight.schedule && fetched.title == "Weight")
        #expect(fetched.version.createdDate != nil)
        #expect(try store.fetchPatients().first?.name == patient.name)
        #expect(throws: StoreError.alreadyExists(.task, id: "weight")) { try store.add([.task(weight)]) }
    }

    /// Two patients whose plan and task share ids ("home", "metformin").
    func twoPatients(_ store: any CarePlanStore) throws -> [String: CareTask] {
        var tasks: [String: CareTask] = [:]
        for name in ["ana", "ben"] {
            let patient = Patient(id: name, name: PersonName(givenName: name, familyName: "Test"), effectiveDate: start, timezone: zone)
            let plan = CarePlan(id: "home", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
            var pill = CareTask(id: "metformin", title: "Metformin for \(name)", carePlanUUID: plan.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
            pill.effectiveDate = start
            try store.add([.patient(patient), .carePlan(plan), .task(pill)])
            tasks[name] = pill
        }
        return tasks
    }

    @Test("a query kept prepared serves one patient at a time: asked for ana, then ben, then ana on one connection, each sees only their own versions", arguments: Backend.allCases)
    func preparedQueryPerPatient(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let tasks = try twoPatients(store)
        for name in ["ana", "ben", "ana", "ben"] {
            let other = name == "ana" ? "ben" : "ana"
            #expect(try store.fetchTasks(EntityQuery(ids: ["metformin"], patientIDs: [name])).map(\.title) == ["Metformin for \(name)"])
            #expect(try store.fetchTasks(EntityQuery(uuids: [tasks[other]!.uuid], patientIDs: [name])).isEmpty)
            #expect(try store.fetchCarePlans(EntityQuery(ids: ["home"], patientIDs: [name])).count == 1)
        }
        // On SQLite, the same reader connection for every call, where the prepared statement lives.
        guard let sqlite = store as? SQLiteCarePlanStore else { return }
        try sqlite.pool.read { db in
            for name in ["ana", "ben", "ana"] {
                let other = name == "ana" ? "ben" : "ana"
                let own = try sqlite.fetchScoped(kind: "task", EntityQuery(ids: ["metformin"], patientIDs: [name]), db: db, committed: true)
                #expect(own.map(\.patientID) == [name])
                #expect(own.map(\.entity.version.uuid) == [tasks[name]!.uuid])
                let crossed = try sqlite.fetchScoped(kind: "task", EntityQuery(uuids: [tasks[other]!.uuid], patientIDs: [name]), db: db, committed: true)
                #expect(crossed.isEmpty)
            }
        }
    }

    @Test("kinds asked in turn keep their prepared statements: none is prepared again, on a reader or on the writer")
    func statementsKeptAcrossKinds() throws {
        let temporary = try TemporaryStore()
        let store = temporary.store
        _ = try twoPatients(store)
        // An update asks for the current versions (tips) of its kind: plans, then tasks, in turn.
        for (day, name) in ["ana", "ben", "ana"].enumerated() {
            var plan = try #require(try store.fetchCarePlans(EntityQuery(ids: ["home"], patientIDs: [name])).first)
            plan.title += "!"
            plan.effectiveDate = start.addingTimeInterval(Double(day + 1) * 86400)
            try store.update([.carePlan(plan)])
            var task = try #require(try store.fetchTasks(EntityQuery(ids: ["metformin"], patientIDs: [name])).first)
            task.title = (task.title ?? "") + "!"
            task.effectiveDate = start.addingTimeInterval(Double(day + 1) * 86400)
            try store.update([.task(task)])
        }
        try store.pool.read { db in
            for _ in 0..<3 {
                for kind in ["patient", "carePlan", "task"] {
                    let found = try store.fetchScoped(kind: kind, EntityQuery(patientIDs: ["ana"]), db: db, committed: true)
                    #expect(found.count == 1)
                }
            }
            #expect(Self.preparedAgain(db) == 0)
        }
        try store.pool.write { db in #expect(Self.preparedAgain(db) == 0) }
    }

    @Test("a version query writes a kind that is a word into its statement, and binds anything else")
    func kindWrittenOrBound() {
        for dialect in [VersionSelect.Dialect.sqlite, .postgres] {
            let task = VersionSelect(kind: "task", EntityQuery(ids: ["metformin"]), dialect: dialect)
            #expect(task.sql.contains("v.kind = 'task'"))
            #expect(task.arguments == (dialect == .sqlite ? [.text("metformin")] : [.texts(["metformin"])]))
            let hostile = VersionSelect(kind: "task' OR 'a'='a", EntityQuery(), dialect: dialect)
            #expect(!hostile.sql.contains("OR 'a'"))
            #expect(hostile.arguments == [.text("task' OR 'a'='a")])
        }
    }

    /// How many times SQLite prepared again the statements a connection keeps (a changed
    /// schema, or a bound value that might change the plan, makes it do so on the next step).
    static func preparedAgain(_ db: Database) -> Int32 {
        var total: Int32 = 0
        var statement = sqlite3_next_stmt(db.sqliteConnection, nil)
        while let current = statement {
            total += sqlite3_stmt_status(current, SQLITE_STMTSTATUS_REPREPARE, 0)
            statement = sqlite3_next_stmt(db.sqliteConnection, current)
        }
        return total
    }

    @Test("updates append linked versions; an interval query returns the version in effect; history returns all", arguments: Backend.allCases)
    func versions(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        var v2 = pill
        v2.title = "Metformin 1000 mg"
        v2.effectiveDate = local("2026-11-10", zone)
        let updated = try store.update([.task(v2)])
        guard case .task(let stored2) = updated[0] else { return }
        #expect(stored2.uuid != pill.uuid)
        #expect(stored2.version.previousVersionUUIDs == [pill.uuid])
        let latest = try store.fetchTasks(EntityQuery(ids: ["metformin"]))
        #expect(latest.map(\.title) == ["Metformin 1000 mg"])
        let history = try store.fetchTasks(EntityQuery(versions: .history, ids: ["metformin"]))
        #expect(history.map(\.title) == ["Metformin", "Metformin 1000 mg"])
        #expect(history[0].version.nextVersionUUIDs == [stored2.uuid])
        let early = try store.fetchTasks(EntityQuery(versions: .inEffect(DateInterval(start: local("2026-11-03", zone), duration: 86400)), ids: ["metformin"]))
        #expect(early.map(\.title) == ["Metformin"])
        let spanning = try store.fetchTasks(EntityQuery(versions: .inEffect(DateInterval(start: local("2026-11-09", zone), duration: 2 * 86400)), ids: ["metformin"]))
        #expect(spanning.map(\.title) == ["Metformin", "Metformin 1000 mg"])
        var stale = pill
        stale.effectiveDate = local("2026-11-05", zone)
        #expect(throws: StoreError.self) { try store.update([.task(stale)]) }
        #expect(throws: StoreError.notFound(.task, id: "walk")) { try store.update([.task(CareTask(id: "walk", title: nil, carePlanUUID: nil, schedule: pill.schedule))]) }
    }

    @Test("deletes append tombstones: gone from the latest view and later intervals, kept in history", arguments: Backend.allCases)
    func deletes(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        _ = try seed(store)
        try store.delete(.task, ids: ["weight"], of: "maria", at: local("2026-11-20", zone))
        #expect(try store.fetchTasks().map(\.id) == ["metformin"])
        #expect(try store.fetchTasks(EntityQuery(versions: .inEffect(DateInterval(start: local("2026-11-16", zone), duration: 86400)), ids: ["weight"])).count == 1)
        #expect(try store.fetchTasks(EntityQuery(versions: .inEffect(DateInterval(start: local("2026-11-21", zone), duration: 86400)), ids: ["weight"])).isEmpty)
        let history = try store.fetchTasks(EntityQuery(versions: .history, ids: ["weight"]))
        #expect(history.count == 2 && history[1].isDeleted)
        // Events stop at the deletion.
        let events = try store.events(from: local("2026-11-01", zone), to: local("2026-12-01", zone), tasks: EntityQuery(ids: ["weight"]))
        #expect(events.map { wall($0.scheduleEvent.start, zone) } == ["2026-11-02 07:30", "2026-11-09 07:30", "2026-11-16 07:30"])
    }

    @Test("outcome rules: one per occurrence, the occurrence must exist, and task updates may not orphan outcomes", arguments: Backend.allCases)
    func outcomeRules(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        let taken = Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 3, values: [OutcomeValue(.boolean(true))], timezone: zone)
        try store.add([.outcome(taken)])
        let again = Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 3, values: [OutcomeValue(.boolean(true))], timezone: zone)
        #expect(throws: StoreError.duplicateOutcome(taskID: "metformin", occurrence: 3)) { try store.add([.outcome(again)]) }
        let weird = Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: -1, values: [], timezone: zone)
        #expect(throws: StoreError.self) { try store.add([.outcome(weird)]) }
        let orphan = Outcome(taskUUID: UUID(), taskOccurrenceIndex: 0, values: [], timezone: zone)
        #expect(throws: StoreError.missingParent(.outcome, id: orphan.id, field: "taskUUID", uuid: orphan.taskUUID)) { try store.add([.outcome(orphan)]) }
        // Occurrence 3 is 2026-11-04 08:00: a new version taking effect on the 3rd would orphan it.
        var v2 = pill
        v2.effectiveDate = local("2026-11-03", zone)
        do {
            try store.update([.task(v2)])
            Issue.record("the update was accepted")
        } catch {
            guard case .wouldOrphanOutcomes(let id, let count, let latest, _) = error else { Issue.record("\(error)"); return }
            #expect(id == "metformin" && count == 1 && latest == local("2026-11-04 08:00", zone))
            #expect(error.description.contains("a new version must take effect after them"))
        }
        // After the newest outcome it is fine, and outcomes in the new version's period are refused for the old version.
        v2.effectiveDate = local("2026-11-05", zone)
        try store.update([.task(v2)])
        let late = Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 6, values: [OutcomeValue(.boolean(true))], timezone: zone)
        #expect(throws: StoreError.noSuchOccurrence(taskID: "metformin", occurrence: 6, reason: "a newer task version covers the event")) { try store.add([.outcome(late)]) }
        // Deleting an outcome frees its occurrence.
        try store.delete(.outcome, ids: [taken.id], of: "maria")
        try store.add([.outcome(again)])
        #expect(try store.fetchOutcomes(EntityQuery(taskIDs: ["metformin"])).map(\.id) == [again.id])
    }

    @Test("a record of outcomes only (its task versions read at once): the same outcome rules as one by one; a version sent twice in it goes in once", arguments: Backend.allCases)
    func outcomeRulesInARecord(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        var v2 = pill
        v2.effectiveDate = local("2026-11-05", zone)
        let newer = try #require(try store.update([.task(v2)]).first?.version.uuid)
        func outcome(_ task: UUID, _ occurrence: Int) -> Outcome {
            Outcome(taskUUID: task, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.boolean(true))], timezone: zone)
        }
        // Occurrence 6 (2026-11-07) is the newer version's: refused for the old one, in any place of the record.
        #expect(throws: StoreError.noSuchOccurrence(taskID: "metformin", occurrence: 6, reason: "a newer task version covers the event")) {
            try store.merge(RevisionRecord(entities: [.outcome(outcome(pill.uuid, 1)), .outcome(outcome(pill.uuid, 6))], knowledgeVector: []))
        }
        #expect(try store.fetchOutcomes().isEmpty, "all or nothing")
        let first = outcome(pill.uuid, 1)
        let record = RevisionRecord(entities: [.outcome(first), .outcome(outcome(pill.uuid, 2)), .outcome(first), .outcome(outcome(newer, 6))], knowledgeVector: [])
        #expect(try store.merge(record) == 3)
        #expect(try store.merge(record) == 0)
        // Another patient's device naming Maria's task: refused as a task that is not there.
        let intruder = outcome(newer, 7)
        #expect(throws: StoreError.missingParent(.outcome, id: intruder.id, field: "taskUUID", uuid: newer)) {
            try store.mergeDeviceRecords([RevisionRecord(entities: [.outcome(intruder)], knowledgeVector: [])], patientID: "john", deviceKnowledge: KnowledgeVector())
        }
        try store.delete(.task, ids: ["metformin"], of: "maria", at: local("2026-11-20", zone))
        let tombstone = try #require(try store.fetchTasks(EntityQuery(versions: .history, ids: ["metformin"])).last { $0.isDeleted })
        #expect(throws: StoreError.noSuchOccurrence(taskID: "metformin", occurrence: 0, reason: "the task version is a deletion")) {
            try store.merge(RevisionRecord(entities: [.outcome(outcome(tombstone.uuid, 0))], knowledgeVector: []))
        }
        #expect(throws: StoreError.missingParent(.outcome, id: "x", field: "taskUUID", uuid: pill.carePlanUUID!)) {
            var stray = outcome(pill.carePlanUUID!, 0)
            stray.id = "x"
            try store.merge(RevisionRecord(entities: [.outcome(stray)], knowledgeVector: []))
        }
    }

    @Test("a multi-entity write is all or nothing", arguments: Backend.allCases)
    func atomic(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, plan, _, _) = try seed(store)
        let before = try store.changes(since: 0).revision
        let good = CareTask(id: "walk", title: "Walk", carePlanUUID: plan.uuid, schedule: try Schedule.allDay(start: start, timeZone: zone))
        let bad = CareTask(id: "stretch", title: "Stretch", carePlanUUID: UUID(), schedule: try Schedule.allDay(start: start, timeZone: zone))
        #expect(throws: StoreError.self) { try store.add([.task(good), .task(bad)]) }
        #expect(try store.fetchTasks(EntityQuery(ids: ["walk"])).isEmpty)
        #expect(try store.changes(since: 0).revision == before)
    }

    @Test("a version uuid already in the store is refused as such, naming the uuid, not as an id in use", arguments: Backend.allCases)
    func versionUUIDReused(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, plan, _, _) = try seed(store)
        let walk = CareTask(id: "walk", title: "Walk", carePlanUUID: plan.uuid, schedule: try Schedule.allDay(start: start, timeZone: zone))
        try store.add([.task(walk)])
        var stretch = CareTask(id: "stretch", title: "Stretch", carePlanUUID: plan.uuid, schedule: try Schedule.allDay(start: start, timeZone: zone))
        stretch.uuid = walk.uuid
        #expect(throws: StoreError.invalid(.task, id: "stretch", reason: "version \(walk.uuid.uuidString) is already in the store")) {
            try store.add([.task(stretch)])
        }
        #expect(try store.fetchTasks(EntityQuery(ids: ["stretch"])).isEmpty)
    }

    @Test("after a failed write, retrying with the same uuid and new content stores the new content", arguments: Backend.allCases)
    func rollbackForgetsCachedVersions(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, plan, _, _) = try seed(store)
        var walk = CareTask(id: "walk", title: "Walk (draft)", carePlanUUID: plan.uuid, schedule: try Schedule.allDay(start: start, timeZone: zone))
        let bad = CareTask(id: "stretch", title: "Stretch", carePlanUUID: UUID(), schedule: try Schedule.allDay(start: start, timeZone: zone))
        #expect(throws: StoreError.self) { try store.add([.task(walk), .task(bad)]) }
        walk.title = "Walk 30 minutes"
        try store.add([.task(walk)])
        #expect(try store.fetchTasks(EntityQuery(ids: ["walk"])).map(\.title) == ["Walk 30 minutes"])
        #expect(throws: StoreError.alreadyExists(.task, id: "walk")) { try store.add([.task(walk)]) }
    }

    @Test("a merge that fails after reading back a task it inserted leaves no trace: the corrected retry is what is stored", arguments: Backend.allCases)
    func failedMergeLeavesNoCachedVersion(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, plan, _, _) = try seed(store)
        var walk = CareTask(id: "walk", title: "Walk (draft)", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: start, timeZone: zone), timezone: zone)
        walk.effectiveDate = start
        // The outcome is checked against the task inserted just before it (read back inside the
        // transaction), then refused: occurrence -1 does not exist.
        let bad = Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: -1, values: [], timezone: zone)
        #expect(throws: StoreError.self) { try store.merge(RevisionRecord(entities: [.task(walk), .outcome(bad)], knowledgeVector: [])) }
        walk.title = "Walk 30 minutes"
        #expect(try store.merge(RevisionRecord(entities: [.task(walk)], knowledgeVector: [])) == 1)
        #expect(try store.fetchTasks(EntityQuery(ids: ["walk"])).map(\.title) == ["Walk 30 minutes"])
    }

    @Test("the change feed returns what was written after a revision, in order", arguments: Backend.allCases)
    func changeFeed(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        let all = try store.changes(since: 0)
        #expect(all.entities.map(\.entityType) == [.patient, .carePlan, .task, .task])
        #expect(try store.changes(since: all.revision).entities.isEmpty)
        let outcome = Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.boolean(true))], timezone: zone)
        try store.add([.outcome(outcome)])
        let next = try store.changes(since: all.revision)
        #expect(next.entities.map(\.version.uuid) == [outcome.uuid])
        #expect(next.revision == all.revision + 1)
        #expect(try store.changes(since: 0, limit: 2).entities.count == 2)
    }

    @Test("merging two devices' edits of the same version leaves two tips: a visible conflict", arguments: Backend.allCases)
    func conflicts(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        var deviceA = pill
        deviceA.uuid = UUID()
        deviceA.title = "Metformin (A)"
        deviceA.effectiveDate = local("2026-11-02", zone)
        deviceA.version.previousVersionUUIDs = [pill.uuid]
        var deviceB = deviceA
        deviceB.uuid = UUID()
        deviceB.title = "Metformin (B)"
        let record = RevisionRecord(entities: [.task(deviceA), .task(deviceB)], knowledgeVector: [])
        #expect(try store.merge(record) == 2)
        #expect(try store.merge(record) == 0)
        #expect(try store.conflicts().map(\.1) == ["metformin"])
        // Among given entities, by kind and id: a HealthKit task is a task; a care plan of the same id is not.
        #expect(try store.conflicts(among: [(.healthKitTask, "metformin"), (.task, "aspirin")], of: "maria").map(\.1) == ["metformin"])
        #expect(try store.conflicts(among: [(.carePlan, "metformin"), (.outcome, "metformin")], of: "maria").isEmpty)
        #expect(try store.conflicts(among: [], of: "maria").isEmpty)
        #expect(Set(try store.fetchTasks(EntityQuery(ids: ["metformin"])).map(\.title)) == ["Metformin (A)", "Metformin (B)"])
    }

    @Test("events through the store carry outcomes and respect versions", arguments: Backend.allCases)
    func events(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (_, _, pill, _) = try seed(store)
        try store.add([.outcome(Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.double(500), kind: "dose")], timezone: zone))])
        var v2 = pill
        v2.effectiveDate = local("2026-11-03", zone)
        v2.schedule = try Schedule.dailyAtTime(hour: 9, minutes: 0, start: local("2026-11-03", zone), timeZone: zone)
        try store.update([.task(v2)])
        let events = try store.events(from: local("2026-11-01", zone), to: local("2026-11-05", zone), tasks: EntityQuery(ids: ["metformin"]))
        #expect(events.map { wall($0.scheduleEvent.start, zone) } == ["2026-11-01 08:00", "2026-11-02 08:00", "2026-11-03 09:00", "2026-11-04 09:00"])
        #expect(events.map(\.occurrence) == [0, 1, 0, 1])
        #expect(events.map { $0.outcome != nil } == [false, true, false, false])
        #expect(Adherence(events: events).value == 0.25)
    }

    @Test("the database file is owner-only and in WAL mode, and reopens with everything in it")
    func fileAndReopen() throws {
        let t = try TemporaryStore()
        _ = try seed(t.store)
        let attributes = try FileManager.default.attributesOfItem(atPath: t.path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let mode = try t.store.pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
        // Commits sync the log (2: FULL), on the writer, whose every write goes through it.
        #expect(try t.store.pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 2)
        // 4 KiB pages, and a checkpoint queued at 4 MiB of them.
        #expect(try t.store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 4096)
        #expect(t.store.checkpointer?.threshold.withLock { $0 } == 1024)
        let reopened = try SQLiteCarePlanStore(path: t.path)
        #expect(try reopened.fetchTasks().count == 2)
        #expect(throws: StoreError.self) { try SQLiteCarePlanStore(path: "/nonexistent/dir/care.sqlite") }
    }

    @Test("apply runs adds, updates and deletes as one transaction: a failing step leaves nothing written", arguments: Backend.allCases)
    func applyIsAtomic(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let (patient, plan, pill, _) = try seed(store)
        var renamed = plan
        renamed.title = "Renamed"
        renamed.version.effectiveDate = start.addingTimeInterval(3600)
        let orphan = CareTask(id: "orphan", title: "Orphan", carePlanUUID: UUID(), schedule: try Schedule.allDay(start: start, timeZone: zone), timezone: zone)
        #expect(throws: StoreError.self) {
            try store.apply([.update([.carePlan(renamed)]), .delete(.task, ids: [pill.id], at: start.addingTimeInterval(7200)), .add([.task(orphan)])], for: patient.id)
        }
        #expect(try store.fetchCarePlans().map(\.title) == [plan.title])
        #expect(try store.fetchTasks().count == 2)
        let written = try store.apply([.update([.carePlan(renamed)]), .delete(.task, ids: [pill.id], at: start.addingTimeInterval(7200))], for: patient.id)
        #expect(written.count == 2)
        #expect(try store.fetchCarePlans().map(\.title) == ["Renamed"])
        #expect(try store.fetchTasks().map(\.id) == ["weight"])
        _ = patient
    }

    @Test("a store made with 16 KiB pages keeps them, and its checkpoint threshold is 4 MiB of them")
    func earlierPageSize() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-pages-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("care.sqlite").path
        let earlier = try DatabaseQueue(path: path)
        try earlier.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA page_size = 16384; VACUUM") }
        try earlier.close()
        let store = try SQLiteCarePlanStore(path: path)
        _ = try seed(store)
        #expect(try store.pool.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 16384)
        #expect(store.checkpointer?.threshold.withLock { $0 } == 256)
    }

    @Test("commits do not checkpoint; a log past 4 MiB is copied into the database file in the background, readable from a new connection")
    func backgroundCheckpoint() throws {
        let t = try TemporaryStore()
        let (_, plan, _, _) = try seed(t.store)
        t.store.checkpointer?.waitUntilIdle()
        func fileSize() throws -> Int { (try FileManager.default.attributesOfItem(atPath: t.path)[.size] as? NSNumber)?.intValue ?? 0 }
        let before = try fileSize()
        // A small commit stays in the log: the writer no longer checkpoints on its own.
        try t.store.add([.task(CareTask(id: "small", title: "Small", carePlanUUID: plan.uuid,
                                        schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: start, timeZone: zone), timezone: zone))])
        t.store.checkpointer?.waitUntilIdle()
        #expect(try fileSize() == before)
        // About 6 MiB of versions: the log passes the threshold and the checkpointer moves it.
        let tasks = try (0..<6000).map { i in
            CareEntity.task(CareTask(id: "bulk-\(i)", title: String(repeating: "x", count: 400), carePlanUUID: plan.uuid,
                                   schedule: try Schedule.dailyAtTime(hour: i % 24, minutes: 0, start: start, timeZone: zone), timezone: zone))
        }
        try t.store.add(tasks)
        t.store.checkpointer?.waitUntilIdle()
        #expect(try fileSize() > before + 4 << 20)
        let reader = try DatabaseQueue(path: t.path)
        #expect(try reader.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM entity_version WHERE kind = 'task'") } == 6003)
    }
}

@Suite("Store from async code")
struct AsyncStoreTests {
    @Test("concurrent async writers and readers through perform: every write lands once, errors come back typed", arguments: Backend.allCases)
    func concurrentPerform(backend: Backend) async throws {
        guard let store = try backend.freshStore() else { return }
        let zone = newYork
        let start = local("2026-11-01", zone)
        let patient = Patient(id: "p", name: PersonName(givenName: "Ana"), effectiveDate: start, timezone: zone)
        let plan = CarePlan(id: "plan", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        _ = try await store.perform { try $0.add([.patient(patient), .carePlan(plan)]) }
        try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var written = 0
                    for i in 0..<10 {
                        let task = CareTask(id: "w\(worker)-t\(i)", title: "Task", carePlanUUID: plan.uuid,
                                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
                        written += try await store.perform { try $0.add([.task(task)]) }.count
                        _ = try await store.perform { try $0.fetchTasks(EntityQuery(carePlanIDs: ["plan"])) }
                    }
                    return written
                }
            }
            var total = 0
            for try await written in group { total += written }
            #expect(total == 80)
        }
        #expect(try await store.perform { try $0.fetchTasks() }.count == 80)
        do {
            _ = try await store.perform { try $0.update([.task(CareTask(id: "missing", title: nil, carePlanUUID: nil, schedule: try Schedule.allDay(start: start, timeZone: zone)))]) }
            Issue.record("updated a missing task")
        } catch {
            #expect(error as? StoreError == StoreError.notFound(.task, id: "missing"))
        }
    }
}

@Suite("Writes sharing one commit")
struct WriteGroupTests {
    @Test("each body of a group lands or is undone on its own (a refused add takes back only its own body's writes), results in order",
          arguments: Backend.allCases)
    func savepoints(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let start = Date(timeIntervalSinceReferenceDate: 0)
        let patients = (0..<3).map { Patient(id: "p\($0)", name: PersonName(givenName: "P\($0)"), effectiveDate: start) }
        let results = store.writeGroup([
            { tx in try tx.add([.patient(patients[0])]).count },
            { tx in
                try tx.add([.patient(patients[1])])
                return try tx.add([.patient(patients[1])]).count  // the same uuid again: refused, and p1 with it
            },
            { tx in try tx.add([.patient(patients[2])]).count },
        ])
        #expect(results.count == 3)
        #expect((try? results[0].get()) == 1 && (try? results[2].get()) == 1)
        #expect(throws: (any Error).self) { try results[1].get() }
        #expect(try store.fetchPatients().map(\.id).sorted() == ["p0", "p2"])
    }

    @Test("a group that merges whole runs each body once; one refused body makes the group run again body by body, and what lands is the same")
    func wholeFirst() throws {
        let store = try SQLiteCarePlanStore(inMemory: ())
        let start = Date(timeIntervalSinceReferenceDate: 0)
        let patients = (0..<4).map { Patient(id: "p\($0)", name: PersonName(givenName: "P\($0)"), effectiveDate: start) }
        let runs = Locked([0, 0])
        let whole = store.writeGroup(patients[0..<2].indices.map { i in
            { tx in runs.withLock { $0[i] += 1 }; return try tx.add([.patient(patients[i])]).count }
        })
        #expect(whole.map { (try? $0.get()) ?? -1 } == [1, 1])
        #expect(runs.withLock { $0 } == [1, 1])
        let refused = store.writeGroup([
            { tx in runs.withLock { $0[0] += 1 }; return try tx.add([.patient(patients[2])]).count },
            { tx in runs.withLock { $0[1] += 1 }; return try tx.add([.patient(patients[0])]).count },  // p0 is there: refused
            { tx in try tx.add([.patient(patients[3])]).count },
        ])
        #expect(runs.withLock { $0 } == [3, 3], "the whole attempt, then body by body")
        #expect((try? refused[0].get()) == 1 && (try? refused[2].get()) == 1)
        #expect(throws: StoreError.self) { try refused[1].get() }
        #expect(try store.fetchPatients().map(\.id).sorted() == ["p0", "p1", "p2", "p3"])
    }
}
