import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// Survey activities in, as the shipped mapping files map them: the form found by canonical
/// (version pinned or latest), by reference or by id; a form that cannot be found or read is a
/// reported loss, never a plain task.
@Suite("Survey tasks from CarePlans, ServiceRequests and SDC Tasks")
struct SurveyTaskTests {
    static let surveys = samplesDirectory.appendingPathComponent("surveys")
    static let formsFolder = surveys.appendingPathComponent("questionnaires")

    static func resource(_ json: String) -> Element { try! FHIRJSONReader().read(json).resource }

    static func form(_ name: String) throws -> Element {
        try FHIRDocument.read(contentsOf: formsFolder.appendingPathComponent("Questionnaire-\(name).json").path).resource
    }

    /// The sample forms as a catalog (what `--questionnaires` gives the engine).
    static func sampleCatalog() throws -> QuestionnaireCatalog {
        QuestionnaireCatalog(try ["phq-9", "gad-7", "weight-height"].map { SourcedResource(resource: try form($0), origin: "Questionnaire-\($0).json") })
    }

    static func map(_ resources: [SourcedResource], forms: QuestionnaireCatalog = QuestionnaireCatalog()) throws -> MappingOutput {
        var engine = MappingEngine(mappings: try MappingSet.load([mappingsDirectory.path]), timeZone: newYork, now: importTime)
        engine.questionnaires = forms
        return engine.map(resources)
    }

    static func sources(_ resources: [Element]) -> [SourcedResource] {
        resources.map { SourcedResource(resource: $0, origin: "test/\($0.relativeReference ?? "?")") }
    }

    static let patient = resource(#"{"resourceType": "Patient", "id": "p1"}"#)

    static func carePlan(_ canonicals: [String]) -> Element {
        let activities = canonicals.enumerated().map { i, canonical in
            #"{"detail": {"status": "scheduled", "code": {"text": "Form \#(i)"}, "instantiatesCanonical": ["\#(canonical)"], "scheduledString": "weekly"}}"#
        }
        return resource(#"{"resourceType": "CarePlan", "id": "plan", "status": "active", "intent": "plan", "subject": {"reference": "Patient/p1"}, "activity": [\#(activities.joined(separator: ","))]}"#)
    }

    @Test("the sample plan: a PHQ-9 every two weeks, a weight-and-height form weekly and a monthly GAD-7 become survey tasks naming their forms")
    func samplePlan() throws {
        let output = try Self.map(try bundleResources(Self.surveys.appendingPathComponent("sam-rivera-surveys-bundle.json").path), forms: Self.sampleCatalog())
        let batch = try #require(output.batches.first)
        let tasks = Dictionary(uniqueKeysWithValues: batch.tasks.map { ($0.task.id, $0) })
        #expect(tasks.count == 3)
        let phq = try #require(tasks["CarePlan/sam-rivera-wellbeing/44249-1"])
        #expect(phq.task.version.userInfo?[SurveyTask.questionnaireKey] == "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0")
        #expect(phq.task.version.userInfo?[SurveyTask.hashKey] == SourceRecord.contentHash(of: try Self.form("phq-9")))
        #expect(phq.task.title == "PHQ-9: depression screening")
        #expect(phq.task.instructions == "Over the last 2 weeks, how often have you been bothered by any of the following problems?")
        #expect(phq.task.schedule.elements.first?.interval == DateComponents(weekOfYear: 2))
        // A canonical without a version names the form's own version.
        #expect(tasks["CarePlan/sam-rivera-wellbeing/29463-7"]?.task.version.userInfo?[SurveyTask.questionnaireKey] == "https://clinic.example.org/fhir/Questionnaire/weight-height|1.0")
        let gad = try #require(tasks["ServiceRequest/sam-rivera-gad-7"])
        #expect(gad.task.title == "GAD-7: anxiety screening" && gad.task.schedule.elements.first?.interval == DateComponents(month: 1))
        #expect(batch.questionnaires.map(\.canonical.description).sorted() == [
            "https://clinic.example.org/fhir/Questionnaire/gad-7|1.0", "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0",
            "https://clinic.example.org/fhir/Questionnaire/weight-height|1.0"])
        #expect(output.missingQuestionnaires.isEmpty)
        #expect(!output.notes.contains { $0.kind == .error })
    }

