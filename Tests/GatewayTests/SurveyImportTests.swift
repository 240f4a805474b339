import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping
import Testing
@testable import Gateway

/// Survey activities imported into the store: the forms kept, per patient and content, beside the
/// care plan; found in the files, a `--questionnaires` folder or on the EHR.
@Suite("Survey import", .serialized)
struct SurveyImportTests {
    static let surveys = projectRoot.appendingPathComponent("FHIRSamples/surveys")
    static let bundle = surveys.appendingPathComponent("sam-rivera-surveys-bundle.json").path
    static let forms = surveys.appendingPathComponent("questionnaires").path
    static let phq = "https://clinic.example.org/fhir/Questionnaire/phq-9"

    static func surveyImporter(_ store: any CarePlanStore, now: Date = local("2026-11-01 09:00")) throws -> FHIRImporter {
        var importer = try importer(store, now: now)
        importer.questionnaires = ResourceFiles().questionnaires([forms]).catalog
        return importer
    }

    @Test("with --questionnaires, the plan's surveys are stored with their forms; each form is the patient's alone; again changes nothing",
          arguments: Backend.allCases)
    func formsFolder(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let report = try Self.surveyImporter(store).run([Self.bundle])
        #expect(report.failedPatients.isEmpty && !report.notes.contains { $0.kind == .error || $0.kind == .loss && $0.message.contains("Questionnaire") })
        let surveys = try store.fetchTasks().filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }
        #expect(surveys.count == 3)
        let kept = try store.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: nil)
        #expect(kept.map(\.version) == ["2.0"] && kept.first?.title == "PHQ-9: depression screening")
        let form = try FHIRJSONReader().read(try #require(kept.first).resource).resource
        #expect(form.children(named: "item").count == 10)
        #expect(kept.first?.digest == surveys.first { $0.title?.hasPrefix("PHQ-9") == true }?.version.userInfo?[SurveyTask.hashKey])
        // Another patient has none of them, whatever the url.
        #expect(try store.questionnaires(of: "Patient/maria-lopez", url: Self.phq, version: nil).isEmpty)
        #expect(try store.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: "1.0").isEmpty)
        let again = try Self.surveyImporter(store).run([Self.bundle])
        #expect(again.counts[.create] == nil && again.counts[.update] == nil, "\(again.counts)")
        #expect(try store.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: nil).count == 1)
    }

    @Test("a changed form is kept beside the old one, and the task's new version names the new content; answers to the old keep theirs",
          arguments: Backend.allCases)
    func changedForm(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        _ = try Self.surveyImporter(store).run([Self.bundle])
        let before = try #require(try store.fetchTasks().first { $0.id.hasSuffix("44249-1") })
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-forms-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var phq = try FHIRDocument.read(contentsOf: Self.forms + "/Questionnaire-phq-9.json").resource
        phq.setValue("Over the last two weeks, how often have these bothered you?", for: "description")
        try Data(FHIRJSONWriter(pretty: true).write(phq)).write(to: folder.appendingPathComponent("phq-9.json"))
        var importer = try importer(store, now: local("2026-11-20 09:00"))
        importer.questionnaires = ResourceFiles().questionnaires([folder.path, Self.forms]).catalog
        let report = importer.run([Self.bundle])
        #expect(report.counts[.update] == 1, "\(report.counts)")
        let after = try #require(try store.fetchTasks().first { $0.id.hasSuffix("44249-1") })
        #expect(after.instructions == "Over the last two weeks, how often have these bothered you?")
        #expect(after.version.userInfo?[SurveyTask.hashKey] != before.version.userInfo?[SurveyTask.hashKey])
        let kept = try store.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: "2.0")
        #expect(Set(kept.map(\.digest)) == Set([before, after].compactMap { $0.version.userInfo?[SurveyTask.hashKey] }))
        #expect(kept.first?.digest == after.version.userInfo?[SurveyTask.hashKey], "newest first")
    }

    @Test("caregate devices try leaves survey tasks to the app: no outcome of `true` for a form it would not answer")
    func tryingDevicesSkipSurveys() throws {
        let store = try temporaryStore()
        _ = try Self.surveyImporter(store).run([Self.bundle])
        _ = try importer(store).run([demoBundle])
        let events = try store.events(from: local("2026-11-02"), to: local("2026-11-09"), tasks: EntityQuery())
        #expect(events.contains { RecordedValues.isSurvey($0.task) } && events.contains { !RecordedValues.isSurvey($0.task) })
        let outcomes = RecordedValues().outcomes(for: events, skip: 0, calendar: Schedule.calendar(newYork))
        let surveyTasks = Set(events.filter { RecordedValues.isSurvey($0.task) }.map(\.task.uuid))
        #expect(!outcomes.isEmpty && outcomes.allSatisfy { !surveyTasks.contains($0.taskUUID) })
    }

    @Test("a staged import finds forms among the files it reads, as a whole-run import does")
    func stagedFindsForms() async throws {
        let staged = try temporaryStore(), whole = try temporaryStore()
        let report = try await StagedImport(importer: try importer(staged)).run([Self.surveys.path], staging: try SQLiteImportStaging(inMemory: ()))
        _ = try importer(whole).run([Self.surveys.path])
        // Sam's three, and Ana's mood check-in (its form's answer set from the same bundle).
        #expect(try staged.fetchTasks().filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }.count == 4)
        #expect(report.unmapped["Questionnaire"] == nil && report.unmapped["ValueSet"] == nil, "\(report.unmapped)")
        let mood = try #require(try staged.questionnaires(of: "Patient/ana-mood", url: "https://clinic.example.org/fhir/Questionnaire/mood", version: "1.0").first)
        #expect(try FHIRJSONReader().read(mood.resource).resource.children(named: "contained").first?.string("url") == "http://loinc.org/vs/LL358-3")
        #expect(try StoreSnapshot.json(staged, notes: [], timeZone: newYork) == StoreSnapshot.json(whole, notes: [], timeZone: newYork))
        #expect(try staged.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: nil).count == 1)
    }

    @Test("a --questionnaires folder without a form, or one that does not exist, is a note naming it")
    func formsFolderProblems() throws {
        let empty = ResourceFiles().questionnaires([projectRoot.appendingPathComponent("FHIRSamples/json").path])
        #expect(empty.catalog.count == 0)
        #expect(empty.problems.map(\.message) == ["no Questionnaire in it: survey activities will not find their forms here"])
        let missing = ResourceFiles().questionnaires(["/nonexistent/forms"])
        #expect(missing.problems.first?.kind == .error && missing.problems.first?.origin == "/nonexistent/forms", "\(missing.problems)")
    }

    @Test("pulled from an EHR, the forms the plan asks are fetched by url and version; one the server lacks is a note and a loss")
    func formsFromTheEHR() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        let resources = try FHIRDocument.read(contentsOf: Self.bundle).resource.children(named: "entry").compactMap { $0["resource"] }
        let forms = try ["phq-9", "weight-height"].map { try FHIRDocument.read(contentsOf: Self.forms + "/Questionnaire-\($0).json").resource }
        _ = try await client.transaction(seedTransaction(resources: resources + forms, base: server.base))
        let store = try temporaryStore()
        let importer = try importer(store)
        var pull = PatientPull(client: client)
        pull.formsAsked = importer.missingQuestionnaires
        let pulled = try await pull.pull(patient: "sam-rivera")
        #expect(pulled.requests.contains("GET Questionnaire?url=\(Self.phq)&version=2.0"), "\(pulled.requests)")
        #expect(pulled.resources.filter { $0.resource.resourceType == "Questionnaire" }.count == 2)
        // The GAD-7 is not on the server: a note from the pull, a loss from the mapping.
        #expect(pulled.notes.contains { $0.message.contains("has no Questionnaire https://clinic.example.org/fhir/Questionnaire/gad-7") }, "\(pulled.notes)")
        var report = ImportReport()
        report.notes = pulled.notes
        report = importer.run(resources: pulled.resources, report: report)
        #expect(report.notes.contains { $0.kind == .loss && $0.resource == "ServiceRequest/sam-rivera-gad-7" })
        let surveys = try store.fetchTasks().filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }
        #expect(surveys.map(\.id).sorted() == ["CarePlan/sam-rivera-wellbeing/29463-7", "CarePlan/sam-rivera-wellbeing/44249-1"])
        #expect(try store.questionnaires(of: "Patient/sam-rivera", url: Self.phq, version: "2.0").first?.title == "PHQ-9: depression screening")
        // What the pull read, SMART's default scope for it grants.
        let read = Set(pulled.requests.compactMap { $0.split(separator: " ").last?.split(whereSeparator: { "/?".contains($0) }).first.map(String.init) })
        #expect(read.isSuperset(of: ["Patient", "CarePlan", "ServiceRequest", "Questionnaire"]), "\(read)")
        #expect(read.allSatisfy { SMARTScopes.pull.split(separator: " ").contains("system/\($0).rs") }, "\(read) against \(SMARTScopes.pull)")
    }

    /// `resources` on a fresh sekmet-fhir, `patient` pulled from it (forms asked as `import --from`
    /// asks them) and imported into a fresh store.
    static func pulledAndImported(_ resources: [Element], patient: String, from server: LocalFHIRServer) async throws
        -> (store: SQLiteCarePlanStore, pulled: PatientPull.Result, report: ImportReport) {
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        _ = try await client.transaction(seedTransaction(resources: resources, base: server.base))
        let store = try temporaryStore()
        let importer = try importer(store)
        var pull = PatientPull(client: client)
        pull.formsAsked = importer.missingQuestionnaires
        let pulled = try await pull.pull(patient: patient)
        var report = ImportReport()
        report.notes = pulled.notes
        return (store, pulled, importer.run(resources: pulled.resources, report: report))
    }

    @Test("pulled from an EHR, a form's answer value sets come with it: one the server lists is contained in the kept form, one it cannot list is a warning")
    func answerSetsFromTheEHR() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let resources = try [
            #"{"resourceType": "Patient", "id": "ana-sets"}"#,
            #"{"resourceType": "CarePlan", "id": "ana-plan", "status": "active", "intent": "plan", "subject": {"reference": "Patient/ana-sets"}, "activity": [{"detail": {"status": "scheduled", "code": {"text": "Mood"}, "instantiatesCanonical": ["http://example.org/Questionnaire/mood"], "scheduledString": "weekly"}}]}"#,
            #"{"resourceType": "Questionnaire", "id": "mood", "url": "http://example.org/Questionnaire/mood", "status": "active", "item": [{"linkId": "often", "type": "choice", "answerValueSet": "http://example.org/vs/frequency"}, {"linkId": "kind", "type": "choice", "answerValueSet": "http://example.org/vs/filtered"}]}"#,
            #"{"resourceType": "ValueSet", "id": "frequency", "url": "http://example.org/vs/frequency", "status": "active", "compose": {"include": [{"system": "http://loinc.org", "concept": [{"code": "LA6568-5"}, {"code": "LA6569-3"}]}]}}"#,
            #"{"resourceType": "ValueSet", "id": "filtered", "url": "http://example.org/vs/filtered", "status": "active", "compose": {"include": [{"system": "http://snomed.info/sct", "filter": [{"property": "concept", "op": "is-a", "value": "404684003"}]}]}}"#,
        ].map { try FHIRJSONReader().read(Array($0.utf8)).resource }
        let (store, pulled, report) = try await Self.pulledAndImported(resources, patient: "ana-sets", from: server)
        #expect(pulled.requests.contains("GET ValueSet?url=http://example.org/vs/frequency") && pulled.requests.contains("GET ValueSet/$expand?url=http://example.org/vs/filtered"),
                "\(pulled.requests)")
        #expect(pulled.notes.contains { $0.message.contains("no listed ValueSet http://example.org/vs/filtered") }, "\(pulled.notes)")
        #expect(report.notes.contains { $0.kind == .warning && $0.message.contains("item 'kind'") }, "\(report.notes)")
        let kept = try #require(try store.questionnaires(of: "Patient/ana-sets", url: "http://example.org/Questionnaire/mood", version: nil).first)
        let form = try Questionnaire(try FHIRJSONReader().read(kept.resource).resource)
        #expect(form.item(linkId: "often")?.options.map { $0.string("code") } == ["LA6568-5", "LA6569-3"])
        #expect(form.item(linkId: "kind")?.options.isEmpty == true)
        // SMART's default scope for a pull grants the ValueSet reads.
        #expect(SMARTScopes.pull.split(separator: " ").contains("system/ValueSet.rs"))
    }

    @Test("pulled from an EHR, an SDC Task fulfilling a ServiceRequest brings the request it focuses on, and the request's form")
    func fulfilTaskFromTheEHR() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let resources = try [
            #"{"resourceType": "Patient", "id": "kai-fulfil", "name": [{"family": "Ito", "given": ["Kai"]}]}"#,
            #"{"resourceType": "CarePlan", "id": "kai-plan", "status": "active", "intent": "plan", "subject": {"reference": "Patient/kai-fulfil"}, "title": "Mood", "activity": [{"reference": {"reference": "Task/kai-task"}}]}"#,
            #"{"resourceType": "Task", "id": "kai-task", "status": "requested", "intent": "order", "for": {"reference": "Patient/kai-fulfil"}, "code": {"coding": [{"system": "http://hl7.org/fhir/CodeSystem/task-code", "code": "fulfill"}]}, "focus": {"reference": "ServiceRequest/kai-phq"}}"#,
            #"{"resourceType": "ServiceRequest", "id": "kai-phq", "status": "active", "intent": "order", "subject": {"reference": "Patient/kai-fulfil"}, "occurrenceTiming": {"repeat": {"frequency": 1, "period": 2, "periodUnit": "wk", "boundsPeriod": {"start": "2026-11-02"}}}, "extension": [{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-servicerequest-questionnaire", "valueCanonical": "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0"}]}"#,
        ].map { try FHIRJSONReader().read(Array($0.utf8)).resource } + [FHIRDocument.read(contentsOf: Self.forms + "/Questionnaire-phq-9.json").resource]
        let (store, pulled, report) = try await Self.pulledAndImported(resources, patient: "kai-fulfil", from: server)
        #expect(pulled.requests.contains("GET Task/kai-task") && pulled.requests.contains("GET ServiceRequest/kai-phq"), "\(pulled.requests)")
        // (A fortnightly schedule without a weekday is a loss of its own, not the survey's.)
        #expect(!report.notes.contains { $0.kind == .error || $0.message.contains("Questionnaire") }, "\(report.notes)")
        let survey = try #require(try store.fetchTasks().first { $0.id == "ServiceRequest/kai-phq" })
        #expect(survey.version.userInfo?[SurveyTask.questionnaireKey] == Self.phq + "|2.0")
        #expect(try store.questionnaires(of: "Patient/kai-fulfil", url: Self.phq, version: "2.0").count == 1)
    }
}
