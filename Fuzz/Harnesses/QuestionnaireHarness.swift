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
        let form: Questionnaire
        do { form = try Questionnaire(first) } catch { return try check(error) }
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
        } catch let error as SurveyError {
            try check(error)
        } catch let failure as PropertyFailure {
            throw failure
        } catch {
            throw PropertyFailure("an error that is not a SurveyError: \(error)")
        }
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
        guard !text.isEmpty, !text.contains("\n") || text.contains("calculatedExpression") else {
            throw PropertyFailure("a refusal without a one-line reason: \(text.debugDescription)")
        }
    }
}
