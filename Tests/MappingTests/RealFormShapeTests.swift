import CareStore
import FHIR
import Foundation
import Mapping
import Testing

/// Forms shaped as real form tools write them (NLM's PHQ-9 with its variables on the total's own
/// item, an AHRQ Common Formats event form with an optional header group, a form naming an item
/// it lacks), from `Tests/GatewayTests/Fixtures/real-forms-bundle.json`.
@Suite("Forms shaped like real ones")
struct RealFormShapeTests {
    static let bundle: Element = {
        let path = SharedData.projectRoot.appendingPathComponent("Tests/GatewayTests/Fixtures/real-forms-bundle.json").path
        // Read leniently, as an import reads what an EHR serves: NLM's variable names hold '_',
        // which R4's `id` type of Expression.name does not allow.
        let data = try! Data(contentsOf: URL(fileURLWithPath: path))
        return try! FHIRJSONReader(options: ParseOptions(lenient: true)).read([UInt8](data)).resource
    }()

    static func resource(_ id: String) -> Element {
        bundle.children(named: "entry").compactMap { $0["resource"] }.first { $0.string("id") == id }!
    }

    static let zone = TimeZone(identifier: "America/New_York")!
    static let phqAnswers = ["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"]

    static func coded(_ code: String, _ linkId: String, system: String = "http://loinc.org") -> OutcomeValue {
        OutcomeValue(.text(#"{"code":"\#(code)","system":"\#(system)"}"#), kind: linkId)
    }

    static func phq(_ scores: [Int]) -> [OutcomeValue] {
        let codes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]
        return zip(codes, scores).map { coded(phqAnswers[$1], "/\($0)") }
    }

    @Test("NLM's PHQ-9: the nine weights and 'any question answered' are variables on the total's own item; the total is their sum, none without answers")
    func itemVariables() throws {
        let form = try Questionnaire(Self.resource("nlm-phq-9"))
        let scores = SurveyScores(form: form)
        let all = try scores.apply(to: SurveyAnswers(values: Self.phq([1, 2, 0, 3, 1, 1, 2, 0, 0]), form: form, timeZone: Self.zone))
        #expect(all.notes.isEmpty, "\(all.notes)")
        #expect(all.answers.answers["/44261-6"]?.first?.value == "10")
        // Three answered: the others count as 0 (the form's iif), the variable sees the earlier ones.
        let some = try scores.apply(to: SurveyAnswers(values: Self.phq([3, 3, 2]), form: form, timeZone: Self.zone))
        #expect(some.answers.answers["/44261-6"]?.first?.value == "8")
        let none = try scores.apply(to: SurveyAnswers())
        #expect(none.answers.answers["/44261-6"] == nil, "no question answered, no total")
        // A completed response carries the total and the answers, in the form's order.
        let response = try QuestionnaireResponseBuilder(form: form, requiresAnswers: true).response(all.answers, status: "completed")
        #expect(response.children(named: "item").map { $0.string("linkId") ?? "" }.last == "/44261-6")
    }

    /// A form whose variables sit at three levels: the root's `w`, a group's `w` shadowing it and
    /// `twice` built on it, a sibling item's `mine`.
    static let scoped: Questionnaire = {
        func variable(_ name: String, _ expression: String) -> String {
            #"{"url": "http://hl7.org/fhir/StructureDefinition/variable", "valueExpression": {"name": "\#(name)", "language": "text/fhirpath", "expression": "\#(expression)"}}"#
        }
        func calculated(_ expression: String) -> String {
            #"{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression", "valueExpression": {"language": "text/fhirpath", "expression": "\#(expression)"}}"#
        }
        let text = #"""
        {"resourceType": "Questionnaire", "status": "active", "extension": [\#(variable("w", "1"))],
         "item": [
           {"linkId": "outer", "type": "integer", "extension": [\#(calculated("%w"))]},
           {"linkId": "g", "type": "group", "extension": [\#(variable("w", "10")), \#(variable("twice", "%w * 2"))], "item": [
             {"linkId": "inner", "type": "integer", "extension": [\#(calculated("%twice + %w"))]},
             {"linkId": "own", "type": "integer", "extension": [\#(variable("w", "100")), \#(calculated("%w"))]}]},
           {"linkId": "sibling", "type": "integer", "extension": [\#(variable("mine", "5"))]},
           {"linkId": "stranger", "type": "integer", "extension": [\#(calculated("%mine"))]}]}
        """#
        return try! Questionnaire(FHIRJSONReader().read(text).resource)
    }()

    @Test("a variable is seen by its item and what is under it, the nearest of a name wins, later ones use earlier ones; a sibling's is not in scope")
    func variableScope() throws {
        var form = Self.scoped
        // Without the stranger, which names a variable that is not in its scope.
        form = try Questionnaire({ var r = form.resource; r.children.removeAll { $0.name == "item" && $0.string("linkId") == "stranger" }; return r }())
        let scored = try SurveyScores(form: form).apply(to: SurveyAnswers()).answers.answers
        #expect(scored["outer"]?.first?.value == "1")
        #expect(scored["inner"]?.first?.value == "30", "the group's w (10) shadows the root's, and twice is built on it")
        #expect(scored["own"]?.first?.value == "100")
        #expect(throws: SurveyError.self) { try SurveyScores(form: Self.scoped).apply(to: SurveyAnswers()) }
        do { _ = try SurveyScores(form: Self.scoped).apply(to: SurveyAnswers()) } catch {
            #expect(error.description.contains("item 'stranger'") && error.description.contains("unknown variable %mine"), "\(error)")
        }
    }

    static let ahrq = "https://clinic.example.org/fhir/CodeSystem/ahrq-hospital-event"

    @Test("the AHRQ form: an optional, unanswered header group asks nothing of its required (hidden) items; once anything in a group is answered, its required items are")
    func requiredUnderOptionalGroup() throws {
        let form = try Questionnaire(Self.resource("ahrq-medication-event"))
        let builder = QuestionnaireResponseBuilder(form: form, requiresAnswers: true)
        let event = [Self.coded("near-miss", "event.type", system: Self.ahrq), OutcomeValue(.text("2026-11-03"), kind: "event.date")]
        let response = try builder.response(SurveyAnswers(values: event, form: form, timeZone: Self.zone), status: "completed")
        #expect(response.children(named: "item").map { $0.string("linkId") } == ["event"])
        // The medication group once one of its items is answered: its required name is asked for.
        let partly = event + [Self.coded("dispensing", "medication.stage", system: Self.ahrq)]
        #expect(throws: SurveyError.answer(linkId: "medication.name", "required, and not answered")) {
            try builder.response(SurveyAnswers(values: partly, form: form, timeZone: Self.zone), status: "completed")
        }
        // The header answered in part: its hidden, required form version is now asked for too.
        let header = event + [Self.coded("patient", "header.reporter", system: Self.ahrq)]
        #expect(throws: SurveyError.answer(linkId: "header.formVersion", "required, and not answered")) {
            try builder.response(SurveyAnswers(values: header, form: form, timeZone: Self.zone), status: "completed")
        }
        // The required event group still is: without it the response is refused.
        #expect(throws: SurveyError.answer(linkId: "event.type", "required, and not answered")) {
            try builder.response(SurveyAnswers(), status: "completed")
        }
        // A required item under an enabled condition (an incident's harm) is asked for.
        let incident = [Self.coded("incident", "event.type", system: Self.ahrq), OutcomeValue(.text("2026-11-03"), kind: "event.date")]
        #expect(throws: SurveyError.answer(linkId: "event.harm", "required, and not answered")) {
            try builder.response(SurveyAnswers(values: incident, form: form, timeZone: Self.zone), status: "completed")
        }
    }

    @Test("a required follow-up of an unanswered optional question is not asked for; of an answered one it is")
    func requiredFollowUp() throws {
        let text = #"""
        {"resourceType": "Questionnaire", "status": "active", "item": [
          {"linkId": "smoke", "type": "boolean", "item": [{"linkId": "perDay", "type": "integer", "required": true}]},
          {"linkId": "note", "type": "string"}]}
        """#
        let form = try Questionnaire(FHIRJSONReader().read(text).resource)
        let builder = QuestionnaireResponseBuilder(form: form, requiresAnswers: true)
        let note = try builder.response(SurveyAnswers(values: [OutcomeValue(.text("fine"), kind: "note")], form: form, timeZone: Self.zone), status: "completed")
        #expect(note.children(named: "item").count == 1)
        #expect(throws: SurveyError.answer(linkId: "perDay", "required, and not answered")) {
            try builder.response(SurveyAnswers(values: [OutcomeValue(.boolean(true), kind: "smoke")], form: form, timeZone: Self.zone), status: "completed")
        }
    }

    @Test("a form whose enableWhen names an item it lacks is refused when read, naming the item and the missing linkId as the form's defect")
    func danglingEnableWhen() throws {
        #expect(throws: SurveyError.form(linkId: "a3", "its enableWhen names 'a2', which is not an item of this form (a defect of the form, not of any answer)")) {
            try Questionnaire(Self.resource("pain-follow-up"))
        }
    }
}
