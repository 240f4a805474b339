import CareStore
import FHIR
import Foundation
import Mapping
import Testing

@Suite("Survey answers into QuestionnaireResponses")
struct SurveyAnswerTests {
    /// A form with what a response must mirror: a group, a repeating group, a question with a
    /// follow-up, enableWhen (`=`, `exists`, `any`), a quantity with its unit, options with weights.
    static let form = try! Questionnaire(FHIRJSONReader().read(#"""
    {"resourceType": "Questionnaire", "url": "https://clinic.example.org/Questionnaire/check-in", "version": "2",
     "status": "active", "title": "Weekly check-in",
     "item": [
      {"linkId": "mood", "text": "How is your mood?", "type": "choice", "required": true,
       "answerOption": [
        {"valueCoding": {"extension": [{"url": "http://hl7.org/fhir/StructureDefinition/ordinalValue", "valueDecimal": 0}],
                         "system": "http://loinc.org", "code": "LA6568-5", "display": "Not at all"}},
        {"valueCoding": {"extension": [{"url": "http://hl7.org/fhir/StructureDefinition/ordinalValue", "valueDecimal": 3}],
                         "system": "http://loinc.org", "code": "LA6571-9", "display": "Nearly every day"}}]},
      {"linkId": "body", "text": "Body", "type": "group", "item": [
        {"linkId": "weight", "text": "Weight", "type": "quantity",
         "extension": [{"url": "http://hl7.org/fhir/StructureDefinition/questionnaire-unit",
                        "valueCoding": {"system": "http://unitsofmeasure.org", "code": "kg", "display": "kg"}}]},
        {"linkId": "pain", "text": "Any pain?", "type": "boolean", "item": [
          {"linkId": "pain-where", "text": "Where?", "type": "string", "maxLength": 20,
           "enableWhen": [{"question": "pain", "operator": "=", "answerBoolean": true}]}]}]},
      {"linkId": "dose", "text": "Each dose missed", "type": "group", "repeats": true, "item": [
        {"linkId": "dose-date", "text": "When", "type": "date"},
        {"linkId": "dose-why", "text": "Why", "type": "string"}]},
      {"linkId": "follow-up", "text": "Anything else?", "type": "text",
       "enableWhen": [{"question": "weight", "operator": "exists", "answerBoolean": true},
                      {"question": "mood", "operator": "=", "answerCoding": {"system": "http://loinc.org", "code": "LA6571-9"}}],
       "enableBehavior": "any"}]}
    """#).resource)

    static let zone = TimeZone(identifier: "America/New_York")!

    static func date(_ text: String) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let parts = text.split(separator: "-").map { Int($0)! }
        return calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2]))!
    }

    /// What an app records for the form: one value per answer, kinds naming the places.
    static let values: [OutcomeValue] = [
        OutcomeValue(.text(#"{"code":"LA6571-9","system":"http://loinc.org","display":"Nearly every day"}"#), kind: "mood"),
        OutcomeValue(.double(78.4), kind: "weight", units: "kg"),
        OutcomeValue(.boolean(true), kind: "pain"),
        OutcomeValue(.text("left knee"), kind: "pain-where"),
        OutcomeValue(.date(date("2026-11-23")), kind: "dose[1]/dose-date"),
        OutcomeValue(.text("forgot"), kind: "dose[1]/dose-why"),
        OutcomeValue(.date(date("2026-11-26")), kind: "dose[2]/dose-date"),
        OutcomeValue(.text("Still tired"), kind: "follow-up"),
    ]

    @Test("answers become a response nested as the form nests them, its text copied, the options' weights kept, and go back to the same values")
    func nestedResponse() throws {
        let answers = try SurveyAnswers(values: Self.values, form: Self.form, timeZone: Self.zone)
        let response = try QuestionnaireResponseBuilder(form: Self.form).response(
            answers, status: "completed", subject: "Patient/maria-lopez", authored: "2026-11-28T09:00:00-05:00", basedOn: ["CarePlan/maria-lopez-home-care"])
        let json = FHIRJSONWriter(pretty: false).string(response)
        #expect(response.string("questionnaire") == "https://clinic.example.org/Questionnaire/check-in|2")
        #expect(response.first("basedOn.reference")?.value == "CarePlan/maria-lopez-home-care")
        #expect(response.children(named: "item").map { $0.string("linkId") } == ["mood", "body", "dose", "dose", "follow-up"])
        #expect(json.contains(#""valueCoding":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/ordinalValue","valueDecimal":3}],"system":"http://loinc.org","code":"LA6571-9","display":"Nearly every day"}"#), "\(json)")
        #expect(json.contains(#""valueQuantity":{"value":78.4,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}"#), "\(json)")
        #expect(json.contains(#"{"linkId":"pain","text":"Any pain?","answer":[{"valueBoolean":true,"item":[{"linkId":"pain-where","text":"Where?","answer":[{"valueString":"left knee"}]}]}]}"#), "\(json)")
        #expect(json.contains(#"{"linkId":"dose","text":"Each dose missed","item":[{"linkId":"dose-date","text":"When","answer":[{"valueDate":"2026-11-26"}]}]}"#), "\(json)")
        let back = try SurveyAnswers(response: response, form: Self.form).outcomeValues(timeZone: Self.zone)
        #expect(Set(back.map { "\($0.kind!)=\($0.value)\($0.units ?? "")" }) == Set(Self.values.map { "\($0.kind!)=\($0.value)\($0.units ?? "")" }))
    }

    @Test("enableWhen leaves out what it turns off, and an answer to it is refused naming the item")
    func enableWhen() throws {
        let builder = QuestionnaireResponseBuilder(form: Self.form)
        // No pain: the follow-up question is off; mood "not at all" and no weight: so is "Anything else?".
        var calm = try SurveyAnswers(values: [
            OutcomeValue(.text(#"{"code":"LA6568-5","system":"http://loinc.org"}"#), kind: "mood"),
            OutcomeValue(.boolean(false), kind: "pain"),
        ], form: Self.form, timeZone: Self.zone)
        #expect(try builder.items(calm).map { $0.string("linkId") } == ["mood", "body"])
        calm.answers["pain-where"] = [Element(name: "value", type: "string", value: "knee")]
        #expect(throws: SurveyError.answer(linkId: "pain-where", "answered, but enableWhen turns off 'pain-where' for these answers")) {
            try builder.items(calm)
        }
        calm.answers["pain-where"] = nil
        calm.answers["follow-up"] = [Element(name: "value", type: "string", value: "fine")]
        #expect(throws: SurveyError.answer(linkId: "follow-up", "answered, but enableWhen turns off 'follow-up' for these answers")) {
            try builder.items(calm)
        }
    }

    @Test("answers that do not fit the form are refused naming the item", arguments: [
        (OutcomeValue(.text("x"), kind: "blood-type"), SurveyError.answer(linkId: "blood-type", "the questionnaire has no item with this linkId")),
        (OutcomeValue(.text("yes"), kind: "pain"), SurveyError.answer(linkId: "pain", "a boolean item cannot take a text value")),
        (OutcomeValue(.text("LA0000-0"), kind: "mood"), SurveyError.answer(linkId: "mood", "'LA0000-0' is not one of the item's options")),
        (OutcomeValue(.text("the whole left leg and the hip"), kind: "pain-where"),
         SurveyError.answer(linkId: "pain-where", "the answer has 30 characters, more than the item's maxLength of 20")),
        (OutcomeValue(.text("x"), kind: "body"), SurveyError.answer(linkId: "body", "a group item takes no answer")),
        (OutcomeValue(.text("x"), kind: "mood[1]/dose-why"), SurveyError.answer(linkId: "dose-why", "'mood[1]/dose-why': 'mood[1]' is not an occurrence of a repeating group around the item")),
        (OutcomeValue(.text("2026-02-30"), kind: "dose[1]/dose-date"), SurveyError.answer(linkId: "dose-date", "a date item cannot take '2026-02-30'")),
    ])
    func refusals(value: OutcomeValue, refusal: SurveyError) {
        #expect(throws: refusal) { try SurveyAnswers(values: [value], form: Self.form, timeZone: Self.zone) }
    }

    @Test("two answers to a question that does not repeat, and a follow-up without its question, are refused")
    func structure() throws {
        let builder = QuestionnaireResponseBuilder(form: Self.form)
        let twice = try SurveyAnswers(values: [OutcomeValue(.double(70), kind: "weight"), OutcomeValue(.double(71), kind: "weight")], form: Self.form, timeZone: Self.zone)
        #expect(throws: SurveyError.answer(linkId: "weight", "2 answers to a question that does not repeat")) { try builder.items(twice) }
        var orphan = SurveyAnswers()
        orphan.answers["pain-where"] = [Element(name: "value", type: "string", value: "knee")]
        #expect(throws: SurveyError.answer(linkId: "pain-where", "answered, but enableWhen turns off 'pain-where' for these answers")) { try builder.items(orphan) }
    }

    @Test("hostile forms are refused naming the item: a linkId twice, nesting past the limit, an unknown type, a bad operator")
    func hostileForms() throws {
        func form(_ items: String) throws -> Questionnaire {
            // Read leniently, as imports read: the reader's own binding checks let an unknown code through with a warning.
            try Questionnaire(FHIRJSONReader(options: ParseOptions(lenient: true)).read(#"{"resourceType": "Questionnaire", "status": "active", "item": \#(items)}"#).resource)
        }
        #expect(throws: SurveyError.form(linkId: "a", "the linkId is used by two items (que-2: linkIds are unique)")) {
            try form(#"[{"linkId": "a", "type": "group", "item": [{"linkId": "a", "type": "string"}]}]"#)
        }
        #expect(throws: SurveyError.form(linkId: "x", "'slider' is not an R4 item type")) { try form(#"[{"linkId": "x", "type": "slider"}]"#) }
        #expect(throws: SurveyError.form(linkId: "x", "'question' is not an R4 item type")) { try form(#"[{"linkId": "x", "type": "question"}]"#) }
        #expect(throws: SurveyError.form(linkId: "x", "enableWhen operator 'like' is not an R4 operator")) {
            try form(#"[{"linkId": "x", "type": "string", "enableWhen": [{"question": "x", "operator": "like", "answerString": "a"}]}]"#)
        }
        var nested = #"{"linkId": "leaf", "type": "string"}"#
        for level in 0..<40 { nested = #"{"linkId": "g\#(level)", "type": "group", "item": [\#(nested)]}"# }
        #expect(throws: SurveyError.form(linkId: "g8", "items nested more than 32 deep")) { try form("[\(nested)]") }
        let wide = (0..<700).map { #"{"linkId": "q\#($0)", "type": "integer"}"# }.joined(separator: ",")
        let seven = try form(#"[{"linkId": "g", "type": "group", "item": [\#(wide)]}]"#)
        #expect(seven.item(linkId: "q699")?.type == .integer)
    }
}
