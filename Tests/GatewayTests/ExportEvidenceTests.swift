import CareStore
import FHIR
import FHIRPackages
import Foundation
import Mapping
import Testing
@testable import Gateway

/// What the gateway sends meets US Core on real data: the demo patient and Synthea patients, each
/// with an outcome for every task recorded by an enrolled device, exported with a US Core target
/// and read back from JSON and from XML.
@Suite("Exports of FHIRSamples and Synthea meet US Core, in JSON and XML")
struct ExportEvidenceTests {
    /// The store: the demo bundle and the first `synthea` Synthea bundles, one device per patient
    /// and one outcome per task shaped as its code's entry says (a value in its unit, one per
    /// component, else done), recorded by that device.
    func recorded(synthea: Int) throws -> (SQLiteCarePlanStore, Int)? {
        guard let root = sharedRoot else { return nil }
        let bundles = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("synthea").path).sorted().prefix(synthea)
        let store = try temporaryStore()
        let report = try importer(store).run([projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path]
                                             + bundles.map { root.appendingPathComponent("synthea/\($0)").path })
        #expect(report.failedPatients.isEmpty)
        let builder = ObservationBuilder(mappings: try MappingSet.load(site: []), timeZone: TimeZone(identifier: "America/New_York")!)
        let enrollment = DeviceEnrollment(store: store)
        var devices: [String: Device] = [:]
        var outcomes: [CareEntity] = []
        let recorded = Dictionary(try store.fetchOutcomes().map { ($0.taskUUID, $0.taskOccurrenceIndex) }, uniquingKeysWith: max)
        let scopes = try store.scopes(of: try store.fetchTasks().map(\.uuid))
        for task in try store.fetchTasks() where task.version.userInfo?[SurveyTask.questionnaireKey] == nil {
            guard let patient = scopes[task.uuid]?.patientID else { continue }
            if devices[patient] == nil {
                devices[patient] = try enrollment.redeem(code: try enrollment.issueCode(patientID: patient).code, name: "Phone of \(patient)", app: "Companion").device
            }
            let values = GoldenExportCheck.values(for: builder.codeKey(of: task).flatMap { builder.codes[$0] })
            var outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: recorded[task.uuid].map { $0 + 1 } ?? 0, values: values, effectiveDate: Date())
            outcome.version.source = devices[patient]!.versionSource
            outcomes.append(.outcome(outcome))
        }
        try store.add(outcomes)
        return (store, outcomes.count)
    }

    @Test("every outcome is sent, none refused, and each resource (the Observations, with their devices, and their Provenances) read back from JSON and XML has no error", arguments: ["6.1.0", "3.1.1"])
    func samplesAndSynthea(version: String) throws {
        let package = projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages/hl7.fhir.us.core-\(version).tgz").path
        guard FileManager.default.fileExists(atPath: package), let (store, count) = try recorded(synthea: 8) else {
            return skipNotice("US Core exports of the samples and Synthea")
        }
        let target = try ProfileTarget(name: "us-core-\(version)", packages: [try FHIRPackage.load(path: package)])
        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: try MappingSet.load(site: []), timeZone: TimeZone(identifier: "America/New_York")!))
        export.profiles = target
        let items = try export.observations()
        #expect(items.count == count, "imported outcomes are not sent back")
        let refused = items.compactMap(\.refusal)
        #expect(refused.isEmpty, "\(refused.count) refused, the first: \(refused.first ?? "")")
        var kinds: [String: Int] = [:]
        var withDevice = 0
        for item in items where item.refusal == nil {
            for format in [FHIRFormat.json, .xml] {
                let bytes = FHIRDocument.write(item.observation, format: format)
                let bundle = try (format == .json ? FHIRJSONReader().read(bytes) : FHIRXMLReader().read(bytes)).resource
                for entry in bundle.children(named: "entry") {
                    let resource = try #require(entry["resource"])
                    let errors = target.validate(resource).issues.filter { $0.severity <= .error }
                    #expect(errors.isEmpty, "\(format) \(resource.resourceType ?? ""): \(errors.prefix(3))")
                    if format == .json { kinds[resource.resourceType ?? "", default: 0] += 1 }
                    if format == .json, resource["device"] != nil { withDevice += 1 }
                }
            }
        }
        print("US Core \(version): \(items.count) outcomes sent as \(kinds.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")); \(withDevice) with their device; each checked from JSON and XML")
        #expect(kinds["Provenance"] == items.count && kinds["Observation", default: 0] >= 20 && withDevice == kinds["Observation"], "\(kinds)")
    }
}

