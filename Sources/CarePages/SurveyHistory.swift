import CareCharts
import CareStore
import Foundation
import FHIR
import Mapping

/// A survey task's answers over a range, read against the form the task asks: each score the
/// form computes and each number answered, per answered event (what the pages chart), and the
/// latest answers in words. Both shapes of answers an app records read alike.
public struct SurveyHistory: Sendable {
    /// The survey task.
    public var task: CareTask
    /// Scores and numeric answers over time, one series per item (named by its text).
    public var series: [PatientCareSummary.Measurement]
    /// The latest answered event: when, and each answered question with its answer in words.
    public var latest: (date: Date, answers: [(question: String, answer: String)])?
    /// Outcomes that could not be read against the form, in words (the export refuses them too).
    public var problems: [String]

    /// The history of every survey task among `tasks`, from the outcomes of the range; forms are
    /// read from `store` within the patient's own.
    static func histories(of tasks: [CareTask], patientID: String, outcomes: [PatientCareSummary.RecordedOutcome], calendar: Calendar,
                          in store: any CarePlanReader) throws(PageError) -> [SurveyHistory] {
        var result: [SurveyHistory] = []
        for task in tasks {
            guard let found = try PageError.reading({ try StoredForms.form(of: task, patientID: patientID, in: store) }) else { continue }
            var history = SurveyHistory(task: task, series: [], latest: nil, problems: [])
            switch found {
            case .failure(let missing): history.problems.append(missing.description)
            case .success(let form): history.read(outcomes.filter { $0.taskID == task.id }, form: form, calendar: calendar)
            }
            result.append(history)
        }
        return result
    }

    /// Reads each outcome's answers and scores, in event order.
    mutating func read(_ outcomes: [PatientCareSummary.RecordedOutcome], form: Questionnaire, calendar: Calendar) {
        let scores = SurveyScores(form: form)
        let charted = (scores.computedItems + Self.numericQuestions(form.items)).reduce(into: [Questionnaire.Item]()) { list, item in
            if !list.contains(where: { $0.linkId == item.linkId }) { list.append(item) }
        }
        let scales = Dictionary(charted.compactMap { item in form.scoreScale(of: item).map { (item.linkId, $0) } }) { first, _ in first }
        for scale in scales.values { problems += scale.problems }
        let bands = scales.mapValues { $0.bands.map { CartesianChart.Band(label: $0.label, range: $0.low...$0.high) } }
        for outcome in outcomes {
            let answers: SurveyAnswers
            do { answers = try scores.apply(to: SurveyAnswers(values: outcome.values, form: form, timeZone: calendar.timeZone)).answers } catch {
                problems.append("\(CarePlanReport.dateTime(outcome.event, calendar)): \(error)")
                continue
            }
            for item in charted {
                guard let number = answers.answers[item.linkId]?.first.flatMap(Self.number) else { continue }
                let name = item.text ?? item.linkId
                if let i = series.firstIndex(where: { $0.kind == name }) {
                    series[i].values.append((outcome.event, number))
                } else {
                    series.append(PatientCareSummary.Measurement(kind: name, units: nil, values: [(outcome.event, number)], bands: bands[item.linkId] ?? []))
                }
            }
            latest = (outcome.event, Self.flattened(form.items).compactMap { item in
                answers.answers[item.linkId].map { given in
                    let band = given.count == 1 ? Self.number(given[0]).flatMap { CartesianChart.Band.of($0, in: bands[item.linkId] ?? []) } : nil
                    return (item.text ?? item.linkId, given.map(Self.words).joined(separator: ", ") + (band.map { " (\($0.label))" } ?? ""))
                }
            })
        }
    }

    /// The form's questions that take numbers (integer, decimal, quantity), outside repeating groups.
    static func numericQuestions(_ items: [Questionnaire.Item]) -> [Questionnaire.Item] {
        items.flatMap { item -> [Questionnaire.Item] in
            if item.type == .group && item.repeats { return [] }
            return ([.integer, .decimal, .quantity].contains(item.type) ? [item] : []) + numericQuestions(item.items)
        }
    }

    static func flattened(_ items: [Questionnaire.Item]) -> [Questionnaire.Item] {
        items.flatMap { [$0] + flattened($0.items) }
    }

    /// An answer as a number: an integer, a decimal, a Quantity's value.
    static func number(_ answer: Element) -> Double? {
        switch answer.typeName {
        case "integer", "decimal": answer.value.flatMap(Double.init)
        case "Quantity": answer.string("value").flatMap(Double.init)
        default: nil
        }
    }

    /// An answer in words: a Coding's display (else its code), a Quantity with its unit, a value as written.
    static func words(_ answer: Element) -> String {
        switch answer.typeName {
        case "Coding": answer.string("display") ?? answer.string("code") ?? "?"
        case "Quantity": [answer.string("value"), answer.string("unit") ?? answer.string("code")].compactMap { $0 }.joined(separator: " ")
        default: answer.value ?? answer.typeName ?? "?"
        }
    }
}
