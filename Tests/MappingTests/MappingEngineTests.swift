import CareStore
import FHIR
import FHIRPath
import Foundation
import Testing
@testable import Mapping

let samplesDirectory = mappingsDirectory.deletingLastPathComponent().appendingPathComponent("FHIRSamples")

/// The entries of a Bundle file as sourced resources.
func bundleResources(_ path: String) throws -> [SourcedResource] {
    let bundle = try FHIRDocument.read(contentsOf: path).resource
    let index = BundleIndex(bundle)
    return bundle.children.filter { $0.name == "entry" }.enumerated().compactMap { i, entry in
        entry["resource"].map { SourcedResource(resource: $0, container: bundle, index: index, origin: "\((path as NSString).lastPathComponent)#entry[\(i)]") }
    }
}

let importTime = local("2026-11-01 09:00")

func mapSamples() throws -> MappingOutput {
    let set = try MappingSet.load([mappingsDirectory.path])
    let engine = MappingEngine(mappings: set, timeZone: newYork, now: importTime)
    return engine.map(try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path))
}

func render(_ task: CareTask, days: Int = 1, from: Date = local("2026-11-02")) -> [String] {
    task.schedule.events(from: from, to: from.addingTimeInterval(Double(days) * 86_400)).map(render)
}

@Suite("Mapping engine on the sample patient")
struct MappingEngineTests {
    @Test("the demo Bundle: one patient, the care plan, a task per activity or a reported skip, contacts, outcomes")
    func demoBundle() throws {
        let output = try mapSamples()
        #expect(output.batches.count == 1)
        let batch = try #require(output.batches.first)
        #expect(batch.patientID == "Patient/maria-lopez")
        #expect(batch.patient?.name.givenName == "María Elena" && batch.patient?.name.familyName == "López")
        #expect(batch.carePlans.map(\.plan.id) == ["CarePlan/maria-lopez-home-care"])
        #expect(batch.carePlans[0].plan.title == "Home care after hospital discharge")
        let tasks = Dictionary(uniqueKeysWithValues: batch.tasks.map { ($0.task.id, $0) })
        // Nine activities: four details, four references to MedicationRequests, one doNotPerform (skipped).
        #expect(tasks.count == 8)
        #expect(Set(batch.tasks.map(\.carePlanID)) == ["CarePlan/maria-lopez-home-care"])
        #expect(output.notes.contains { $0.kind == .skipped && $0.message.hasPrefix("doNotPerform") })
        // Schedules from the Timings, in New York time.
        let walk = try #require(tasks["CarePlan/maria-lopez-home-care/229065009"]?.task)
        #expect(render(walk) == ["11-02 17:30 +30m"])
        #expect(render(try #require(tasks["CarePlan/maria-lopez-home-care/85354-9"]?.task)) == ["11-02 08:00", "11-02 20:00"])
        let metformin = try #require(tasks["MedicationRequest/metformin/dosage-1"]?.task)
        #expect(metformin.title == "Metformin 500 mg tablet")
        #expect(render(metformin) == ["11-02 07:30", "11-02 18:30"])
        #expect(metformin.schedule.elements.allSatisfy { $0.targetValues.first?.units == "mg" })
        let nitroglycerin = try #require(tasks["MedicationRequest/nitroglycerin-prn/dosage-0"]?.task)
        #expect(nitroglycerin.impactsAdherence == false)
        #expect(render(nitroglycerin) == ["11-02 all-day"])
        // A LOINC-coded activity becomes a HealthKit task; every entry records where it came from.
        #expect(tasks["CarePlan/maria-lopez-home-care/29463-7"]?.task.healthKitLinkage?.quantityIdentifier == "HKQuantityTypeIdentifierBodyMass")
        #expect(metformin.version.remoteID == "MedicationRequest/metformin")
        #expect(metformin.version.userInfo?["caregate.rule"] == "medicationrequest.yaml#dosage")
        #expect(metformin.version.userInfo?["caregate.hash"]?.count ?? 0 >= 8)
        // Contacts from the care team: practitioners through their roles, a related person from contained data.
        #expect(batch.contacts.count == 3)
        let chen = try #require(batch.contacts.first { $0.contact.name.familyName == "Chen" }?.contact)
        #expect(chen.category == .careProvider && chen.phoneNumbers?.isEmpty == false)
        #expect(batch.contacts.contains { $0.contact.category == .friendsAndFamily })
        // Observations become outcomes to be matched to tasks by code.
        #expect(batch.outcomes.count == 4)
        let pressure = try #require(batch.outcomes.first { $0.taskGroups == ["85354-9"] })
        #expect(pressure.values.map(\.kind) == ["8480-6", "8462-4"])
        #expect(pressure.values.map(\.units) == ["mmHg", "mmHg"])
    }

