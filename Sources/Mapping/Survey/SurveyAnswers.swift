import CareStore
import FHIR
import Foundation
import JSON

/// A survey outcome's answers by place, each a FHIR answer value (`valueCoding`,
/// `valueInteger`...) typed by its item, read from the CareKit outcome values an app records.
///
/// A value's `kind` is the question's linkId; inside a repeating group it is prefixed with the
/// group's linkId and which occurrence, 1 first (`2.1[3]/2.1.1.1`). A repeating question gives
/// several values of one kind.
///
/// ```swift
/// let answers = try SurveyAnswers(values: outcome.values, form: phq9, timeZone: zone)
/// let response = try QuestionnaireResponseBuilder(form: phq9).response(answers, status: "completed")
/// ```
public struct SurveyAnswers: Sendable {
    /// Answers by place (the outcome values' `kind`), in the order recorded.
    public var answers: [String: [Element]] = [:]

    /// The kind of the outcome value that holds a whole QuestionnaireResponse as JSON text (what
    /// ResearchKitOnFHIR makes).
    public static let responseKind = "questionnaireResponse"

    /// No answers.
    public init() {}

    /// Reads outcome values in either shape: one value per answer, or one text value of kind
    /// `questionnaireResponse` holding a whole response (flat or nested). Dates are read in `timeZone`.
    public init(values: [OutcomeValue], form: Questionnaire, timeZone: TimeZone) throws(SurveyError) {
        if values.count == 1, values[0].kind == Self.responseKind {
            guard case .text(let json) = values[0].value else {
                throw .answer(linkId: Self.responseKind, "the value holding the response is not text")
            }
            let parsed: Element
            do { parsed = try FHIRJSONReader(options: ParseOptions(maximumDocumentSize: 4 << 20, lenient: true)).read(json).resource } catch {
                throw .answer(linkId: Self.responseKind, "not a QuestionnaireResponse: \(error.issues.first?.message ?? "\(error)")")
            }
            try self.init(response: parsed, form: form)
            return
        }
        self.init()
        for value in values {
            guard let kind = value.kind, !kind.isEmpty else { throw .answer(linkId: "", "an outcome value without a kind (the question's linkId)") }
            let item = try Self.question(at: kind, in: form)
            answers[kind, default: []].append(try AnswerValue.element(value, for: item, timeZone: timeZone))
        }
    }

    /// Reads a response's answers, flat (every item at the top, as ResearchKitOnFHIR writes them)
    /// or nested as the form nests them; values are taken as the response types them.
    public init(response: Element, form: Questionnaire) throws(SurveyError) {
        guard response.resourceType == "QuestionnaireResponse" else {
            throw .answer(linkId: Self.responseKind, "expected a QuestionnaireResponse, found \(response.resourceType ?? response.name)")
        }
        try collect(response.children(named: "item"), prefix: "", form: form)
    }

    /// The question a place names, after checking the groups before it are repeating groups
    /// around it.
    static func question(at place: String, in form: Questionnaire) throws(SurveyError) -> Questionnaire.Item {
        let (groups, linkId) = Self.split(place)
        guard let item = form.item(linkId: linkId) else { throw .answer(linkId: linkId, "the questionnaire has no item with this linkId") }
        guard item.type != .group, item.type != .display else { throw .answer(linkId: linkId, "a \(item.type.rawValue) item takes no answer") }
        for segment in groups {
            guard let (group, occurrence) = Self.occurrence(segment), occurrence >= 1,
                  form.item(linkId: group)?.repeats == true, form.ancestors[linkId]?.contains(group) == true else {
                throw .answer(linkId: linkId, "'\(place)': '\(segment)' is not an occurrence of a repeating group around the item")
            }
        }
        return item
    }

    /// A place as its group occurrences (`2.1[3]`) and the question's linkId, which may itself
    /// hold slashes (LOINC-style `/44250-9`): the occurrences end in `]/`.
    static func split(_ place: String) -> (groups: [String], linkId: String) {
        let parts = place.components(separatedBy: "]/")
        return (parts.dropLast().map { $0 + "]" }, parts.last!)
    }

    /// `2.1[3]` as the group's linkId and occurrence.
    static func occurrence(_ segment: String) -> (String, Int)? {
        guard segment.hasSuffix("]"), let open = segment.lastIndex(of: "[") else { return nil }
        guard let number = Int(segment[segment.index(after: open)..<segment.index(before: segment.endIndex)]) else { return nil }
        return (String(segment[..<open]), number)
    }

    /// Gathers a response's answers under `prefix`, numbering repeating groups' occurrences.
    mutating func collect(_ items: [Element], prefix: String, form: Questionnaire) throws(SurveyError) {
        var occurrences: [String: Int] = [:]
        for item in items {
            guard let linkId = item.string("linkId") else { throw .answer(linkId: "", "a response item without a linkId") }
            guard let definition = form.item(linkId: linkId) else { throw .answer(linkId: linkId, "the questionnaire has no item with this linkId") }
            var inner = prefix
            occurrences[linkId, default: 0] += 1
            if definition.type == .group && definition.repeats {
                inner = prefix + "\(linkId)[\(occurrences[linkId]!)]/"
            } else if occurrences[linkId]! > 1 {
                throw .answer(linkId: linkId, "the response has the item more than once here, and it is not a repeating group")
            }
            for answer in item.children(named: "answer") {
                if let value = answer["value"] { answers[prefix + linkId, default: []].append(AnswerValue.asOption(value, of: definition)) }
                try collect(answer.children(named: "item"), prefix: inner, form: form)
            }
            try collect(item.children(named: "item"), prefix: inner, form: form)
        }
    }

    /// The answers as CareKit outcome values, one per answer, `kind` the place: what an app
    /// records for the form. Codings become ResearchKitOnFHIR's JSON text; dates are read in `timeZone`.
    public func outcomeValues(timeZone: TimeZone) -> [OutcomeValue] {
        answers.keys.sorted().flatMap { place in
            answers[place]!.map { AnswerValue.outcomeValue($0, kind: place, timeZone: timeZone) }
        }
    }
}