    @Test("without the forms each survey activity is a reported loss, not a plain task, and its canonical is asked for")
    func missingForms() throws {
        let output = try Self.map(try bundleResources(Self.surveys.appendingPathComponent("sam-rivera-surveys-bundle.json").path))
        #expect(output.batches.first?.tasks.isEmpty == true)
        #expect(output.missingQuestionnaires.map(\.description) == [
            "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0", "https://clinic.example.org/fhir/Questionnaire/weight-height",
            "https://clinic.example.org/fhir/Questionnaire/gad-7"])
        let losses = output.notes.filter { $0.kind == .loss && $0.message.contains("is not in the imported data") }
        #expect(losses.map(\.resource) == ["CarePlan/sam-rivera-wellbeing", "CarePlan/sam-rivera-wellbeing", "ServiceRequest/sam-rivera-gad-7"])
        #expect(losses.first?.path?.hasPrefix("activity.where(detail.exists())[0] detail.instantiatesCanonical") == true)
        #expect(output.dispositions.filter { $0.kind == .unresolved }.count == 3)
    }

    @Test("a pinned version finds that version; no version finds the latest by date; a version no one has is missing")
    func versions() throws {
        var newer = try Self.form("phq-9")
        newer.setValue("3.0", for: "version")
        newer.setValue("2026-10-01", for: "date")
        newer.setValue("PHQ-9 (2026)", for: "title")
        var forms = try Self.sampleCatalog()
        forms.add(SourcedResource(resource: newer, origin: "newer.json"))
        let url = "https://clinic.example.org/fhir/Questionnaire/phq-9"
        let output = try Self.map(Self.sources([Self.patient, Self.carePlan([url + "|2.0", url, url + "|9.9"])]), forms: forms)
        let tasks = try #require(output.batches.first).tasks
        #expect(tasks.map(\.task.title) == ["PHQ-9: depression screening", "PHQ-9 (2026)"])
        #expect(tasks.map { $0.task.version.userInfo?[SurveyTask.questionnaireKey] } == [url + "|2.0", url + "|3.0"])
        #expect(output.missingQuestionnaires.map(\.description) == [url + "|9.9"])
        // Each version is kept: the batch carries both forms.
        #expect(output.batches[0].questionnaires.count == 2)
    }

    @Test("a ServiceRequest's core extension names its form by Reference; a relative canonical finds a form by id")
    func referencesAndIDs() throws {
        let gcs = try #require(SharedData.isAvailable ? Self.sharedForms(suffix: ".json").first { $0.lastPathComponent == "Questionnaire-gcs.json" } : nil,
                               "needs ../shared")
        let form = try FHIRDocument.read(contentsOf: gcs.path).resource
        let request = Self.resource(#"""
            {"resourceType": "ServiceRequest", "id": "sr1", "status": "active", "intent": "order", "subject": {"reference": "Patient/p1"},
             "code": {"text": "Coma score"},
             "extension": [{"url": "http://hl7.org/fhir/StructureDefinition/servicerequest-questionnaireRequest", "valueReference": {"reference": "Questionnaire/gcs"}}]}
            """#)
        let output = try Self.map(Self.sources([Self.patient, request, form, Self.carePlan(["Questionnaire/gcs"])]))
        let tasks = try #require(output.batches.first).tasks
        #expect(tasks.map(\.task.id).sorted() == ["CarePlan/plan/activity-0", "ServiceRequest/sr1"])
        #expect(tasks.allSatisfy { $0.task.version.userInfo?[SurveyTask.questionnaireKey] == "http://hl7.org/fhir/Questionnaire/gcs" && $0.task.title == "Glasgow Coma Score" })
        // The same request with a Reference to a form the data lacks: a loss, and the form is asked for.
        let lonely = try Self.map(Self.sources([Self.patient, request]))
        #expect(lonely.batches.first?.tasks.isEmpty == true)
        #expect(lonely.missingQuestionnaires == [Canonical(url: "Questionnaire/gcs")])
        #expect(lonely.notes.contains { $0.kind == .loss && $0.resource == "ServiceRequest/sr1" && $0.message.contains("Questionnaire/gcs") })
    }

    @Test("SDC Tasks: complete-questionnaire with its input, fulfill through the ServiceRequest it focuses on; other Tasks are skipped")
    func sdcTasks() throws {
        let ask = Self.resource(#"""
            {"resourceType": "Task", "id": "t1", "status": "requested", "intent": "order", "for": {"reference": "Patient/p1"},
             "code": {"coding": [{"system": "http://hl7.org/fhir/uv/sdc/CodeSystem/temp", "code": "complete-questionnaire"}]},
             "restriction": {"period": {"start": "2026-11-03", "end": "2026-11-05"}},
             "input": [{"type": {"coding": [{"system": "http://hl7.org/fhir/uv/sdc/CodeSystem/temp", "code": "questionnaire"}]},
                        "valueCanonical": "https://clinic.example.org/fhir/Questionnaire/gad-7|1.0"}]}
            """#)
        let request = Self.resource(#"""
            {"resourceType": "ServiceRequest", "id": "sr2", "status": "active", "intent": "order", "subject": {"reference": "Patient/p1"},
             "extension": [{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-servicerequest-questionnaire", "valueCanonical": "https://clinic.example.org/fhir/Questionnaire/phq-9"}]}
            """#)
        let fulfil = Self.resource(#"""
            {"resourceType": "Task", "id": "t2", "status": "requested", "intent": "order", "for": {"reference": "Patient/p1"},
             "code": {"coding": [{"system": "http://hl7.org/fhir/CodeSystem/task-code", "code": "fulfill"}]}, "focus": {"reference": "ServiceRequest/sr2"}}
            """#)
        let other = Self.resource(#"{"resourceType": "Task", "id": "t3", "status": "requested", "intent": "order", "for": {"reference": "Patient/p1"}, "code": {"text": "call back"}}"#)
        let output = try Self.map(Self.sources([Self.patient, ask, request, fulfil, other]), forms: Self.sampleCatalog())
        let tasks = Dictionary(uniqueKeysWithValues: try #require(output.batches.first).tasks.map { ($0.task.id, $0.task) })
        #expect(tasks.keys.sorted() == ["ServiceRequest/sr2", "Task/t1"])
        #expect(tasks["Task/t1"]?.version.userInfo?[SurveyTask.questionnaireKey] == "https://clinic.example.org/fhir/Questionnaire/gad-7|1.0")
        #expect(tasks["Task/t1"]?.schedule.elements.first?.start == local("2026-11-03 00:00"))
        #expect(tasks["ServiceRequest/sr2"]?.version.userInfo?[SurveyTask.questionnaireKey] == "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0")
        #expect(output.notes.contains { $0.kind == .skipped && $0.resource == "Task/t3" && $0.message.contains("asks for no questionnaire") })
    }

    @Test("a canonical naming an ActivityDefinition asks for no survey: a plain task, nothing missing")
    func otherDefinitions() throws {
        let output = try Self.map(Self.sources([Self.patient, Self.carePlan(["http://example.org/fhir/ActivityDefinition/walk"])]))
        let task = try #require(output.batches.first?.tasks.first?.task)
        #expect(task.version.userInfo?[SurveyTask.questionnaireKey] == nil && task.title == "Form 0")
        #expect(output.missingQuestionnaires.isEmpty)
    }

    @Test("a form that cannot be read leaves its activity out, with the item at fault named")
    func unreadableForm() throws {
        var broken = try Self.form("gad-7")
        broken.setValue("https://clinic.example.org/fhir/Questionnaire/broken", for: "url")
        var items = broken.children(named: "item")
        items[1].setValue("/69725-0", for: "linkId")
        broken.children.removeAll { $0.name == "item" }
        broken.children += items
        let output = try Self.map(Self.sources([Self.patient, broken, Self.carePlan(["https://clinic.example.org/fhir/Questionnaire/broken"])]))
        #expect(output.batches.first?.tasks.isEmpty == true)
        let error = try #require(output.notes.first { $0.kind == .error })
        #expect(error.message.contains("cannot be read: item '/69725-0'"), "\(error)")
    }

    @Test("caregate validate checks a rule's questionnaire: a CodeableConcept is refused at its line, a canonical or a Reference passes")
    func validated() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-survey-rule-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let check = { (expression: String) throws -> [String] in
            let path = folder.appendingPathComponent("careplan.yaml").path
            try "caregate-mapping: 1\nresource: CarePlan\nextends: builtin:careplan.yaml\ntasks:\n  - name: activity-detail\n    questionnaire: \(expression)\n"
                .write(toFile: path, atomically: true, encoding: .utf8)
            return MappingValidator().check(path: path).diagnostics.filter { $0.severity == .error }.map { "\($0.location.line): \($0.message)" }
        }
        #expect(try check("detail.code") == ["6: this must give a canonical or a Reference to a Questionnaire, not CodeableConcept"])
        #expect(try check("detail.instantiatesCanonical").isEmpty)
        #expect(try check("detail.extension.where(url = 'https://clinic.example.org/form').value.ofType(Reference)").isEmpty)
    }

    static func sharedForms(suffix: String) -> [URL] {
        SharedData.files("fhir-r4/questionnaires/\(suffix == ".json" ? "json" : "xml")", suffix: suffix).filter { $0.lastPathComponent.hasPrefix("Questionnaire-") }
    }

    @Test("every shared Questionnaire, in JSON and in XML, imports as a survey task of a CarePlan naming it", arguments: [".json", ".xml"])
    func sharedQuestionnaires(suffix: String) throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("sharedQuestionnaires") }
        let files = Self.sharedForms(suffix: suffix)
        #expect(files.count == 7)
        for file in files {
            let form = try FHIRDocument.read(contentsOf: file.path).resource
            // By url where the form has one, else by id (the PHQ-9 example has no url).
            let canonical = form.string("url") ?? "Questionnaire/\(form.string("id")!)"
            let output = try Self.map(Self.sources([Self.patient, form, Self.carePlan([canonical])]))
            let task = try #require(output.batches.first?.tasks.first, "\(file.lastPathComponent): \(output.notes)")
            #expect(task.task.version.userInfo?[SurveyTask.questionnaireKey]?.hasPrefix(canonical) == true, "\(file.lastPathComponent)")
            #expect(task.task.title == (form.string("title") ?? "Form 0"), "\(file.lastPathComponent)")
            #expect(task.questionnaire?.digest == SourceRecord.contentHash(of: form))
        }
    }
}
