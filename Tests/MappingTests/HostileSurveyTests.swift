import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// Forms and answers built to hurt: a 700-item form nested 7 deep, enableWhen cycles, a score
/// that never ends. Each is answered or refused with an error naming the linkId.
@Suite("Hostile forms and answers")
struct HostileSurveyTests {
    static func form(_ json: String) throws -> Questionnaire { try Questionnaire(FHIRJSONReader().read(json).resource) }

    /// 100 chains of six nested groups around a question: 700 items, 7 deep, every one required
    /// (a required item under an optional group with nothing answered would ask for nothing).
    static func deepForm() throws -> Questionnaire {
        func chain(_ n: Int, level: Int) -> String {
            if level == 7 { return #"{"linkId": "q\#(n)", "text": "Question \#(n)", "type": "integer", "required": true}"# }
            return #"{"linkId": "g\#(n).\#(level)", "type": "group", "required": true, "item": [\#(chain(n, level: level + 1))]}"#
        }
        return try form(#"{"resourceType": "Questionnaire", "status": "active", "item": [\#((0..<100).map { chain($0, level: 1) }.joined(separator: ","))]}"#)
    }

    @Test("a 700-item form nested 7 deep is answered and built as it nests; one answer missing names its question")
    func sevenHundredItems() throws {
        let form = try Self.deepForm()
        let values = (0..<100).map { OutcomeValue(.integer($0), kind: "q\($0)") }
        let builder = QuestionnaireResponseBuilder(form: form, requiresAnswers: true)
        let items = try builder.items(SurveyAnswers(values: values, form: form, timeZone: newYork))
        #expect(items.count == 100)
        var deepest = items[57]
        for _ in 0..<6 { deepest = try #require(deepest.children(named: "item").first) }
        #expect(deepest.string("linkId") == "q57" && deepest.first("answer.value")?.value == "57")
        #expect(throws: SurveyError.answer(linkId: "q99", "required, and not answered")) {
            try builder.items(SurveyAnswers(values: Array(values.dropLast()), form: form, timeZone: newYork))
        }
    }

    @Test("enableWhen in a cycle ends: each item is on when the other is answered, an answer to one that is off is refused naming it")
    func enableWhenCycle() throws {
        let form = try Self.form(#"""
            {"resourceType": "Questionnaire", "status": "active", "item": [
              {"linkId": "a", "type": "boolean", "enableWhen": [{"question": "b", "operator": "exists", "answerBoolean": true}]},
              {"linkId": "b", "type": "boolean", "enableWhen": [{"question": "a", "operator": "exists", "answerBoolean": true}]}]}
            """#)
        let builder = QuestionnaireResponseBuilder(form: form, requiresAnswers: true)
        let both = try builder.items(SurveyAnswers(values: [OutcomeValue(.boolean(true), kind: "a"), OutcomeValue(.boolean(false), kind: "b")], form: form, timeZone: newYork))
        #expect(both.map { $0.string("linkId") } == ["a", "b"])
        #expect(throws: SurveyError.answer(linkId: "a", "answered, but enableWhen turns off 'a' for these answers")) {
            try builder.items(SurveyAnswers(values: [OutcomeValue(.boolean(true), kind: "a")], form: form, timeZone: newYork))
        }
    }

    @Test("a score that never ends is stopped and names its item; one that divides by zero gives no value")
    func endlessScore() throws {
        let calculated = { (linkId: String, expression: String) in
            #"{"linkId": "\#(linkId)", "type": "integer", "readOnly": true, "extension": [{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression", "valueExpression": {"language": "text/fhirpath", "expression": "\#(expression)"}}]}"#
        }
        let endless = try Self.form(#"{"resourceType": "Questionnaire", "status": "active", "item": [{"linkId": "n", "type": "integer"}, \#(calculated("forever", "1.repeat($this + 1).count()"))]}"#)
        let answers = try SurveyAnswers(values: [OutcomeValue(.integer(3), kind: "n")], form: endless, timeZone: newYork)
        do {
            _ = try SurveyScores(form: endless).apply(to: answers)
            Issue.record("the endless score was not stopped")
        } catch {
            #expect(error.description.hasPrefix("item 'forever': calculatedExpression '1.repeat($this + 1).count()': "), "\(error)")
            #expect(error.description.contains("10,000 rounds"), "\(error)")
        }
        let zero = try Self.form(#"{"resourceType": "Questionnaire", "status": "active", "item": [{"linkId": "n", "type": "integer"}, \#(calculated("ratio", "(10 / (%resource.item.where(linkId = 'n').answer.value - 3)).round()"))]}"#)
        let scored = try SurveyScores(form: zero).apply(to: try SurveyAnswers(values: [OutcomeValue(.integer(3), kind: "n")], form: zero, timeZone: newYork))
        #expect(scored.answers.answers["ratio"] == nil)
    }
}
