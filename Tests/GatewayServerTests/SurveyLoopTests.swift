import CareStore
import FHIR
import FHIRClient
import Foundation
import Gateway
@testable import GatewayServer
import JSON
import Mapping
import Testing

extension GatewayServerSuites {
    /// The survey loop over real HTTP: sekmet-fhir holds Sam's plan and its forms; `caregate serve`
    /// refreshes it, a device pulls the survey tasks, fetches a form, answers in both shapes, and
    /// the EHR ends with one QuestionnaireResponse per survey and its extracted Observations.
    @Suite("The survey loop over HTTP, with sekmet-fhir as the EHR")
    struct SurveyLoopTests {
        static let samples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("FHIRSamples/surveys")
        static let phqCodes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]

        /// The resources the EHR holds with the gateway's identifiers, by identifier value.
        static func held(_ type: String, _ client: FHIRRESTClient) async throws -> [String: Element] {
            var found: [String: Element] = [:]
            for resource in try await client.search(type, [("identifier", "urn:caregate:outcome|"), ("_count", "100")]) {
                for identifier in resource.children(named: "identifier") where identifier.string("system") == "urn:caregate:outcome" {
                    found[identifier.string("value") ?? ""] = resource
                }
            }
            return found
        }

        @Test("ehr.questionnaires: forms the EHR lacks are found in the configured folder; without it they are losses; a folder that does not exist stops the start at its line")
        func formsFolderSetting() async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let client = FHIRRESTClient(base: ehr.base, retry: RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.5, maxTotal: 20), timeout: 20)
            let bundle = try FHIRDocument.read(contentsOf: Self.samples.appendingPathComponent("sam-rivera-surveys-bundle.json").path).resource
            for resource in bundle.children(named: "entry").compactMap({ $0["resource"] }) { _ = try await client.update(resource, at: resource.relativeReference!) }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-forms-setting-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder.appendingPathComponent("forms"), withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            for name in ["phq-9", "gad-7", "weight-height"] {
                try FileManager.default.copyItem(at: Self.samples.appendingPathComponent("questionnaires/Questionnaire-\(name).json"),
                                                 to: folder.appendingPathComponent("forms/\(name).json"))
            }
            func refreshed(_ forms: String?) async throws -> (tasks: [CareTask], notes: [ImportNote]) {
                let path = folder.appendingPathComponent("gateway.yaml").path
                try "store: store.sqlite\nehr:\n  base: \(ehr.base)\n  time-zone: America/New_York\n\(forms.map { "  questionnaires: [\($0)]\n" } ?? "")".write(toFile: path, atomically: true, encoding: .utf8)
                let settings = try #require(try GatewayConfig.load(path: path).ehr)
                let store = try SQLiteCarePlanStore(inMemory: ())
                guard case .imported(let report) = try await settings.link(store: store, root: folder.path).refresh
                    .refresh(EnrolledPatient(storeID: "Patient/sam-rivera", ehrID: "sam-rivera"), since: nil) else { throw CancellationError() }
                return (try store.fetchTasks().filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }, report.notes)
            }
            let configured = try await refreshed("forms")
            #expect(configured.tasks.count == 3 && !configured.notes.contains { $0.kind == .loss }, "\(configured.notes)")
            let without = try await refreshed(nil)
            #expect(without.tasks.isEmpty && without.notes.filter { $0.kind == .loss && $0.message.contains("Questionnaire") }.count == 3, "\(without.notes)")
            do {
                _ = try await refreshed("no-such-forms")
                Issue.record("a questionnaires folder that does not exist was accepted")
            } catch let error as MappingError {
                #expect(error.description.contains("gateway.yaml:5") && error.description.contains("no-such-forms does not exist"), "\(error)")
            }
        }

        @Test("plan and forms from the EHR, survey tasks to the device, its answers in both shapes back as one response each with its score, once", arguments: Backend.allCases)
        func surveyLoop(backend: Backend) async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let client = FHIRRESTClient(base: ehr.base, retry: RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.5, maxTotal: 20), timeout: 20)
            let bundle = try FHIRDocument.read(contentsOf: Self.samples.appendingPathComponent("sam-rivera-surveys-bundle.json").path).resource
            var resources = bundle.children(named: "entry").compactMap { $0["resource"] }
            for name in ["phq-9", "gad-7", "weight-height"] {
                resources.append(try FHIRDocument.read(contentsOf: Self.samples.appendingPathComponent("questionnaires/Questionnaire-\(name).json").path).resource)
            }
            for resource in resources { _ = try await client.update(resource, at: resource.relativeReference!) }

            guard let store = try backend.freshStore() else { return }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-survey-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var settings = GatewayConfig.EHR(base: ehr.base)
            settings.timeZone = TimeZone(identifier: "America/New_York")!
            settings.pushSeconds = 1
            settings.refreshSeconds = 3_600
            settings.connection.retry = RetryPolicy(maxAttempts: 2, baseDelay: 0.05, maxDelay: 0.2, maxTotal: 2)
            let link = try settings.link(store: store, root: folder.path)
            guard case .imported(let seeded) = try await link.refresh.refresh(EnrolledPatient(storeID: "Patient/sam-rivera", ehrID: "sam-rivera"), since: nil) else {
                Issue.record("not imported")
                return
            }
            #expect(seeded.failedPatients.isEmpty && !seeded.notes.contains { $0.kind == .loss || $0.kind == .error }, "\(seeded.notes)")

            let server = try await RunningServer(store: store, ehr: link)
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/sam-rivera").code
            let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
            var device = DeviceCopy()
            try await device.pull(from: server, token: token)
            let surveys = Dictionary(device.tasks.compactMap { task in task.version.userInfo?[SurveyTask.questionnaireKey].map { ($0, task) } }) { $1 }
            #expect(surveys.keys.sorted() == ["https://clinic.example.org/fhir/Questionnaire/gad-7|1.0", "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0",
                                              "https://clinic.example.org/fhir/Questionnaire/weight-height|1.0"])
            let phq = try #require(surveys["https://clinic.example.org/fhir/Questionnaire/phq-9|2.0"])
            let body = try #require(surveys["https://clinic.example.org/fhir/Questionnaire/weight-height|1.0"])

            // The app fetches the form its task names.
            let url = "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0".addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            let form = try await server.send("GET", "/carekit/v1/questionnaires?url=\(url)&hash=\(phq.version.userInfo?[SurveyTask.hashKey] ?? "")", token: token)
            #expect(form.status == 200 && form.body?["item"]?.arrayValue?.count == 10)

            // Answers: the PHQ-9 one value per question, the weight form as a whole response.
            let at = Date()
            let answers = zip(Self.phqCodes, [1, 2, 0, 3, 1, 1, 2, 0, 0]).map { code, score in
                OutcomeValue(.text(#"{"code":"\#(["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"][score])","system":"http://loinc.org"}"#), kind: "/\(code)", createdDate: at)
            }
            let flat = #"{"resourceType": "QuestionnaireResponse", "status": "completed", "item": [{"linkId": "weight", "answer": [{"valueQuantity": {"value": 81.5, "unit": "kg"}}]}, {"linkId": "height", "answer": [{"valueQuantity": {"value": 178, "unit": "cm"}}]}]}"#
            let outcomes = [Outcome(taskUUID: phq.uuid, taskOccurrenceIndex: 0, values: answers, effectiveDate: at),
                            Outcome(taskUUID: body.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.text(flat), kind: SurveyAnswers.responseKind, createdDate: at)], effectiveDate: at)]
            let process = UUID()
            let vector = device.vector.setting(process, to: 1)
            let record = RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: vector.processes)
            let posted = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(vector.json)}"#
            #expect(try await server.send("POST", "/carekit/v1/revisions", token: token, json: posted).body?["merged"]?.numberValue == 2)

            #expect(try await eventually { try store.outboxCounts().pushed == 2 }, "\(String(describing: try? store.outboxCounts()))")
            let responses = try await Self.held("QuestionnaireResponse", client)
            #expect(responses.count == 2)
            #expect(responses.values.map { $0.string("questionnaire") ?? "" }.sorted() == ["https://clinic.example.org/fhir/Questionnaire/phq-9|2.0",
                                                                                         "https://clinic.example.org/fhir/Questionnaire/weight-height|1.0"])
            let observations = try await Self.held("Observation", client)
            #expect(observations.values.compactMap { $0.first("code.coding.code")?.value }.sorted() == ["29463-7", "39156-5", "44261-6", "8302-2"])
            #expect(observations.values.first { $0.first("code.coding.code")?.value == "44261-6" }?.first("value")?.value == "10")

            // The same post again merges nothing, and the EHR still holds one of each.
            #expect(try await server.send("POST", "/carekit/v1/revisions", token: token, json: posted).body?["merged"]?.numberValue == 0)
            try await Task.sleep(nanoseconds: 1_500_000_000)
            #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 2, failed: 0))
            let (heldResponses, heldObservations) = (try await Self.held("QuestionnaireResponse", client), try await Self.held("Observation", client))
            #expect(heldResponses.count == 2 && heldObservations.count == 4)
            try await server.stop()
        }
    }
}
