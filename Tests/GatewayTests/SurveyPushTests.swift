import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping
import Testing
@testable import Gateway

/// Survey outcomes pushed to a real FHIR server: one QuestionnaireResponse per outcome with its
/// extracted Observations, in one transaction, exactly once; refused answers wait as dead letters.
@Suite("Survey push to a real FHIR server", .serialized)
struct SurveyPushTests {
    static let phqCodes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]
    static let answerCodes = ["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"]

    static func phqValues(_ scores: [Int]) -> [OutcomeValue] {
        zip(phqCodes, scores).map { code, score in
            OutcomeValue(.text(#"{"code":"\#(answerCodes[score])","system":"http://loinc.org"}"#), kind: "/\(code)", createdDate: local("2026-11-02 09:30"))
        }
    }

    /// The resources the server holds with the gateway's identifiers, by identifier value.
    static func held(_ type: String, _ base: String) async throws -> [String: Element] {
        let found = try await FHIRRESTClient(base: base, retry: quickRetry).search(type, [("identifier", "urn:caregate:outcome|"), ("_count", "100")])
        var byIdentifier: [String: Element] = [:]
        for resource in found {
            for identifier in resource.children(named: "identifier") where identifier.string("system") == "urn:caregate:outcome" {
                #expect(byIdentifier[identifier.string("value") ?? ""] == nil, "two \(type)s with one identifier")
                byIdentifier[identifier.string("value") ?? ""] = resource
            }
        }
        return byIdentifier
    }

    @Test("answers in both shapes go as one QuestionnaireResponse each, with the PHQ-9 total and the measurements as Observations; again sends nothing; an edit amends; a refused survey waits",
          arguments: Backend.allCases)
    func surveysOnce(backend: Backend) async throws {
        guard let server = await LocalFHIRServer() else { return }
        guard let store = try backend.freshStore() else { return }
        _ = try SurveyImportTests.surveyImporter(store).run([SurveyImportTests.bundle])
        let tasks = Dictionary(uniqueKeysWithValues: try store.fetchTasks().map { ($0.id, $0) })
        let phq = try #require(tasks["CarePlan/sam-rivera-wellbeing/44249-1"])
        let body = try #require(tasks["CarePlan/sam-rivera-wellbeing/29463-7"])
        let gad = try #require(tasks["ServiceRequest/sam-rivera-gad-7"])
        let flat = #"{"resourceType": "QuestionnaireResponse", "status": "completed", "item": [{"linkId": "weight", "answer": [{"valueQuantity": {"value": 81.5, "unit": "kg"}}]}, {"linkId": "height", "answer": [{"valueQuantity": {"value": 178, "unit": "cm"}}]}]}"#
        let at = local("2026-11-02 09:30")
        let added = try store.add([
            .outcome(Outcome(taskUUID: phq.uuid, taskOccurrenceIndex: 0, values: Self.phqValues([1, 2, 0, 3, 1, 1, 2, 0, 0]), effectiveDate: at, timezone: newYork)),
            .outcome(Outcome(taskUUID: body.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.text(flat), kind: SurveyAnswers.responseKind, createdDate: at)],
                             effectiveDate: at, timezone: newYork)),
            // The GAD-7 with its last question unanswered: refused before anything is sent.
            .outcome(Outcome(taskUUID: gad.uuid, taskOccurrenceIndex: 0, values: Array(Self.phqValues([1, 1, 1, 1, 1, 1]).enumerated().map { i, v in
                var value = v
                value.kind = ["/69725-0", "/68509-9", "/69733-4", "/69734-2", "/69735-9", "/69689-8"][i]
                return value
            }), effectiveDate: at, timezone: newYork)),
        ])
        let first = try await pusher(store, server.base).run()
        #expect(first.pushed.count == 2 && first.failed.count == 1, "\(first.pushed) \(first.failed)")
        #expect(first.failed.first?.error.contains("item '/69736-7': required, and not answered") == true, "\(first.failed)")
        let dead = try store.outbox(state: .failed)
        #expect(dead.count == 1 && dead.first?.lastError?.contains("/69736-7") == true)

        let responses = try await Self.held("QuestionnaireResponse", server.base)
        #expect(responses.count == 2)
        guard case .outcome(let phqOutcome) = try #require(added.first) else { Issue.record("the first added is the PHQ-9's outcome"); return }
        let phqIdentifier = Outcome.scopedID(patientID: "Patient/sam-rivera", outcomeID: phqOutcome.id)
        let phqResponse = try #require(responses[phqIdentifier])
        #expect(phqResponse.string("status") == "completed" && phqResponse.string("questionnaire") == "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0")
        #expect(phqResponse.children(named: "item").last?.first("answer.value")?.value == "10")
        let observations = try await Self.held("Observation", server.base)
        #expect(observations.count == 4, "\(observations.keys.sorted())")
        let total = try #require(observations[phqIdentifier + "//44261-6"])
        #expect(total.first("value")?.value == "10")
        // derivedFrom names the response as the server stored it.
        let derived = try #require(total.first("derivedFrom.reference")?.value)
        #expect(derived.hasPrefix("QuestionnaireResponse/") && derived.contains(phqResponse.string("id") ?? "?"), "\(derived)")
        #expect(observations.values.contains { $0.first("code.coding.code")?.value == "39156-5" && $0.first("value")?.string("value") == "25.7" })

        let again = try await pusher(store, server.base).run()
        #expect(again.newlyQueued == 0 && again.pushed.isEmpty)
        #expect(try await Self.held("QuestionnaireResponse", server.base).count == 2)

        // The patient changes an answer: the same response, amended, and its total with it.
        var edited = phqOutcome
        edited.values = Self.phqValues([3, 2, 0, 3, 1, 1, 2, 0, 0])
        try store.update([.outcome(edited)])
        let amended = try await pusher(store, server.base).run()
        #expect(amended.pushed.count == 1)
        let after = try await Self.held("QuestionnaireResponse", server.base)
        #expect(after.count == 2 && after[phqIdentifier]?.string("status") == "amended")
        let totalAfter = try await Self.held("Observation", server.base)[phqIdentifier + "//44261-6"]
        #expect(totalAfter?.first("value")?.value == "12" && totalAfter?.string("status") == "amended")
    }
}

