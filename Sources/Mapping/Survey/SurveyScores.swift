import FHIR
import FHIRPath

/// A form's computed items (SDC `calculatedExpression`: a PHQ-9's total, a BMI), worked out by
/// the gateway's FHIRPath engine from the other answers and the form's `variable`s, and added to
/// the answers. `%resource` is the response so far, `%questionnaire` the form. Scores add up
/// answer weights with SDC's `ordinal()` (or `weight()`) and `sum()`. An expression in another
/// language (CQL) is left out with a note; one that does not parse or fails names its item.
///
/// ```swift
/// let scored = try SurveyScores(form: phq9).apply(to: answers)
/// scored.answers.answers["/44261-6"]    // [valueInteger 14]
/// ```
public struct SurveyScores: Sendable {
    /// The form whose computed items are worked out.
    public var form: Questionnaire

    /// The SDC extension holding an item's computed value.
    public static let calculatedExpression = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-calculatedExpression"
    /// The core extension naming an expression for the expressions under it.
    public static let variable = "http://hl7.org/fhir/StructureDefinition/variable"

    /// Scores for `form`.
    public init(form: Questionnaire) {
        self.form = form
    }

    /// The answers with every computed item the form has (outside repeating groups) answered,
    /// and what could not be computed, in words.
    public func apply(to answers: SurveyAnswers) throws(SurveyError) -> (answers: SurveyAnswers, notes: [String]) {
        var scored = answers
        var notes: [String] = []
        for item in Self.calculated(form.items) {
            guard let expression = item.element.children(named: "extension").first(where: { $0.string("url") == Self.calculatedExpression })?["value"] else { continue }
            guard let text = try Self.fhirPath(expression, linkId: item.linkId, notes: &notes) else { continue }
            // Each computed item sees the response as it stands, earlier scores included.
            let response = try QuestionnaireResponseBuilder(form: form).response(scored, status: "in-progress")
            var environment = EvaluationEnvironment(resource: response)
            environment.variables = try variables(for: item, on: response, notes: &notes)
            let result: [FHIRPathValue]
            do { result = try FHIRPathExpression(text).evaluate(in: environment) } catch {
                throw .form(linkId: item.linkId, "calculatedExpression '\(text)': \(error)")
            }
            scored.answers[item.linkId] = nil
            if let value = try Self.answer(result, for: item) { scored.answers[item.linkId] = [value] }
        }
        return (scored, notes)
    }

    /// The items this form computes (outside repeating groups), in order: its scores.
    public var computedItems: [Questionnaire.Item] { Self.calculated(form.items) }

    /// The form's items with a calculatedExpression, outside repeating groups, in order.
    static func calculated(_ items: [Questionnaire.Item]) -> [Questionnaire.Item] {
        items.flatMap { item -> [Questionnaire.Item] in
            let own = item.element.children(named: "extension").contains { $0.string("url") == calculatedExpression } ? [item] : []
            return item.type == .group && item.repeats ? [] : own + calculated(item.items)
        }
    }

    /// `%questionnaire` and the `variable`s `item` sees, evaluated in order: the root's, then
    /// each enclosing item's from the outermost in, then the item's own (SDC: a variable is
    /// visible in its item's expressions and its descendants'). Each sees the ones before it, and
    /// a nearer one of the same name shadows a farther one.
    func variables(for item: Questionnaire.Item, on response: Element, notes: inout [String]) throws(SurveyError) -> [String: [FHIRPathValue]] {
        var values: [String: [FHIRPathValue]] = ["questionnaire": [.element(form.resource)]]
        let holders = [(form.resource, nil)] + (form.ancestors[item.linkId] ?? []).compactMap { linkId in
            form.item(linkId: linkId).map { ($0.element, linkId as String?) }
        } + [(item.element, item.linkId)]
        for (holder, linkId) in holders {
            for variable in holder.children(named: "extension") where variable.string("url") == Self.variable {
                guard let expression = variable["value"], let name = expression.string("name") else { continue }
                guard let text = try Self.fhirPath(expression, linkId: linkId, notes: &notes) else { continue }
                let environment = EvaluationEnvironment(resource: response, variables: values)
                do { values[name] = try FHIRPathExpression(text).evaluate(in: environment) } catch {
                    throw .form(linkId: linkId, "variable '\(name)' ('\(text)'): \(error)")
                }
            }
        }
        return values
    }

    /// An Expression's FHIRPath text; nil, with a note, for another language.
    static func fhirPath(_ expression: Element, linkId: String?, notes: inout [String]) throws(SurveyError) -> String? {
        guard let text = expression.string("expression") else { throw .form(linkId: linkId, "an Expression without its expression") }
        let language = expression.string("language") ?? "text/fhirpath"
        guard language == "text/fhirpath" else {
            notes.append("\(linkId.map { "item '\($0)': " } ?? "")\(language) expressions are not supported; '\(text)' is left out")
            return nil
        }
        return text
    }

    /// The answer a computed result gives the item, typed as the item asks; nil for no result.
    static func answer(_ result: [FHIRPathValue], for item: Questionnaire.Item) throws(SurveyError) -> Element? {
        guard let first = result.first else { return nil }
        guard result.count == 1 else { throw .form(linkId: item.linkId, "the calculatedExpression gives \(result.count) values, not one") }
        let lexical: String
        switch first.systemValue {
        case .integer(let i): lexical = String(i)
        case .decimal(let d): lexical = d.description
        case .string(let s): lexical = s
        case .boolean(let b): lexical = b ? "true" : "false"
        default: throw .form(linkId: item.linkId, "the calculatedExpression gives \(first), which a \(item.type.rawValue) item cannot hold")
        }
        switch item.type {
        case .integer:
            guard let whole = Int(lexical) ?? Double(lexical).flatMap({ $0 == $0.rounded() ? Int(exactly: $0) : nil }) else {
                throw .form(linkId: item.linkId, "the calculatedExpression gives \(lexical), not a whole number")
            }
            return AnswerValue.primitive("integer", String(whole))
        case .decimal: return AnswerValue.primitive("decimal", lexical)
        case .quantity: return AnswerValue.quantity(lexical, units: nil, item: item)
        case .string, .text: return AnswerValue.primitive("string", lexical)
        case .boolean where lexical == "true" || lexical == "false": return AnswerValue.primitive("boolean", lexical)
        default: throw .form(linkId: item.linkId, "a \(item.type.rawValue) item cannot hold the calculatedExpression's \(lexical)")
        }
    }
}
