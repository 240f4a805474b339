import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import CarePages

/// Survey tasks on the pages: scores over time and the latest answers, read against the form the
/// store keeps for the patient; another patient's form never stands in.
@Suite("Surveys on the report and the dashboard")
struct SurveyPagesTests {
    static let forms = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FHIRSamples/surveys/questionnaires")
    static let url = "https://clinic.example.org/fhir/Questionnaire/phq-9"
    static let phqCodes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]

    static func answers(_ scores: [Int]) -> [OutcomeValue] {
        zip(phqCodes, scores).map { code, score in
            OutcomeValue(.text(#"{"code":"\#(["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"][score])","system":"http://loinc.org"}"#), kind: "/\(code)")
        }
    }

    /// Two patients, each with a PHQ-9 task naming the same url; only `p1`'s form is kept (under
    /// `p1`), and `p2` is kept a different form under the same url and hash.
    static func store() throws -> SQLiteCarePlanStore {
        let store = try SQLiteCarePlanStore(inMemory: ())
        let start = day(16)
        let bytes = Array(try Data(contentsOf: forms.appendingPathComponent("Questionnaire-phq-9.json")))
        let impostor = Array(#"{"resourceType":"Questionnaire","url":"\#(url)","version":"2.0","status":"active","title":"Not yours","item":[{"linkId":"/44250-9","text":"Another patient's question","type":"integer"}]}"#.utf8)
        try store.keep([StoredQuestionnaire(patientID: "p1", url: url, version: "2.0", digest: "h1", title: "PHQ-9", resource: bytes, storedAt: start),
                        StoredQuestionnaire(patientID: "p2", url: url, version: "2.0", digest: "h2", title: "Not yours", resource: impostor, storedAt: start)])
        var entities: [CareEntity] = []
        for (patientID, scores) in [("p1", [[1, 2, 0, 3, 1, 1, 2, 0, 0], [3, 2, 0, 3, 1, 1, 2, 0, 0]]), ("p2", [[1, 1, 1, 1, 1, 1, 1, 1, 1]])] {
            let patient = Patient(id: patientID, name: PersonName(givenName: patientID), effectiveDate: start, timezone: newYork)
            let plan = CarePlan(id: "plan", title: "Mood", patientUUID: patient.uuid, effectiveDate: start, timezone: newYork)
            var task = CareTask(id: "phq", title: "PHQ-9", carePlanUUID: plan.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
            task.effectiveDate = start
            // p2's task names p1's content hash: it must still get only a form kept for p2.
            task.version.userInfo = [SurveyTask.questionnaireKey: url + "|2.0", SurveyTask.hashKey: "h1"]
            entities += [.patient(patient), .carePlan(plan), .task(task)]
            for (occurrence, values) in scores.enumerated() {
                entities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: occurrence * 2, values: Self.answers(values),
                                                 effectiveDate: day(16 + occurrence * 2).addingTimeInterval(10 * 3600), timezone: newYork)))
            }
        }
        try store.add(entities)
        return store
    }

    @Test("the PHQ-9's total over time and the latest answers in words, on the report")
    func report() throws {
        let store = try Self.store()
        let summary = try store.read { try PatientCareSummary(patientID: "p1", range: DateInterval(start: day(16), end: day(23)), calendar: calendar, in: $0) }
        let survey = try #require(summary.surveys.first)
        #expect(summary.measured.isEmpty, "a survey's numbers are charted with the survey")
        #expect(survey.series.map(\.kind) == ["Total score"])
        #expect(survey.series.first?.values.map(\.value) == [10, 12])
        #expect(survey.latest?.answers.first.map { "\($0.question): \($0.answer)" } == "Little interest or pleasure in doing things: LA6571-9")
        // The form's bands (a contained ObservationDefinition coded 44261-6) name the score and shade its chart.
        #expect(survey.latest?.answers.last.map { "\($0.question): \($0.answer)" } == "Total score: 12 (Moderate depression)")
        #expect(survey.series.first?.bands.map(\.label) == ["None to minimal depression", "Mild depression", "Moderate depression",
                                                              "Moderately severe depression", "Severe depression"])
        #expect(survey.series.first?.bands.last?.range == 20...27)
        let html = CarePlanReport(summary).html()
        #expect(html.contains("<h2>Survey: PHQ-9</h2>") && html.contains("Latest answers") && html.contains("Feeling down, depressed, or hopeless"))
        #expect(html.components(separatedBy: #"class="score-band""#).count - 1 == 5)
        #expect(html.contains("<td>10 (Moderate depression)</td>") && html.contains("Severe depression (20–27)"))
    }

    @Test("a form's bands that cannot be read are named as problems and left out; the rest still shade the chart")
    func unreadableBands() throws {
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: Self.forms.appendingPathComponent("Questionnaire-phq-9.json"))) as? [String: Any])
        var contained = try #require(json["contained"] as? [[String: Any]])
        var intervals = try #require(contained[0]["qualifiedInterval"] as? [[String: Any]])
        // Mild's low above its high; Moderate without a name.
        intervals[2]["range"] = ["low": ["value": 9], "high": ["value": 5]]
        intervals[3]["condition"] = nil
        contained[0]["qualifiedInterval"] = intervals
        json["contained"] = contained
        let form = try FHIRJSONReader().read(Array(try JSONSerialization.data(withJSONObject: json))).resource
        let questionnaire = try Questionnaire(form)
        let total = try #require(questionnaire.item(linkId: "/44261-6"))
        let scale = try #require(questionnaire.scoreScale(of: total))
        #expect(scale.bands.map(\.label) == ["None to minimal depression", "Moderately severe depression", "Severe depression"])
        #expect(scale.bounds == 0...27)
        #expect(scale.problems == ["item '/44261-6': the ObservationDefinition's qualifiedInterval[2] has its low (9.0) above its high (5.0); left out",
                                   "item '/44261-6': the ObservationDefinition's qualifiedInterval[3] has no condition or context to name it; left out"], "\(scale.problems)")
        // An item coded otherwise has no scale.
        let question = try #require(questionnaire.item(linkId: "/44250-9"))
        #expect(questionnaire.scoreScale(of: question) == nil)
    }

    @Test("the importing guide's score-band example reads as the bands it says")
    func guideExample() throws {
        let guide = try String(contentsOf: Self.forms.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/importing.md"), encoding: .utf8)
        let block = try #require(guide.components(separatedBy: "**Score bands.**").dropFirst().first?
            .components(separatedBy: "```json\n").dropFirst().first?.components(separatedBy: "\n```").first)
        let text = #"{"resourceType":"Questionnaire","status":"active",\#(block),"item":[{"linkId":"total","type":"integer","code":[{"system":"http://loinc.org","code":"44261-6"}]}]}"#
        let form = try Questionnaire(try FHIRJSONReader().read(Array(text.utf8)).resource)
        let total = try #require(form.item(linkId: "total"))
        let scale = try #require(form.scoreScale(of: total))
        #expect(scale.bands.map(\.label) == ["None to minimal depression", "Mild depression"] && scale.bounds == 0...27 && scale.problems.isEmpty)
    }

    @Test("another patient's survey reads only the forms kept for that patient: the same url and hash find nothing of p1's")
    func otherPatientsForm() throws {
        let store = try Self.store()
        let summary = try store.read { try PatientCareSummary(patientID: "p2", range: DateInterval(start: day(16), end: day(23)), calendar: calendar, in: $0) }
        let survey = try #require(summary.surveys.first)
        let html = CarePlanReport(summary).html()
        #expect(!html.contains("Little interest or pleasure") && !html.contains("Total score"), "p1's form showed on p2's report")
        // Nor do p1's form's score bands (its contained ObservationDefinition) shade p2's charts or name p2's scores.
        #expect(!html.contains("score-band") && !html.contains("depression"), "p1's score bands showed on p2's report")
        // p2's own form (kept under the same url, another hash) is what its answers are read against, and refuses them.
        #expect(survey.problems == ["Nov 16, 2026 09:00: item '/44250-9': a integer item cannot take a text value"], "\(survey.problems)")
        #expect(html.contains("a integer item cannot take a text value"))
    }
}