/// The export of a survey outcome reads only its own patient's forms.
@Suite("Survey export stays within its patient")
struct SurveyExportBoundaryTests {
    @Test("another patient's survey task naming the first patient's form by url and hash is refused, never answered with that form", arguments: Backend.allCases)
    func otherPatientsForm(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        _ = try SurveyImportTests.surveyImporter(store).run([SurveyImportTests.bundle])
        let phq = try #require(try store.fetchTasks().first { $0.id.hasSuffix("44249-1") })
        // Another patient, with a task the gateway wrote naming Sam's form, url and content.
        let start = local("2026-11-02")
        let other = Patient(id: "Patient/other", name: PersonName(givenName: "Other"), effectiveDate: start, timezone: newYork)
        let plan = CarePlan(id: "plan", title: "Mood", patientUUID: other.uuid, effectiveDate: start, timezone: newYork)
        var task = CareTask(id: "phq", title: "PHQ-9", carePlanUUID: plan.uuid, schedule: phq.schedule, timezone: newYork)
        task.effectiveDate = start
        task.version.userInfo = phq.version.userInfo
        task.version.source = VersionInfo.importedFromEHR
        try store.add([.patient(other), .carePlan(plan), .task(task)])
        try store.add([.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: SurveyPushTests.phqValues([1, 1, 1, 1, 1, 1, 1, 1, 1]),
                                        effectiveDate: local("2026-11-02 09:30"), timezone: newYork))])
        let exported = try OutcomeExport(store: store, builder: try builder()).observations()
        let theirs = try #require(exported.first)
        #expect(exported.count == 1)
        #expect(theirs.refusal?.contains("the store keeps no Questionnaire https://clinic.example.org/fhir/Questionnaire/phq-9|2.0 for Patient/other") == true,
                "\(theirs.refusal ?? "no refusal")")
        #expect(OutcomeExport(store: store, builder: try builder()).bundleEntries(theirs).isEmpty)
    }
}

