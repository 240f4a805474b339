import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import Gateway

/// The demo patient imported, then what her app recorded: a walk (done), a blood pressure
/// reading (two values), a weight, and a dose of metformin.
func storeWithAppOutcomes() throws -> SQLiteCarePlanStore {
    let store = try temporaryStore()
    try addAppOutcomes(store)
    return store
}

/// `storeWithAppOutcomes()` on a new store of `backend`; nil (after a SKIPPED line) without PostgreSQL.
func storeWithAppOutcomes(_ backend: Backend, test: String = #function) throws -> Backend.Store? {
    guard let store = try backend.freshStore(test) else { return nil }
    try addAppOutcomes(store)
    return store
}

func addAppOutcomes(_ store: any CarePlanStore) throws {
    _ = try importer(store).run([demoBundle])
    let tasks = Dictionary(uniqueKeysWithValues: try store.fetchTasks().map { ($0.id, $0) })
    func outcome(_ task: String, _ occurrence: Int, _ values: [OutcomeValue]) -> CareEntity {
        .outcome(Outcome(taskUUID: tasks[task]!.uuid, taskOccurrenceIndex: occurrence, values: values,
                         effectiveDate: local("2026-11-03 22:00"), timezone: newYork))
    }
    let done = local("2026-11-03 21:00")
    try store.add([
        outcome("CarePlan/maria-lopez-home-care/229065009", 2, [OutcomeValue(.boolean(true), createdDate: done)]),
        outcome("CarePlan/maria-lopez-home-care/85354-9", 5, [OutcomeValue(.integer(131), kind: "8480-6", units: "mmHg", createdDate: done),
                                                              OutcomeValue(.integer(82), kind: "8462-4", units: "mmHg", createdDate: done)]),
        outcome("MedicationRequest/metformin/dosage-1", 6, [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: done)]),
    ])
}

func builder() throws -> ObservationBuilder {
    let set = try MappingSet.load([projectRoot.appendingPathComponent("Mappings").path])
    return ObservationBuilder(mappings: set, timeZone: newYork)
}

