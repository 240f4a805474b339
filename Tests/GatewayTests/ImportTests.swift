import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import Gateway

let projectRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
let newYork = TimeZone(identifier: "America/New_York")!

func local(_ text: String) -> Date {
    var c = Calendar(identifier: .gregorian)
    c.timeZone = newYork
    let p = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    return c.date(from: DateComponents(year: p[0], month: p[1], day: p[2], hour: p.count > 3 ? p[3] : 0, minute: p.count > 4 ? p[4] : 0))!
}

/// A fresh store in a temporary folder.
func temporaryStore() throws -> SQLiteCarePlanStore {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-import-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return try SQLiteCarePlanStore(path: directory.appendingPathComponent("care.sqlite").path)
}

func importer(_ store: any CarePlanStore, now: Date = local("2026-11-01 09:00")) throws -> FHIRImporter {
    FHIRImporter(mappings: try MappingSet.load([projectRoot.appendingPathComponent("Mappings").path]), store: store, timeZone: newYork, now: now)
}

let demoBundle = projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path

@Suite("Import into the store")
struct ImportTests {
    @Test("a plan that changes while it gains a care team: the new contacts belong to the plan's new version (found by the Bulk Data tests: the contacts were added before the plan version they named)")
    func newChildrenOfAnUpdatedPlan() throws {
        let store = try temporaryStore()
        let withoutTeam = sampleFiles.filter { !$0.hasSuffix("CareTeam-maria-lopez-care-team.json") }
        #expect(try importer(store).run(withoutTeam).failedPatients.isEmpty)
        #expect(try store.fetchContacts().isEmpty)
        var plan = try FHIRDocument.read(contentsOf: sampleFiles.first { $0.hasSuffix("CarePlan-maria-lopez-home-care.json") }!).resource
        plan.setValue("Home care, revised at the clinic visit", for: "title")
        let changed = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(UUID().uuidString)-CarePlan.json").path
        try Data(FHIRJSONWriter().write(plan)).write(to: URL(fileURLWithPath: changed))
        defer { try? FileManager.default.removeItem(atPath: changed) }
        let report = try importer(store, now: local("2026-11-02 09:00")).run(sampleFiles.filter { !$0.contains("CarePlan-") } + [changed])
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { $0.failure ?? "" })")
        #expect(report.counts[.update] == 1 && report.counts[.create] == 3, "\(report.counts)")
        let current = try #require(try store.fetchCarePlans().first { $0.id == "CarePlan/maria-lopez-home-care" })
        #expect(current.title == "Home care, revised at the clinic visit")
        #expect(try store.fetchContacts().map(\.carePlanUUID) == Array(repeating: current.uuid, count: 3))
    }

    @Test("an activity added to a plan the store holds starts when it first appears, not at the plan's start (1988 in one real plan); one whose timing has bounds starts there; the others are unchanged")
    func newActivityStartsWhenItAppears() throws {
        let store = try temporaryStore()
        let planFile = try #require(sampleFiles.first { $0.hasSuffix("CarePlan-maria-lopez-home-care.json") })
        var plan = try FHIRDocument.read(contentsOf: planFile).resource
        // A plan that began long ago.
        var period = try #require(plan.first("period"))
        period.setValue("1988-03-01", for: "start")
        plan.removeChildren(named: "period")
        plan.append(period)
        func write(_ resource: Element) throws -> String {
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(UUID().uuidString)-CarePlan.json").path
            try Data(FHIRJSONWriter().write(resource)).write(to: URL(fileURLWithPath: path))
            return path
        }
        let first = try write(plan)
        defer { try? FileManager.default.removeItem(atPath: first) }
        let withoutPlan = sampleFiles.filter { !$0.contains("CarePlan-") }
        #expect(try importer(store, now: local("2026-11-01 09:00")).run(withoutPlan + [first]).failedPatients.isEmpty)
        let before = try store.fetchTasks()
        // Weeks later the plan gains two activities: one without bounds, one from November 15.
        let json = try String(contentsOfFile: first, encoding: .utf8)
        func activity(_ code: String, bounds: String?) -> String {
            let repeatPart = (bounds.map { #""boundsPeriod": {"start": "\#($0)"}, "#  } ?? "") + #""frequency": 1, "period": 1, "periodUnit": "d""#
            return #"{"detail": {"kind": "ServiceRequest", "code": {"coding": [{"system": "http://snomed.info/sct", "code": "\#(code)"}], "text": "New \#(code)"}, "status": "in-progress", "scheduledTiming": {"repeat": {\#(repeatPart)}}}}"#
        }
        let grown = json.replacingOccurrences(of: #""activity"\s*:\s*\["#, with: #""activity": ["# + activity("11111111", bounds: nil) + "," + activity("22222222", bounds: "2026-11-15") + ",",
                                              options: .regularExpression)
        #expect(grown != json)
        let second = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(UUID().uuidString)-CarePlan.json").path
        try grown.write(toFile: second, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: second) }
        let report = try importer(store, now: local("2026-11-20 10:00")).run(withoutPlan + [second])
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { $0.failure ?? "" })")
        let tasks = try store.fetchTasks()
        let unbounded = try #require(tasks.first { $0.id.hasSuffix("/11111111") })
        let bounded = try #require(tasks.first { $0.id.hasSuffix("/22222222") })
        #expect(unbounded.effectiveDate == local("2026-11-20 00:00"))
        #expect(bounded.effectiveDate == local("2026-11-15 00:00"))
        // No missed days before it appeared: the week before shows none of its events.
        let earlier = try store.events(from: local("2026-11-10 00:00"), to: local("2026-11-20 00:00"), tasks: EntityQuery(ids: [unbounded.id]))
        #expect(earlier.isEmpty)
        #expect(try store.events(from: local("2026-11-20 00:00"), to: local("2026-11-21 00:00"), tasks: EntityQuery(ids: [unbounded.id])).count == 1)
        // The tasks the plan had keep their versions.
        for task in before { #expect(tasks.first { $0.id == task.id }?.uuid == task.uuid, "\(task.id)") }
    }

    @Test("Patients and CarePlans without an id (a transaction Bundle's, named by urn:uuid) are refused with their resources, never merged into one store entry; those with an id beside them are imported, whole run or staged")
    func patientsWithoutID() async throws {
        let bundle = """
            {"resourceType": "Bundle", "type": "transaction", "entry": [
              {"fullUrl": "urn:uuid:0a1b", "resource": {"resourceType": "Patient", "name": [{"family": "Ames", "given": ["Ann"]}]},
               "request": {"method": "POST", "url": "Patient"}},
              {"fullUrl": "urn:uuid:0c2d", "resource": {"resourceType": "Patient", "name": [{"family": "Burr", "given": ["Bob"]}]},
               "request": {"method": "POST", "url": "Patient"}},
              {"fullUrl": "urn:uuid:0e3f", "resource": {"resourceType": "Patient", "id": "carl", "name": [{"family": "Cole", "given": ["Carl"]}]},
               "request": {"method": "PUT", "url": "Patient/carl"}},
              {"fullUrl": "urn:uuid:1a1b", "resource": {"resourceType": "CarePlan", "id": "ann-plan", "status": "active", "intent": "plan",
                "title": "Ann's plan", "subject": {"reference": "urn:uuid:0a1b"}}, "request": {"method": "POST", "url": "CarePlan"}},
              {"fullUrl": "urn:uuid:1c2d", "resource": {"resourceType": "CarePlan", "id": "carl-plan", "status": "active", "intent": "plan",
                "title": "Carl's plan", "subject": {"reference": "urn:uuid:0e3f"}}, "request": {"method": "POST", "url": "CarePlan"}},
              {"fullUrl": "urn:uuid:1e3f", "resource": {"resourceType": "CarePlan", "status": "active", "intent": "plan",
                "title": "Carl's diet", "subject": {"reference": "urn:uuid:0e3f"}}, "request": {"method": "POST", "url": "CarePlan"}},
              {"fullUrl": "urn:uuid:1f4a", "resource": {"resourceType": "CarePlan", "status": "active", "intent": "plan",
                "title": "Carl's walks", "subject": {"reference": "urn:uuid:0e3f"}}, "request": {"method": "POST", "url": "CarePlan"}}]}
            """
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(UUID().uuidString)-transaction.json").path
        try bundle.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let whole = try temporaryStore(), staged = try temporaryStore()
        let reports = [try importer(whole).run([path]),
                       try await StagedImport(importer: try importer(staged)).run([path], staging: try SQLiteImportStaging(inMemory: ()))]
        for (store, report) in zip([whole, staged], reports) {
            #expect(try store.fetchPatients().map(\.id) == ["Patient/carl"])
            #expect(try store.fetchCarePlans().map(\.id) == ["CarePlan/carl-plan"])
            let errors = report.notes.filter { $0.kind == .error }
            #expect(errors.map(\.origin).sorted() == ["#entry[0]", "#entry[1]", "#entry[3]", "#entry[5]", "#entry[6]"].map { path + $0 }, "\(errors)")
            #expect(errors.filter { $0.message.contains("the patient id is 'Patient/': the Patient has no id") }.count == 3)
            // Other resources without an id: each refused, not two care plans made one (`CarePlan/`).
            #expect(errors.filter { $0.message.hasPrefix("the CarePlan has no id to tell it from others") }.count == 2)
        }
    }

    @Test("the demo Bundle: one patient, the plan, 8 tasks, 3 contacts, and the 2 results that have a task attached to its occurrences")
    func demo() throws {
        let store = try temporaryStore()
        let report = try importer(store).run([demoBundle])
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { $0.failure ?? "" })")
        #expect(report.counts[.create] == 1 + 1 + 8 + 3 + 2, "\(report.patients.flatMap(\.changes))")
        #expect(try store.fetchPatients().map(\.id) == ["Patient/maria-lopez"])
        let plan = try #require(store.fetchCarePlans().first)
        #expect(plan.patientUUID == (try store.fetchPatients().first?.uuid))
        let tasks = try store.fetchTasks()
        #expect(tasks.count == 8 && tasks.allSatisfy { $0.carePlanUUID == plan.uuid })
        #expect(try store.fetchContacts().count == 3)
        // The blood pressure and weight readings attach to occurrences of their tasks; steps and
        // heart rate have no task recording them, and are reported.
        let outcomes = try store.fetchOutcomes()
        #expect(outcomes.count == 2)
        #expect(report.notes.filter { $0.kind == .skipped && $0.message.hasPrefix("no task of this patient records") }.count == 2)
        let pressure = try #require(outcomes.first { $0.id == "Observation/maria-lopez-bp-2026-11-02-am" })
        let bpTask = try #require(tasks.first { $0.id == "CarePlan/maria-lopez-home-care/85354-9" })
        #expect(pressure.taskUUID == bpTask.uuid)
        let event = try #require(bpTask.schedule.event(occurrence: pressure.taskOccurrenceIndex))
        #expect(event.start == local("2026-11-02 08:00"))
    }

    @Test("results listed before the plan whose tasks record them are stored as when listed after; one with no date that no task records is skipped for that, not failed; one with no date that a task records is an error")
    func resultsBeforeTheirPlan() throws {
        let bundle = try FHIRDocument.read(contentsOf: demoBundle).resource
        var entries = bundle.children.filter { $0.name == "entry" }
        let isObservation = { (e: Element) in e["resource"]?.resourceType == "Observation" }
        entries = entries.filter(isObservation) + entries.filter { !isObservation($0) }
        func undated(_ id: String) throws -> Element {
            var entry = try #require(entries.first { $0.first("resource.id")?.value == id })
            var resource = try #require(entry["resource"])
            resource.removeChildren(named: "effective")
            resource.removeChildren(named: "issued")
            resource.setValue(id + "-undated", for: "id")
            entry.removeChildren(named: "resource")
            entry.removeChildren(named: "fullUrl")
            entry.append(resource)
            return entry
        }
        // Steps have no task; blood pressure has one.
        entries += [try undated("maria-lopez-steps-2026-11-01"), try undated("maria-lopez-bp-2026-11-02-am")]
        var reordered = Element(resourceType: "Bundle")
        reordered.setValue("collection", for: "type")
        for entry in entries { reordered.append(entry) }
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-reordered-\(UUID().uuidString).json").path
        try Data(FHIRDocument.write(reordered, format: .json)).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }

        let inOrder = try temporaryStore(), reorderedStore = try temporaryStore()
        _ = try importer(inOrder).run([demoBundle])
        let report = try importer(reorderedStore).run([path])
        func outcomes(_ store: SQLiteCarePlanStore) throws -> [String] {
            try store.fetchOutcomes().map { "\($0.id) \($0.taskOccurrenceIndex) \($0.values.map { "\($0.value) \($0.kind ?? "") \($0.units ?? "")" })" }.sorted()
        }
        #expect(try outcomes(reorderedStore) == outcomes(inOrder))
        #expect(try outcomes(reorderedStore).count == 2)
        let steps = report.notes.filter { $0.resource == "Observation/maria-lopez-steps-2026-11-01-undated" }.map(\.description)
        #expect(steps.count == 1 && steps[0].contains("skipped: no task of this patient records"), "\(steps)")
        let pressure = report.notes.filter { $0.resource == "Observation/maria-lopez-bp-2026-11-02-am-undated" }
        #expect(pressure.map(\.kind) == [.error] && pressure[0].message.hasPrefix("no date for the outcome"), "\(pressure.map(\.description))")
    }

    @Test("importing the same data again changes nothing; a dry run writes nothing")
    func idempotent() throws {
        let store = try temporaryStore()
        _ = try importer(store).run([demoBundle])
        let revision = try store.changes(since: 0, limit: nil).entities.count
        // A day later, the same files: nothing new (schedules anchored at the import time included).
        let again = try importer(store, now: local("2026-11-02 10:00")).run([demoBundle])
        #expect(again.counts[.create] == nil && again.counts[.update] == nil, "\(again.patients.flatMap(\.changes).filter { $0.action != .unchanged })")
        #expect(again.counts[.unchanged] == 1 + 1 + 8 + 3 + 2)
        #expect(try store.changes(since: 0, limit: nil).entities.count == revision)
        let fresh = try temporaryStore()
        let dry = try importer(fresh).run([demoBundle], dryRun: true)
        #expect(dry.counts[.create] == 15)
        #expect(try fresh.fetchTasks().isEmpty && fresh.fetchPatients().isEmpty)
    }

    @Test("a changed care plan adds task versions after the newest recorded outcome; history stays")
    func changedPlan() throws {
        let store = try temporaryStore()
        _ = try importer(store).run([demoBundle])
        // The blood pressure activity moves to 09:00 and 21:00.
        var text = try String(contentsOfFile: demoBundle, encoding: .utf8)
        text = text.replacingOccurrences(of: "\"08:00:00\", \"20:00:00\"", with: "\"09:00:00\", \"21:00:00\"")
        let changed = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-changed-\(UUID().uuidString).json").path
        try text.write(toFile: changed, atomically: true, encoding: .utf8)
        let report = try importer(store, now: local("2026-11-03 10:00")).run([changed])
        let updates = report.patients.flatMap(\.changes).filter { $0.action == .update }
        #expect(updates.map(\.id) == ["CarePlan/maria-lopez-home-care/85354-9"], "\(report.patients.flatMap(\.changes))")
        let versions = try store.fetchTasks(EntityQuery(versions: .history, ids: ["CarePlan/maria-lopez-home-care/85354-9"]))
        #expect(versions.count == 2)
        // The recorded outcome (2 November, 08:00) keeps its version; the new one starts the next day.
        let newest = try #require(versions.max { $0.effectiveDate < $1.effectiveDate })
        #expect(newest.effectiveDate >= local("2026-11-03"))
        #expect(try store.fetchOutcomes().count == 2)
        let day = try store.events(from: local("2026-11-05"), to: local("2026-11-06"), tasks: EntityQuery(ids: ["CarePlan/maria-lopez-home-care/85354-9"]))
        #expect(day.map(\.scheduleEvent.start) == [local("2026-11-05 09:00"), local("2026-11-05 21:00")])
    }
}