    @Test("told to defer, an outcome no task mapped before it records waits for its date and values; completed, it equals the outcome mapped at once; one a task records is complete")
    func deferredOutcomes() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        let resources = try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path)
        var deferring = MappingEngine(mappings: set, timeZone: newYork, now: importTime)
        deferring.defersUnrecordedOutcomes = true
        // Observations first, then the rest: no task is mapped when the Observations are.
        let observationsFirst = resources.filter { $0.resource.resourceType == "Observation" } + resources.filter { $0.resource.resourceType != "Observation" }
        let eager = try #require(MappingEngine(mappings: set, timeZone: newYork, now: importTime).map(observationsFirst).batches.first)
        let deferred = try #require(deferring.map(observationsFirst).batches.first)
        #expect(eager.outcomes.allSatisfy { $0.isComplete })
        #expect(deferred.outcomes.count == eager.outcomes.count && deferred.outcomes.allSatisfy { !$0.isComplete })
        func describe(_ o: MappedOutcome) -> String { "\(o.taskGroups) \(o.date) \(o.values.map { "\($0.value) \($0.kind ?? "") \($0.units ?? "")" }) \(o.recorded().contentHash)" }
        let completed = deferred.outcomes.map { $0.completed() }
        #expect(completed.allSatisfy { $0.notes.isEmpty })
        #expect(completed.compactMap { $0.outcome.map(describe) } == eager.outcomes.map(describe))
        // In the file's order the care plan comes first: the outcomes its tasks record are complete.
        let inOrder = try #require(deferring.map(resources).batches.first)
        let groups = Set(inOrder.tasks.compactMap(\.task.version.groupIdentifier))
        #expect(inOrder.outcomes.contains { $0.isComplete })
        #expect(inOrder.outcomes.allSatisfy { $0.isComplete == $0.taskGroups.contains(where: groups.contains) })
    }

    @Test("a urn:uuid reference names the patient of its own Bundle: two Bundles that give one urn to different patients keep their care plans apart")
    func sameURNInTwoBundles() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        func bundle(_ patientID: String) throws -> [SourcedResource] {
            let bundle = try FHIRJSONReader().read("""
                {"resourceType": "Bundle", "type": "collection", "entry": [
                  {"fullUrl": "urn:uuid:5e1f", "resource": {"resourceType": "Patient", "id": "\(patientID)"}},
                  {"fullUrl": "urn:uuid:c1", "resource": {"resourceType": "CarePlan", "id": "plan-\(patientID)", "status": "active", "intent": "plan",
                    "subject": {"reference": "urn:uuid:5e1f"}}},
                  {"fullUrl": "urn:uuid:c2", "resource": {"resourceType": "CarePlan", "id": "plan-2-\(patientID)", "status": "active", "intent": "plan",
                    "subject": {"reference": "urn:uuid:5e1f"}}}]}
                """).resource
            let index = BundleIndex(bundle)
            return bundle.children.compactMap { $0["resource"].map { SourcedResource(resource: $0, container: bundle, index: index, origin: patientID) } }
        }
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map(try bundle("p-a") + bundle("p-b"))
        let plans = Dictionary(uniqueKeysWithValues: output.batches.map { ($0.patientID, $0.carePlans.map(\.plan.id)) })
        #expect(plans == ["Patient/p-a": ["CarePlan/plan-p-a", "CarePlan/plan-2-p-a"], "Patient/p-b": ["CarePlan/plan-p-b", "CarePlan/plan-2-p-b"]])
    }

    @Test("the same resources read from XML give the same entries as from JSON")
    func xmlAndJSON() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        let engine = MappingEngine(mappings: set, timeZone: newYork, now: importTime)
        let json = engine.map(try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path))
        let xml = engine.map(try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.xml").path))
        func summary(_ o: MappingOutput) -> [String] {
            o.batches.flatMap { b in
                b.tasks.map { "\($0.task.id)|\($0.task.title ?? "")|\($0.task.schedule.elements.map { "\($0.start)\($0.interval)\($0.duration)" })" }
                    + b.contacts.map { "\($0.contact.id)|\($0.contact.name)" } + b.outcomes.map { "\($0.taskGroups)\($0.date)\($0.values.map(\.value))" }
            }.sorted()
        }
        #expect(!summary(json).isEmpty)
        #expect(summary(json) == summary(xml))
    }

    @Test("a revoked care plan ends its plan and every task it made, its references' tasks included")
    func revoked() throws {
        var resources = try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path)
        let i = try #require(resources.firstIndex { $0.resource.resourceType == "CarePlan" })
        resources[i].resource.setValue("revoked", for: "status")
        let set = try MappingSet.load([mappingsDirectory.path])
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map(resources)
        let batch = try #require(output.batches.first)
        #expect(batch.carePlans.isEmpty && batch.tasks.isEmpty)
        #expect(batch.ends.contains { $0.type == .carePlan && $0.id == "CarePlan/maria-lopez-home-care" })
        #expect(batch.ends.filter { $0.type == .task }.count == 8)
        #expect(output.notes.contains { $0.kind == .ended && $0.message == "the plan was revoked, completed or put on hold" })
    }

    @Test("an unknown modifierExtension stops its resource with an explanation; known-modifiers lets it through")
    func modifierExtension() throws {
        var resources = try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path)
        let i = try #require(resources.firstIndex { $0.resource.resourceType == "CarePlan" })
        var activity = resources[i].resource.children(named: "activity")[4]
        var modifier = Element(name: "modifierExtension", type: "Extension")
        modifier.append(Element(name: "url", type: "uri", value: "http://example.org/fhir/only-if-symptomatic"))
        modifier.append(Element(name: "value", type: "boolean", value: "true"))
        activity.append(modifier)
        var plan = resources[i].resource
        var children = plan.children
        let position = children.indices.filter { children[$0].name == "activity" }[4]
        children[position] = activity
        plan.children = children
        resources[i].resource = plan
        var set = try MappingSet.load([mappingsDirectory.path])
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map(resources)
        let note = try #require(output.notes.first { $0.kind == .error })
        #expect(note.resource == "CarePlan/maria-lopez-home-care")
        #expect(note.path == "CarePlan.activity[4].modifierExtension[0]")
        #expect(note.message.contains("http://example.org/fhir/only-if-symptomatic"))
        #expect(output.batches.first?.carePlans.isEmpty == true)
        set.files["CarePlan"]!.knownModifiers.append("http://example.org/fhir/only-if-symptomatic")
        let allowed = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map(resources)
        #expect(allowed.batches.first?.tasks.count == 8)
    }

    @Test("a reference to a resource that was not imported is reported; unit labels come from the units table")
    func unresolvedAndUnits() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        let plan = try FHIRDocument.read(contentsOf: samplesDirectory.appendingPathComponent("json/CarePlan-maria-lopez-home-care.json").path).resource
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map([SourcedResource(resource: plan, origin: "plan.json")])
        let warnings = output.notes.filter { $0.kind == .warning }.map(\.message)
        #expect(warnings.contains("MedicationRequest/metformin is not in the imported data; what it names is not imported"))
        #expect(warnings.contains("CareTeam/maria-lopez-care-team is not in the imported data; what it names is not imported"))
        #expect(output.batches.first?.tasks.count == 4)
        let pressure = try FHIRDocument.read(contentsOf: samplesDirectory.appendingPathComponent("json/Observation-maria-lopez-heart-rate.json").path).resource
        let outcome = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map([SourcedResource(resource: pressure, origin: "hr.json")])
        #expect(outcome.batches.first?.outcomes.first?.values.first?.units == "beats/min")
    }

    @Test("a task-codes table gives the site's words for a code")
    func taskCodes() throws {
        var set = try MappingSet.load([mappingsDirectory.path])
        set.files["CarePlan"]!.tables.taskCodes["http://snomed.info/sct|229065009"] = TaskCodeEntry(title: "Walk", instructions: "Half an hour, any pace.", group: nil, impactsAdherence: false)
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime)
            .map(try bundleResources(samplesDirectory.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path))
        let walk = try #require(output.batches.first?.tasks.first { $0.task.id == "CarePlan/maria-lopez-home-care/229065009" }?.task)
        #expect(walk.title == "Walk" && walk.instructions == "Half an hour, any pace." && walk.impactsAdherence == false)
        #expect(walk.version.groupIdentifier == "229065009")
    }

    @Test("a Patient record replaced by another is reported, not imported")
    func replacedPatient() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        var patient = try FHIRDocument.read(contentsOf: samplesDirectory.appendingPathComponent("json/Patient-maria-lopez.json").path).resource
        var link = Element(name: "link", type: "Patient.link")
        var other = Element(name: "other", type: "Reference")
        other.append(Element(name: "reference", type: "string", value: "Patient/maria-lopez-2"))
        link.append(other)
        link.append(Element(name: "type", type: "code", value: "replaced-by"))
        patient.append(link)
        let output = MappingEngine(mappings: set, timeZone: newYork, now: importTime).map([SourcedResource(resource: patient, origin: "p.json")])
        #expect(output.batches.isEmpty)
        #expect(output.notes.map(\.message) == ["this record is replaced by Patient/maria-lopez-2; import that record instead"])
    }
}