@Suite("Export of outcomes as Observations")
struct ExportTests {
    @Test("app outcomes become valid R4 Observations: codes from the table, values by type, a blood pressure panel, effective from the window", arguments: Backend.allCases)
    func observations(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let exported = try OutcomeExport(store: store, builder: try builder()).observations()
        // The two outcomes imported from the EHR's Observations are not sent back.
        #expect(exported.count == 3)
        for item in exported { #expect(ResourceValidator().validate(item.observation).isEmpty, "\(ResourceValidator().validate(item.observation))") }
        let pressure = try #require(exported.first { $0.observation.first("code.coding.code")?.value == "85354-9" }?.observation)
        let components = pressure.children(named: "component")
        #expect(components.map { $0.first("code.coding.code")?.value } == ["8462-4", "8480-6"])
        #expect(components.map { $0.first("value.value")?.value } == ["82", "131"])
        #expect(components.map { $0.first("value.code")?.value } == ["mm[Hg]", "mm[Hg]"])
        #expect(pressure.first("effective.start")?.value == "2026-11-03T20:00:00-05:00")
        #expect(pressure.first("subject.reference")?.value == "Patient/maria-lopez")
        #expect(pressure.first("performer.reference")?.value == "Patient/maria-lopez")
        #expect(pressure.first("basedOn.reference")?.value == "CarePlan/maria-lopez-home-care")
        #expect(pressure.string("status") == "final")
        #expect(pressure.first("category.coding.code")?.value == "vital-signs")
        let walk = try #require(exported.first { $0.observation.first("code.coding.code")?.value == "229065009" }?.observation)
        #expect(walk["value"]?.typeName == "boolean" && walk.first("value")?.value == "true")
        let dose = try #require(exported.first { $0.observation.first("basedOn.reference")?.value == "MedicationRequest/metformin" })
        #expect(dose.observation.first("value.value")?.value == "500" && dose.observation.first("value.code")?.value == "mg")
        #expect(dose.notes.first?.hasPrefix("no observation-codes entry for the task's group") == true)
        // The identifier is the outcome's logical id: stable across its versions.
        #expect(Set(exported.map(\.identifier)).count == 3)
    }

    @Test("a task a device made with a HealthKit link and no code (OCKHealthKitTask for steps) exports with the LOINC code the import's HealthKit table gives, its category and UCUM unit, not only its title")
    func healthKitTask() throws {
        let store = try temporaryStore()
        _ = try importer(store).run([demoBundle])
        let plan = try #require(store.fetchCarePlans().first)
        var steps = CareTask(id: "steps", title: "Steps", carePlanUUID: plan.uuid,
                             schedule: try Schedule.allDay(start: local("2026-11-01 00:00"), timeZone: newYork), timezone: newYork)
        steps.effectiveDate = local("2026-11-01 00:00")
        steps.healthKitLinkage = HealthKitLinkage(quantityIdentifier: "HKQuantityTypeIdentifierStepCount", quantityType: .cumulative, unitString: "count")
        let walked = Outcome(taskUUID: steps.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(6_120), units: "count")],
                             effectiveDate: local("2026-11-02 22:00"), timezone: newYork)
        try store.add([.task(steps), .outcome(walked)])
        let exported = try OutcomeExport(store: store, builder: try builder()).observations()
        let observation = try #require(exported.first { $0.outcomeVersion == walked.uuid }).observation
        #expect(observation.first("code.coding.system")?.value == "http://loinc.org")
        #expect(observation.first("code.coding.code")?.value == "41950-7")
        #expect(observation.first("category.coding.code")?.value == "activity")
        #expect(observation.first("valueQuantity.value")?.value == "6120" || observation.first("value.value")?.value == "6120", "\(observation)")
        #expect(observation.first("valueQuantity.code")?.value == "/d" || observation.first("value.code")?.value == "/d")
        #expect(ResourceValidator().validate(observation).isEmpty, "\(ResourceValidator().validate(observation))")
    }

    @Test("an updated outcome is amended and keeps its identifier; a deleted one is entered-in-error", arguments: Backend.allCases)
    func statuses(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let export = OutcomeExport(store: store, builder: try builder())
        let before = try export.observations()
        var walk = try #require(store.fetchOutcomes().first { $0.values.first?.value == .boolean(true) })
        let patientID = try #require(store.fetchPatients().first).id
        let walkID = Outcome.scopedID(patientID: patientID, outcomeID: walk.id)
        walk.values = [OutcomeValue(.boolean(false), createdDate: local("2026-11-04 08:00"))]
        walk.version.effectiveDate = local("2026-11-04 08:00")
        try store.update([.outcome(walk)])
        let dose = try #require(store.fetchOutcomes().first { $0.values.first?.units == "mg" })
        try store.delete(.outcome, ids: [dose.id], of: try #require(store.fetchPatients().first).id, at: local("2026-11-04 09:00"))
        let after = try export.observations()
        let statuses = Dictionary(uniqueKeysWithValues: after.map { ($0.identifier, $0.observation.string("status") ?? "") })
        #expect(statuses[walkID] == "amended")
        #expect(statuses[Outcome.scopedID(patientID: patientID, outcomeID: dose.id)] == "entered-in-error")
        #expect(Set(after.map(\.identifier)) == Set(before.map(\.identifier)))
        #expect(after.first { $0.identifier == walkID }?.observation.first("value")?.value == "false")
    }

    @Test("the transaction Bundle creates by identifier unless present and updates amended ones; valid R4 and valid against the XML schema", arguments: Backend.allCases)
    func bundle(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let export = OutcomeExport(store: store, builder: try builder())
        let bundle = export.transactionBundle(try export.observations())
        #expect(ResourceValidator().validate(bundle).isEmpty, "\(ResourceValidator().validate(bundle))")
        let requests = bundle.children(named: "entry").map { "\($0.first("request.method")?.value ?? "") \($0.first("request.ifNoneExist")?.value ?? "")" }
        #expect(requests.allSatisfy { $0.hasPrefix("POST identifier=urn:caregate:outcome%7C") })
        // JSON and XML round trip, and the XML validates against the R4 schema when it is at hand.
        let json = FHIRJSONWriter().write(bundle)
        #expect(FHIRJSONWriter().write(try FHIRJSONReader().read(json).resource) == json)
        guard let (status, message) = try schemaCheck(bundle) else {
            skipNotice("XSD validation of exported Observations")
            return
        }
        #expect(status == 0, "\(message)")
        #expect(message.contains("validates"))
    }
}

