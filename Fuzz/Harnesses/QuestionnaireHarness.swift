import CareStore
import FHIR
import Foundation
import Mapping

/// A Questionnaire and, optionally, a response to it, as a form tool or a device sends them: a
/// Bundle whose first entry is the form and second the response (or the form alone). Reading the
/// form, reading the response's answers, building a response and working out its scores each
/// refuse with a `SurveyError` naming what is wrong, or give a response that is a fixed point:
/// its answers as CareKit outcome values build the same response again.
public enum QuestionnaireHarness: FuzzHarness {
    public static let name = "questionnaire"
    static let zone = TimeZone(identifier: "America/New_York")!

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        guard let parsed = try? FHIRJSONReader(options: ParseOptions(maximumDocumentSize: 1 << 20, lenient: true)).read(input).resource else { return }
        let resources = parsed.resourceType == "Bundle" ? parsed.children(named: "entry").compactMap { $0["resource"] } : [parsed]
        guard let first = resources.first else { return }
        // The other entries answer the form's answerValueSets, as an import's resources do.
        let kept = try answerSets(of: first, among: Array(resources.dropFirst()))
        let form: Questionnaire
        do { form = try Questionnaire(kept) } catch { return try check(error) }
        try checkScales(form.items, of: form)
        guard resources.count > 1 else { return }
        do {
            let answers = try SurveyAnswers(response: resources[1], form: form)
            let scored = try SurveyScores(form: form).apply(to: answers).answers
            let builder = QuestionnaireResponseBuilder(form: form)
            let built = try builder.items(scored)
            // Through CareKit's values and back: once built, a response builds itself again.
            let again = try builder.items(SurveyAnswers(values: answersOf(built, form: form).outcomeValues(timeZone: zone), form: form, timeZone: zone))
            let once = try builder.items(SurveyAnswers(values: answersOf(again, form: form).outcomeValues(timeZone: zone), form: form, timeZone: zone))
            guard json(again) == json(once) else {
                throw PropertyFailure("a built response is not a fixed point:\n\(json(again))\n\(json(once))")
            }
            // Exported as the EHR gets it: refused with a SurveyError, or a valid response with the same items.
            let values = try answersOf(once, form: form).outcomeValues(timeZone: zone)
            let exported = try ObservationBuilder(codes: [:], timeZone: zone).surveyResponse(record(values), form: form).parts
            let items = exported[0].resource.children(named: "item")
            guard json(items) == json(try builder.items(SurveyAnswers(values: values, form: form, timeZone: zone).scored(by: form))) else {
                throw PropertyFailure("the exported response's items are not the built ones:\n\(json(items))")
            }
        } catch let error as SurveyError {
            try check(error)
        } catch let failure as PropertyFailure {
            throw failure
        } catch {
            throw PropertyFailure("an error that is not a SurveyError: \(error)")
        }
    }

    /// The form with the sets it names contained: every set it still names by url was reported
    /// unlisted, and no two contained resources share an id.
    static func answerSets(of form: Element, among others: [Element]) throws(PropertyFailure) -> Element {
        let catalog = QuestionnaireCatalog(others.map { SourcedResource(resource: $0, origin: "fuzz") })
        let (kept, unlisted) = catalog.containingAnswerSets(form)
        guard Set(Questionnaire.externalAnswerSets(in: kept)) == Set(unlisted.map(\.canonical)) else {
            throw PropertyFailure("sets named by url \(Questionnaire.externalAnswerSets(in: kept)) are not those reported unlisted \(unlisted.map(\.canonical))")
        }
        let ids = kept.children(named: "contained").compactMap { $0.string("id") }
        guard kept.children(named: "contained").count == form.children(named: "contained").count || Set(ids).count == ids.count else {
            throw PropertyFailure("contained answer sets share an id: \(ids)")
        }
        return kept
    }

    /// Every score scale read has its bands in order, each low at or under its high.
    static func checkScales(_ items: [Questionnaire.Item], of form: Questionnaire) throws(PropertyFailure) {
        for item in items {
            if let scale = form.scoreScale(of: item) {
                guard scale.bands.allSatisfy({ $0.low <= $0.high }), zip(scale.bands, scale.bands.dropFirst()).allSatisfy({ $0.low <= $1.low }) else {
                    throw PropertyFailure("item '\(item.linkId)': bands out of order or inverted: \(scale.bands)")
                }
            }
            try checkScales(item.items, of: form)
        }
    }

    /// An outcome of a survey task recording `values`.
    static func record(_ values: [OutcomeValue]) -> OutcomeRecord {
        let schedule = try! Schedule.dailyAtTime(hour: 9, minutes: 0, start: Date(timeIntervalSinceReferenceDate: 815_202_000), timeZone: zone)
        let task = CareTask(id: "survey", title: "Survey", carePlanUUID: nil, schedule: schedule, impactsAdherence: true, timezone: zone)
        let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: values, effectiveDate: Date(timeIntervalSinceReferenceDate: 815_202_000), timezone: zone)
        return OutcomeRecord(outcome: outcome, task: task, patient: nil, patientID: "Patient/fuzz", amended: false, deleted: false)
    }

    static func answersOf(_ items: [Element], form: Questionnaire) throws -> SurveyAnswers {
        var response = Element(resourceType: "QuestionnaireResponse")
        for item in items { response.append(item) }
        return try SurveyAnswers(response: response, form: form)
    }

    static func json(_ items: [Element]) -> String {
        var response = Element(resourceType: "QuestionnaireResponse")
        for item in items { response.append(item) }
        return FHIRJSONWriter(pretty: false).string(response)
    }

    /// A refusal says what is wrong, on one line.
    static func check(_ error: SurveyError) throws(PropertyFailure) {
        let text = error.description
        guard !text.isEmpty, !text.contains("\n") else {
            throw PropertyFailure("a refusal without a one-line reason: \(text.debugDescription)")
        }
    }
}

extension SurveyAnswers {
    /// The answers with the form's scores worked out (what an export builds from).
    func scored(by form: Questionnaire) throws(SurveyError) -> SurveyAnswers { try SurveyScores(form: form).apply(to: self).answers }
}
