import CareStore
import FHIR
import Foundation
import Mapping
import Testing

@Suite("Questionnaires and their responses")
struct QuestionnaireResponseTests {
    /// The official responses and the forms they answer (QuestionnaireResponse-3141 names none).
    static let pairs = [("3141", "Questionnaire-3141"), ("bb", "Questionnaire-bb"), ("f201", "Questionnaire-f201"),
                        ("gcs", "Questionnaire-gcs"), ("ussg-fht-answers", "Bundle-ussg-fht")]

    /// The first item each official response answers that its form lacks.
    static let strays = ["3141": "1.1.1.3", "bb": "vitaminKDose1", "f201": "1.1", "ussg-fht-answers": "1.1.7.1"]

    /// What the official examples answer against their forms' rules.
    static let refusals = [
        // Its answers are coded in another system than the form's enableWhen names, so the group
        // they are in is off for them.
        "3141": SurveyError.answer(linkId: "1.1.1.1", "answered, but enableWhen turns off '1.1.1' for these answers"),
        // The options are F and M; it answers f.
        "bb": SurveyError.answer(linkId: "sex", "'f' is not one of the item's options"),
        // It answers "No" as text to a boolean question.
        "f201": SurveyError.answer(linkId: "3.1", "a boolean item cannot take a text value"),
    ]

    /// Refused already when read: the form's group 2.1 does not repeat; the response has it 17 times.
    static let unreadable = ["ussg-fht-answers": SurveyError.answer(linkId: "2.1", "the response has the item more than once here, and it is not a repeating group")]

    /// The response without the items (and what is under them) its form lacks.
    static func pruned(_ element: Element, form: Questionnaire) -> Element {
        var copy = element
        copy.children = element.children.filter { child in
            child.typeName != "QuestionnaireResponse.item" || child.string("linkId").flatMap { form.item(linkId: $0) } != nil
        }.map { pruned($0, form: form) }
        return copy
    }

    static func form(_ name: String, _ format: String) throws -> Questionnaire {
        let resource = try FHIRDocument.read(contentsOf: SharedData.root!.appendingPathComponent("fhir-r4/questionnaires/\(format)/\(name).\(format)").path).resource
        let questionnaire = resource.resourceType == "Bundle"
            ? resource.children(named: "entry").compactMap { $0["resource"] }.first { $0.resourceType == "Questionnaire" }!
            : resource
        return try Questionnaire(questionnaire)
    }

    /// A response's items without their `text` (the form's words, which some examples leave
    /// out and the builder copies), as JSON.
    static func itemsJSON(_ items: [Element], codingExtensions: Bool = true) -> String {
        func strip(_ element: Element) -> Element {
            var copy = element
            if copy.typeName == "QuestionnaireResponse.item" { copy.removeChildren(named: "text") }
            if copy.typeName == "Coding" && !codingExtensions { copy.removeChildren(named: "extension") }
            copy.children = copy.children.map(strip)
            return copy
        }
        var response = Element(resourceType: "QuestionnaireResponse")
        for item in items { response.append(strip(item)) }
        return FHIRJSONWriter().string(response)
    }

    @Test("the official QuestionnaireResponses, read into CareKit outcome values and built again from them, have the originals' items and answers; those answering items their forms lack are refused naming the item (JSON and XML)",
          arguments: ["json", "xml"])
    func roundTrip(format: String) throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("the Questionnaire round trip") }
        let zone = TimeZone(identifier: "UTC")!
        var answered = 0
        for (response, formName) in Self.pairs {
            let form = try Self.form(formName, format)
            let read = try FHIRDocument.read(contentsOf: SharedData.root!.appendingPathComponent("fhir-r4/questionnaires/\(format)/QuestionnaireResponse-\(response).\(format)").path).resource
            var original = read
            if let stray = Self.strays[response] {
                // Four official examples answer items their forms lack: refused, naming the first;
                // the rest of each, without those items, goes round.
                #expect(throws: SurveyError.answer(linkId: stray, "the questionnaire has no item with this linkId")) {
                    try SurveyAnswers(response: original, form: form)
                }
                original = Self.pruned(original, form: form)
            }
            if let refusal = Self.unreadable[response] {
                #expect(throws: refusal) { try SurveyAnswers(response: original, form: form) }
                continue
            }
            let values = try SurveyAnswers(response: original, form: form).outcomeValues(timeZone: zone)
            #expect(values.allSatisfy { $0.kind != nil })
            let rebuilt: [Element]
            do {
                rebuilt = try QuestionnaireResponseBuilder(form: form).items(SurveyAnswers(values: values, form: form, timeZone: zone))
            } catch {
                #expect(error == Self.refusals[response], "\(response).\(format)")
                continue
            }
            #expect(Self.refusals[response] == nil, "\(response).\(format) was not refused")
            answered += values.count
            // One value per answer carries a Coding as ResearchKitOnFHIR encodes it (code, system,
            // display): extensions the form does not give (gcs's ordinalValues) stay behind.
            #expect(Self.itemsJSON(rebuilt, codingExtensions: false) == Self.itemsJSON(original.children(named: "item"), codingExtensions: false), "\(response).\(format)")
            // The whole response as one value keeps everything.
            let whole = OutcomeValue(.text(FHIRJSONWriter(pretty: false).string(original)), kind: SurveyAnswers.responseKind)
            let fromWhole = try QuestionnaireResponseBuilder(form: form).items(SurveyAnswers(values: [whole], form: form, timeZone: zone))
            #expect(Self.itemsJSON(fromWhole) == Self.itemsJSON(original.children(named: "item")), "\(response).\(format), as one value")
            // Exported as the EHR gets it (checked, scored, validated): the same items again.
            let schedule = try Schedule.dailyAtTime(hour: 9, minutes: 0, start: Date(timeIntervalSinceReferenceDate: 815_202_000), timeZone: zone)
            let task = CareTask(id: "survey", title: "Survey", carePlanUUID: nil, schedule: schedule, timezone: zone)
            let record = OutcomeRecord(outcome: Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: [whole], effectiveDate: Date(), timezone: zone),
                                       task: task, patient: nil, patientID: "Patient/example", amended: false, deleted: false)
            let exported = try ObservationBuilder(codes: [:], timeZone: zone).surveyResponse(record, form: form).parts[0].resource
            #expect(Self.itemsJSON(exported.children(named: "item")) == Self.itemsJSON(original.children(named: "item")), "\(response).\(format), exported")
            #expect(exported.string("status") == "completed" && ResourceValidator().validate(exported).isEmpty)
        }
        #expect(answered == 3, "the gcs example's answers went round: \(answered)")
    }
}