@Suite("Streamed export")
struct StreamedExportTests {
    @Test("the Bundle streamed entry by entry is the Bundle built in memory; NDJSON by forEach is the same resources")
    func streamedEqualsBuilt() throws {
        let store = try storeWithAppOutcomes()
        let export = OutcomeExport(store: store, builder: try builder())
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-stream-\(UUID().uuidString).json").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let output = try FHIROutput(path: path)
        #expect(try export.writeBundle(to: output) == 3)
        try output.close()
        var streamed = try FHIRDocument.read(contentsOf: path).resource
        var built = export.transactionBundle(try export.observations())
        // Only the Bundle's own random id differs.
        streamed.removeChildren(named: "id")
        built.removeChildren(named: "id")
        #expect(streamed == built)
        #expect(ResourceValidator().validate(streamed).isEmpty)
        var each: [String] = []
        try export.forEach { each.append($0.identifier) }
        #expect(each == (try export.observations()).map(\.identifier))
        // Nothing to export: an empty Bundle that is still valid JSON.
        let empty = try temporaryStore()
        let emptyPath = path + ".empty.json"
        defer { try? FileManager.default.removeItem(atPath: emptyPath) }
        let emptyOutput = try FHIROutput(path: emptyPath)
        #expect(try OutcomeExport(store: empty, builder: try builder()).writeBundle(to: emptyOutput) == 0)
        try emptyOutput.close()
        #expect(try FHIRDocument.read(contentsOf: emptyPath).resource.children(named: "entry").isEmpty)
    }
}

/// The shipped mappings with a site's medicationrequest.yaml that sends doses back as
/// MedicationAdministrations (a file extending the shipped one).
func mappingsWithAdministrations() throws -> MappingSet {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-site-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let site = directory.appendingPathComponent("medicationrequest.yaml")
    try """
        caregate-mapping: 1
        resource: MedicationRequest
        extends: \(projectRoot.appendingPathComponent("Mappings/medicationrequest.yaml").path)
        export-as:
          resource: MedicationAdministration
          medication-system: http://www.nlm.nih.gov/research/umls/rxnorm
        """.write(to: site, atomically: true, encoding: .utf8)
    let mappings = projectRoot.appendingPathComponent("Mappings")
    let others = try FileManager.default.contentsOfDirectory(atPath: mappings.path)
        .filter { $0.hasSuffix(".yaml") && $0 != "medicationrequest.yaml" }.map { mappings.appendingPathComponent($0).path }
    return try MappingSet.load(others + [mappings.appendingPathComponent("shared").path, site.path])
}

/// Runs xmllint against the R4 schema; nil when the schema or xmllint is not at hand.
func schemaCheck(_ resource: Element) throws -> (status: Int32, message: String)? {
    guard let shared = sharedRoot, FileManager.default.isExecutableFile(atPath: "/usr/bin/xmllint") else { return nil }
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-export-\(UUID().uuidString).xml").path
    defer { try? FileManager.default.removeItem(atPath: path) }
    try Data(FHIRXMLWriter().write(resource)).write(to: URL(fileURLWithPath: path))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/xmllint")
    process.arguments = ["--noout", "--schema", shared.appendingPathComponent("fhir-r4/xsd/fhir-single.xsd").path, path]
    let pipe = Pipe()
    process.standardError = pipe
    try process.run()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
}

