import CareStore
import FHIR
import Foundation
import Mapping
import Testing

@Suite("Survey scores (SDC calculatedExpression)")
struct SurveyScoreTests {
    static func option(_ code: String, _ display: String, _ weight: Int) -> String {
        #"{"valueCoding": {"extension": [{"url": "http://hl7.org/fhir/StructureDefinition/ordinalValue", "valueDecimal": \#(weight)}], "system": "http://loinc.org", "code": "\#(code)", "display": "\#(display)"}}"#
    }

    /// Three PHQ-9 questions (the form's weights on its options), the total as the SDC forms
    /// compute it, a BMI from two quantities through variables, and a CQL expression.
    static let form: Questionnaire = {
        let options = "[" + [option("LA6568-5", "Not at all", 0), option("LA6569-3", "Several days", 1),
                             option("LA6570-1", "More than half the days", 2), option("LA6571-9", "Nearly every day", 3)].joined(separator: ",") + "]"
        let question = { (linkId: String) in #"{"linkId": "\#(linkId)", "type": "choice", "answerOption": \#(options)}"# }
        let calculated = { (expression: String, language: String) in
            #"[{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression", "valueExpression": {"language": "\#(language)", "expression": "\#(expression)"}}]"#
        }
        let text = #"""
        {"resourceType": "Questionnaire", "url": "https://clinic.example.org/Questionnaire/phq-bmi", "status": "active",
         "extension": [
           {"url": "http://hl7.org/fhir/StructureDefinition/variable", "valueExpression": {"name": "weight", "language": "text/fhirpath",
            "expression": "%resource.repeat(item).where(linkId = 'weight').answer.value.value"}},
           {"url": "http://hl7.org/fhir/StructureDefinition/variable", "valueExpression": {"name": "height", "language": "text/fhirpath",
            "expression": "%resource.repeat(item).where(linkId = 'height').answer.value.value / 100"}}],
         "item": [\#(question("/44250-9")), \#(question("/44255-8")), \#(question("/44259-0")),
          {"linkId": "/44261-6", "text": "Total score", "type": "integer", "readOnly": true,
           "extension": \#(calculated("%resource.item.where(linkId != '/44261-6').answer.value.ordinal().sum()", "text/fhirpath"))},
          {"linkId": "body", "type": "group", "item": [
            {"linkId": "weight", "type": "quantity"}, {"linkId": "height", "type": "quantity"},
            {"linkId": "bmi", "type": "decimal", "readOnly": true, "extension": \#(calculated("(%weight / (%height * %height)).round(1)", "text/fhirpath"))}]},
          {"linkId": "risk", "type": "string", "extension": \#(calculated("\\\"PHQ9\\\".TotalScore > 9", "text/cql"))}]}
        """#
        return try! Questionnaire(FHIRJSONReader().read(text).resource)
    }()

    static func coded(_ code: String, _ linkId: String) -> OutcomeValue {
        OutcomeValue(.text(#"{"code":"\#(code)","system":"http://loinc.org"}"#), kind: linkId)
    }

    @Test("a total from the options' weights, a BMI through variables, and a CQL expression left out with a note")
    func scores() throws {
        let zone = TimeZone(identifier: "UTC")!
        let answers = try SurveyAnswers(values: [
            Self.coded("LA6571-9", "/44250-9"), Self.coded("LA6570-1", "/44255-8"), Self.coded("LA6569-3", "/44259-0"),
            OutcomeValue(.double(78.4), kind: "weight", units: "kg"), OutcomeValue(.integer(170), kind: "height", units: "cm"),
        ], form: Self.form, timeZone: zone)
        let (scored, notes) = try SurveyScores(form: Self.form).apply(to: answers)
        #expect(scored.answers["/44261-6"]?.first?.value == "6")
        #expect(scored.answers["bmi"]?.first?.value == "27.1")
        #expect(notes == [#"item 'risk': text/cql expressions are not supported; '"PHQ9".TotalScore > 9' is left out"#])
        let response = try QuestionnaireResponseBuilder(form: Self.form).response(scored, status: "completed")
        #expect(response.children(named: "item").map { $0.string("linkId") } == ["/44250-9", "/44255-8", "/44259-0", "/44261-6", "body"])
    }

    @Test("a height of zero gives no BMI (FHIRPath's division by zero is empty); an expression that does not parse names its item")
    func failures() throws {
        let zone = TimeZone(identifier: "UTC")!
        let zero = try SurveyAnswers(values: [OutcomeValue(.double(78.4), kind: "weight", units: "kg"), OutcomeValue(.integer(0), kind: "height", units: "cm")],
                                     form: Self.form, timeZone: zone)
        let (scored, _) = try SurveyScores(form: Self.form).apply(to: zero)
        #expect(scored.answers["bmi"] == nil)
        #expect(scored.answers["/44261-6"] == nil, "no answers, no total")
        var broken = Self.form
        var element = broken.resource
        element.children = element.children.map { child in
            guard child.name == "item", child.string("linkId") == "/44261-6" else { return child }
            var item = child
            item.children = item.children.map { ext in
                guard ext.name == "extension" else { return ext }
                var changed = ext
                changed.children = changed.children.map { value in
                    guard value.name == "value" else { return value }
                    var expression = value
                    expression.setValue("answer.value.ordinal(.sum()", for: "expression")
                    return expression
                }
                return changed
            }
            return item
        }
        broken = try Questionnaire(element)
        #expect(throws: SurveyError.self) { try SurveyScores(form: broken).apply(to: SurveyAnswers()) }
        do { _ = try SurveyScores(form: broken).apply(to: SurveyAnswers()) } catch {
            #expect(error.description.hasPrefix("item '/44261-6': calculatedExpression 'answer.value.ordinal(.sum()': "), "\(error)")
        }
    }
}
