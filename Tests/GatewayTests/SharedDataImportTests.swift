import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import Gateway

/// `../shared`, or nil with a visible notice.
let sharedRoot: URL? = {
    let url = projectRoot.deletingLastPathComponent().appendingPathComponent("shared")
    return FileManager.default.fileExists(atPath: url.appendingPathComponent("fhir-r4").path) ? url : nil
}()

func skipNotice(_ test: String) {
    print("SKIPPED \(test): ../shared is not present beside the project; import evidence data unavailable")
}

/// What a store holds, as comparable lines (ids, titles, schedules' events over two weeks, plan links).
func storeSummary(_ store: SQLiteCarePlanStore) throws -> [String] {
    let from = local("2026-11-02")
    var lines = try store.fetchPatients().map { "patient \($0.id) \($0.name.givenName ?? "") \($0.name.familyName ?? "")" }
    let plans = try store.fetchCarePlans()
    lines += plans.map { "plan \($0.id) \($0.title)" }
    for task in try store.fetchTasks() {
        let plan = plans.first { $0.uuid == task.carePlanUUID }?.id ?? "-"
        let events = task.schedule.events(from: from, to: from.addingTimeInterval(14 * 86_400)).map { "\($0.start.timeIntervalSinceReferenceDate)" }
        lines.append("task \(task.id) \(task.title ?? "") plan=\(plan) adherence=\(task.impactsAdherence) events=\(events.joined(separator: ","))")
    }
    lines += try store.fetchContacts().map { "contact \($0.id) \($0.name.givenName ?? "") \($0.name.familyName ?? "") \($0.role ?? "")" }
    lines += try store.fetchOutcomes().map { "outcome \($0.id) #\($0.taskOccurrenceIndex)" }
    return lines.sorted()
}

/// Every activity of every imported CarePlan has exactly one disposition (a task, a delegation to
/// the resource it references, a skip, an end, an unresolved reference reported, an error reported).
func checkNoSilentDrop(_ report: ImportReport, _ paths: [String]) throws -> Int {
    var activities = 0
    for path in paths {
        for sourced in ResourceFiles().read(path).resources where sourced.resource.resourceType == "CarePlan" {
            guard let id = sourced.resource.string("id") else { continue }
            let count = sourced.resource.children(named: "activity").count
            let accounted = report.dispositions.filter { $0.resource == "CarePlan/\(id)" && $0.rule.hasPrefix("activity") }.count
            // A plan stopped before its activities (skipped as a whole, or an unknown modifier) says so in a note.
            let stoppedWhole = report.notes.contains { $0.resource == "CarePlan/\(id)" && $0.path == nil && ($0.kind == .skipped || $0.kind == .error) }
            #expect(accounted == count || (accounted == 0 && stoppedWhole), "CarePlan/\(id): \(count) activities, \(accounted) accounted for")
            activities += count
        }
    }
    return activities
}

@Suite("Import evidence on the shared FHIR data")
struct SharedDataImportTests {
    static let types = ["CarePlan", "MedicationRequest", "Patient", "Practitioner", "PractitionerRole", "CareTeam"]

    /// The examples of the six types, from the folder's index (resource type, file name, ...).
    func examples(_ format: String) -> [String] {
        guard let root = sharedRoot else { return [] }
        let dir = root.appendingPathComponent("fhir-r4/examples/\(format)")
        let index = (try? String(contentsOf: dir.appendingPathComponent("_index.tsv"), encoding: .utf8)) ?? ""
        return index.split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: "\t")
            guard fields.count >= 2, Self.types.contains(String(fields[0])) else { return nil }
            return dir.appendingPathComponent(String(fields[1])).path
        }.sorted()
    }

    @Test("every CarePlan, MedicationRequest, Patient, Practitioner, PractitionerRole and CareTeam example imports; JSON and XML give the same store; re-import changes nothing")
    func examples() throws {
        guard sharedRoot != nil else { skipNotice("import of the R4 examples"); return }
        let json = examples("json"), xml = examples("xml")
        #expect(json.count == 89 && xml.count == json.count)
        let jsonStore = try temporaryStore(), xmlStore = try temporaryStore()
        let report = try importer(jsonStore).run(json)
        let xmlReport = try importer(xmlStore).run(xml)
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { "\($0.patientID): \($0.failure ?? "")" })")
        #expect(try storeSummary(jsonStore) == storeSummary(xmlStore))
        #expect(report.notes.map(\.message).sorted() == xmlReport.notes.map(\.message).sorted())
        for note in report.notes where note.kind == .error { print("ERROR NOTE", note) }
        // No silent drop: every activity of every CarePlan is a task, an end, or a note.
        let tasks = try jsonStore.fetchTasks().count
        print("R4 examples: \(json.count) files, \(report.resources) resources, \(tasks) tasks, \(try jsonStore.fetchContacts().count) contacts, "
              + "\(report.notes.count) notes (\(Dictionary(grouping: report.notes, by: \.kind).mapValues(\.count)))")
        #expect(tasks == 37)
        let activities = try checkNoSilentDrop(report, json)
        print("R4 examples: \(activities) CarePlan activities, each a task, a delegation, a skip, an end or a reported reference")
        #expect(!report.notes.contains { $0.kind == .error })
        let again = try importer(jsonStore, now: local("2026-11-05 09:00")).run(json)
        #expect(again.counts[.create] == nil && again.counts[.update] == nil, "\(again.patients.flatMap(\.changes).filter { $0.action != .unchanged }.prefix(5))")
    }

    @Test("all 20 Synthea bundles import with no crash and no silent drop, and re-import changes nothing")
    func synthea() throws {
        guard let root = sharedRoot else { skipNotice("import of the Synthea bundles"); return }
        let store = try temporaryStore()
        let report = try importer(store).run([root.appendingPathComponent("synthea").path])
        #expect(report.files == 20)
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { "\($0.patientID): \($0.failure ?? "")" })")
        #expect(report.patients.count == 20)
        let activities = try checkNoSilentDrop(report, ResourceFiles().files([root.appendingPathComponent("synthea").path]))
        print("Synthea: \(activities) CarePlan activities accounted for")
        for note in report.notes where note.kind == .error { print("ERROR NOTE", note) }
        #expect(!report.notes.contains { $0.kind == .error }, "\(report.notes.filter { $0.kind == .error }.prefix(5))")
        print("Synthea: \(report.seconds) s, \(report.resources) resources, \(report.patients.count) patients, changes \(report.counts), "
              + "notes \(Dictionary(grouping: report.notes, by: \.kind).mapValues(\.count)), unmapped \(report.unmapped.count) types")
        let again = try importer(store, now: local("2026-11-05 09:00")).run([root.appendingPathComponent("synthea").path])
        #expect(again.counts[.create] == nil && again.counts[.update] == nil, "\(again.patients.flatMap(\.changes).filter { $0.action != .unchanged }.prefix(5))")
    }
}