/// The patient boundary in what the export tells the EHR of devices: an outcome version naming a
/// device enrolled for another patient (as a restored or hand-edited store could hold) goes
/// without that device, and without it in its Provenance.
@Suite("The export names only the outcome's own patient's devices")
struct ExportDeviceBoundaryTests {
    @Test("an outcome naming another patient's device is sent without it; one naming its own patient's device carries it, in the Observation and the Provenance")
    func anotherPatientsDevice() throws {
        let package = projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages/hl7.fhir.us.core-6.1.0.tgz").path
        guard FileManager.default.fileExists(atPath: package) else { return skipNotice("devices across the patient boundary in exports") }
        let store = try temporaryStore()
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSince1970: 1_767_243_600)
        var tasks: [String: CareTask] = [:]
        var entities: [CareEntity] = []
        for name in ["ana", "ben"] {
            var patient = Patient(id: "Patient/\(name)", name: PersonName(givenName: name), effectiveDate: start, timezone: zone)
            patient.version.remoteID = "Patient/\(name)"
            let plan = CarePlan(id: "CarePlan/\(name)", title: "Vitals", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
            var task = CareTask(id: "CarePlan/\(name)/29463-7", title: "Weight", carePlanUUID: plan.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
            task.version.groupIdentifier = "29463-7"
            task.effectiveDate = start
            tasks[name] = task
            entities += [.patient(patient), .carePlan(plan), .task(task)]
        }
        try store.add(entities)
        let enrollment = DeviceEnrollment(store: store)
        let anasPhone = try enrollment.redeem(code: try enrollment.issueCode(patientID: "Patient/ana").code, name: "Ana's phone", app: "Companion").device
        let bensPhone = try enrollment.redeem(code: try enrollment.issueCode(patientID: "Patient/ben").code, name: "Ben's phone", app: "Companion").device
        var own = Outcome(taskUUID: tasks["ana"]!.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.double(61.5), units: "kg")], effectiveDate: start)
        own.version.source = anasPhone.versionSource
        var foreign = Outcome(taskUUID: tasks["ana"]!.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.double(61.7), units: "kg")], effectiveDate: start.addingTimeInterval(86_400))
        foreign.version.source = bensPhone.versionSource
        try store.add([.outcome(own), .outcome(foreign)])

        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: try MappingSet.load(site: []), timeZone: zone))
        export.profiles = try ProfileTarget(name: "us-core-6.1.0", packages: [try FHIRPackage.load(path: package)])
        let items = try export.observations()
        #expect(items.count == 2 && items.allSatisfy { $0.refusal == nil }, "\(items.compactMap(\.refusal))")
        func deviceNames(_ item: ExportedObservation?) -> [String] {
            let entries = item?.observation.children(named: "entry").compactMap { $0["resource"] } ?? []
            return entries.flatMap { $0.children(named: "contained") }.flatMap { $0.children(named: "deviceName") }.compactMap { $0.string("name") }
        }
        let ownItem = items.first { $0.outcomeVersion == own.version.uuid }
        let foreignItem = items.first { $0.outcomeVersion == foreign.version.uuid }
        // The Observation and the Provenance each contain the device.
        #expect(deviceNames(ownItem) == ["Ana's phone", "Ana's phone"])
        #expect(deviceNames(foreignItem).isEmpty, "another patient's device named: \(deviceNames(foreignItem))")
        let foreignText = String(decoding: FHIRDocument.write(try #require(foreignItem).observation, format: .json), as: UTF8.self)
        #expect(!foreignText.contains("Ben") && !foreignText.contains(bensPhone.id), "\(foreignText)")

        // The organization the devices act for, as configured: by reference, and the Provenance still meets US Core.
        func onBehalfOf(_ item: ExportedObservation?) -> Element? {
            let provenance = item?.observation.children(named: "entry").compactMap { $0["resource"] }.first { $0.resourceType == "Provenance" }
            return provenance?.children(named: "agent").compactMap { $0["onBehalfOf"] }.first
        }
        #expect(onBehalfOf(ownItem)?.string("display") == PatientSuppliedProvenance.defaultOrganization)
        export.organization = "Organization/good-health"
        let configured = try export.observations().first { $0.outcomeVersion == own.version.uuid }
        #expect(configured?.refusal == nil, "\(configured?.refusal ?? "")")
        #expect(onBehalfOf(configured)?.string("reference") == "Organization/good-health")
    }
}