/// Forms shaped as real form tools write them, from import to the EHR: NLM's PHQ-9 (its total's
/// variables on the total's own item) and an AHRQ event form (an optional header group with a
/// required, hidden item), beside a form naming an item it lacks.
@Suite("Real forms' shapes pushed to a real FHIR server", .serialized)
struct RealFormPushTests {
    static let bundle = projectRoot.appendingPathComponent("Tests/GatewayTests/Fixtures/real-forms-bundle.json").path
    static let ahrq = "https://clinic.example.org/fhir/CodeSystem/ahrq-hospital-event"

    @Test("the PHQ-9's total and the AHRQ form's answers reach the server exactly once; the form naming an item it lacks is refused at import, naming the form and the linkId",
          arguments: Backend.allCases)
    func realForms(backend: Backend) async throws {
        guard let server = await LocalFHIRServer() else { return }
        guard let store = try backend.freshStore() else { return }
        let report = try importer(store).run([Self.bundle])
        let defect = report.notes.filter { $0.kind == .error }
        #expect(defect.count == 1 && defect[0].message.contains("https://clinic.example.org/fhir/Questionnaire/pain-follow-up|1")
                && defect[0].message.contains("item 'a3': its enableWhen names 'a2', which is not an item of this form (a defect of the form"),
                "\(report.notes.map(\.message))")
        let tasks = try store.fetchTasks()
        #expect(tasks.count == 2, "the defective form's activity is left out: \(tasks.map(\.id))")
        let phq = try #require(tasks.first { $0.version.userInfo?[SurveyTask.questionnaireKey]?.contains("nlm-phq-9") == true })
        let ahrq = try #require(tasks.first { $0.version.userInfo?[SurveyTask.questionnaireKey]?.contains("ahrq") == true })
        let at = local("2026-11-02 09:30")
        let coded = { (system: String, code: String, linkId: String) in
            OutcomeValue(.text(#"{"code":"\#(code)","system":"\#(system)"}"#), kind: linkId, createdDate: at)
        }
        try store.add([
            .outcome(Outcome(taskUUID: phq.uuid, taskOccurrenceIndex: 0, values: SurveyPushTests.phqValues([1, 2, 0, 3, 1, 1, 2, 0, 0]), effectiveDate: at, timezone: newYork)),
            // The header group (and its hidden, required form version) left unanswered, as an app leaves it.
            .outcome(Outcome(taskUUID: ahrq.uuid, taskOccurrenceIndex: 0, values: [
                coded(Self.ahrq, "near-miss", "event.type"), OutcomeValue(.text("2026-11-01"), kind: "event.date", createdDate: at),
            ], effectiveDate: at, timezone: newYork)),
        ])
        let first = try await pusher(store, server.base).run()
        #expect(first.pushed.count == 2 && first.failed.isEmpty, "\(first.pushed) \(first.failed)")
        let responses = try await SurveyPushTests.held("QuestionnaireResponse", server.base)
        #expect(responses.count == 2)
        let observations = try await SurveyPushTests.held("Observation", server.base)
        let total = try #require(observations.values.first { $0.first("code.coding.code")?.value == "44261-6" }, "\(observations.keys)")
        #expect(total.first("value")?.string("value") == "10" && total.first("value")?.string("code") == "{score}", "\(total)")
        #expect(observations.values.contains { $0.first("value")?.first("coding")?.string("code") == "near-miss" }, "\(observations.keys)")
        #expect(observations.count == 2)
        let again = try await pusher(store, server.base).run()
        #expect(again.newlyQueued == 0 && again.pushed.isEmpty)
        #expect(try await SurveyPushTests.held("QuestionnaireResponse", server.base).count == 2)
        #expect(try await SurveyPushTests.held("Observation", server.base).count == 2)
    }
}