@Suite("Export of medication outcomes as MedicationAdministrations")
struct MedicationAdministrationExportTests {
    @Test("where the mapping says export-as MedicationAdministration, a dose becomes one: RxNorm medication, dose, request, valid R4 and schema-valid; other tasks stay Observations", arguments: Backend.allCases)
    func administrations(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: try mappingsWithAdministrations(), timeZone: newYork))
        let exported = try export.observations()
        #expect(exported.map { $0.observation.resourceType! }.sorted() == ["MedicationAdministration", "Observation", "Observation"])
        let dose = try #require(exported.first { $0.observation.resourceType == "MedicationAdministration" })
        let a = dose.observation
        #expect(ResourceValidator().validate(a).isEmpty, "\(ResourceValidator().validate(a))")
        #expect(a.string("status") == "completed")
        #expect(a.first("medication.coding.system")?.value == "http://www.nlm.nih.gov/research/umls/rxnorm")
        #expect(a.first("medication.coding.code")?.value == "861007")
        #expect(a["medication"]?.typeName == "CodeableConcept")
        #expect(a.first("subject.reference")?.value == "Patient/maria-lopez")
        #expect(a.first("performer.actor.reference")?.value == "Patient/maria-lopez")
        #expect(a.first("request.reference")?.value == "MedicationRequest/metformin")
        #expect(a.first("dosage.dose.value")?.value == "500" && a.first("dosage.dose.code")?.value == "mg")
        #expect(a.first("effective")?.value == "2026-11-03T21:00:00-05:00")
        #expect(a.first("identifier.system")?.value == "urn:caregate:outcome")
        // A MedicationAdministration goes as a conditional update by identifier (it has no amended status).
        let bundle = export.transactionBundle(exported)
        let entry = try #require(bundle.children(named: "entry").first { $0["resource"]?.resourceType == "MedicationAdministration" })
        #expect(entry.first("request.method")?.value == "PUT")
        #expect(entry.first("request.url")?.value?.hasPrefix("MedicationAdministration?identifier=urn:caregate:outcome%7C") == true)
        #expect(ResourceValidator().validate(bundle).isEmpty)
        if let (status, message) = try schemaCheck(bundle) {
            #expect(status == 0 && message.contains("validates"), "\(message)")
        } else {
            skipNotice("XSD validation of exported MedicationAdministrations")
        }
    }

    @Test("a dose recorded as not taken is not-done with a reason; a deleted one is entered-in-error", arguments: Backend.allCases)
    func notTakenAndDeleted(backend: Backend) throws {
        guard let store = try storeWithAppOutcomes(backend) else { return }
        let export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: try mappingsWithAdministrations(), timeZone: newYork))
        var dose = try #require(store.fetchOutcomes().first { $0.values.first?.units == "mg" })
        dose.values = [OutcomeValue(.boolean(false), createdDate: local("2026-11-04 08:00"))]
        dose.version.effectiveDate = local("2026-11-04 08:00")
        try store.update([.outcome(dose)])
        var a = try #require(try export.observations().first { $0.observation.resourceType == "MedicationAdministration" }).observation
        #expect(a.string("status") == "not-done")
        #expect(a.first("statusReason.text")?.value == "Recorded as not taken by the patient")
        #expect(a["dosage"] == nil)
        #expect(ResourceValidator().validate(a).isEmpty)
        try store.delete(.outcome, ids: [dose.id], of: try #require(store.fetchPatients().first).id, at: local("2026-11-04 09:00"))
        a = try #require(try export.observations().first { $0.observation.resourceType == "MedicationAdministration" }).observation
        #expect(a.string("status") == "entered-in-error")
    }
}