/// A screening form names its categories (SDC's `observation-extract-category`, as many as it
/// needs): its scored result goes as US Core's screening-and-assessment Observation with both.
@Suite("A screening's result carries survey and its screening category")
struct ScreeningCategoryTests {
    @Test("a food-insecurity screening naming survey and sdoh: the extracted risk has both categories, claims US Core's screening and assessment profile and meets it with no error, as the response meets US Core's QuestionnaireResponse")
    func sdohScreening() throws {
        let package = projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages/hl7.fhir.us.core-6.1.0.tgz").path
        guard FileManager.default.fileExists(atPath: package) else { return skipNotice("screening categories against US Core 6.1.0") }
        let category = { (system: String, code: String) in
            #"{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observation-extract-category", "valueCodeableConcept": {"coding": [{"system": "\#(system)", "code": "\#(code)"}]}}"#
        }
        let form = try Questionnaire(FHIRJSONReader().read(#"""
            {"resourceType": "Questionnaire", "url": "https://clinic.example.org/fhir/Questionnaire/hunger", "version": "1", "status": "active",
             "extension": [\#(category("http://terminology.hl7.org/CodeSystem/observation-category", "survey")),
                           \#(category("http://hl7.org/fhir/us/core/CodeSystem/us-core-category", "sdoh"))],
             "item": [{"linkId": "risk", "text": "Food insecurity risk score", "type": "integer",
                       "code": [{"system": "http://loinc.org", "code": "88124-3", "display": "Food insecurity risk"}],
                       "extension": [{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract", "valueBoolean": true}]}]}
            """#).resource)
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSince1970: 1_767_243_600)
        var patient = Patient(id: "Patient/sam", name: PersonName(givenName: "Sam"), effectiveDate: start, timezone: zone)
        patient.version.remoteID = "Patient/sam"
        let task = CareTask(id: "CarePlan/sam/hunger", title: "Hunger screening", carePlanUUID: UUID(),
                            schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: start, timeZone: zone), timezone: zone)
        let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.integer(2), kind: "risk", createdDate: start)], effectiveDate: start, timezone: zone)
        let record = OutcomeRecord(outcome: outcome, task: task, patient: patient, patientID: "Patient/sam", amended: false, deleted: false)
        let parts = try ObservationBuilder(codes: [:], timeZone: zone).surveyResponse(record, form: form).parts
        let target = try ProfileTarget(name: "us-core-6.1.0", packages: [try FHIRPackage.load(path: package)])
        #expect(parts.map { $0.resource.resourceType } == ["QuestionnaireResponse", "Observation"])
        for part in parts {
            var resource = part.resource
            target.claim(&resource)
            let errors = target.validate(resource).issues.filter { $0.severity <= .error }
            #expect(errors.isEmpty, "\(resource.resourceType ?? ""): \(errors)")
            if resource.resourceType == "Observation" {
                let categories = resource.children(named: "category").flatMap { $0.children(named: "coding") }.compactMap { $0.string("code") }
                #expect(categories == ["survey", "sdoh"])
                #expect(resource["meta"]?.children(named: "profile").map(\.value) == ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-observation-screening-assessment"])
            }
        }
    }
}
