import FHIR
import Foundation

/// Builds the QuestionnaireResponse a survey outcome gives, mirroring its Questionnaire: items
/// in the form's order and nesting (a group's members in `item.item`, a question's follow-ups
/// under its answer, a repeating group as sibling items), each item's `text` copied, and items
/// that enableWhen turns off left out. An answer to an item that is off is refused, naming it.
///
/// ```swift
/// let builder = QuestionnaireResponseBuilder(form: phq9)
/// let response = try builder.response(answers, status: "completed", subject: "Patient/maria-lopez",
///                                     authored: "2026-11-28T09:00:00-05:00")
/// ```
public struct QuestionnaireResponseBuilder: Sendable {
    /// The form the response answers.
    public var form: Questionnaire
    /// Refuse a response that leaves a required item (one enableWhen leaves on) unanswered: a
    /// completed response must answer them; one in progress (what scores see) need not.
    public var requiresAnswers = false

    /// A builder for responses to `form`.
    public init(form: Questionnaire, requiresAnswers: Bool = false) {
        self.form = form
        self.requiresAnswers = requiresAnswers
    }

    /// The whole response: `questionnaire` naming the form's `url|version`, the status, the
    /// subject, when it was authored, what it was asked for by (`basedOn`), and the items.
    public func response(_ answers: SurveyAnswers, status: String, subject: String? = nil, authored: String? = nil,
                         basedOn: [String] = []) throws(SurveyError) -> Element {
        var response = Element(resourceType: "QuestionnaireResponse")
        for reference in basedOn { response.append(Self.reference("basedOn", reference)) }
        if let canonical = form.canonical { response.append(Element(name: "questionnaire", type: "canonical", value: canonical)) }
        response.append(Element(name: "status", type: "code", value: status))
        if let subject { response.append(Self.reference("subject", subject)) }
        if let authored { response.append(Element(name: "authored", type: "dateTime", value: authored)) }
        for item in try items(answers) { response.append(item) }
        return response
    }

    /// The response's items for `answers`; every answer must land in one of them.
    public func items(_ answers: SurveyAnswers) throws(SurveyError) -> [Element] {
        var walk = Walk(answers: answers, requiresAnswers: requiresAnswers)
        let items = try walk.items(form.items, prefix: "")
        if let stray = Set(answers.answers.keys).subtracting(walk.placed).sorted().first {
            throw .answer(linkId: stray, "the answer has no place in the form (an occurrence of a group that is not there?)")
        }
        return items
    }

    static func reference(_ name: String, _ reference: String) -> Element {
        Element(name: name, type: "Reference", children: [Element(name: "reference", type: "string", value: reference)])
    }

    /// One pass over the form, noting which answers were placed.
    struct Walk {
        let answers: SurveyAnswers
        let requiresAnswers: Bool
        var placed: Set<String> = []

        init(answers: SurveyAnswers, requiresAnswers: Bool) {
            self.answers = answers
            self.requiresAnswers = requiresAnswers
        }

        /// A required item left without an answer, when answers are required and its parent is
        /// in the response (R4: `required` holds only where the parent is present; a group that
        /// is not required and has nothing answered makes no demand on what is under it, nor
        /// does an unanswered question on its follow-ups).
        func unanswered(_ definition: Questionnaire.Item, parentPresent: Bool) -> SurveyError? {
            guard requiresAnswers, parentPresent, definition.required else { return nil }
            return .answer(linkId: definition.linkId, "required, and not answered")
        }

        /// `definitions`' items under `prefix`; `parentPresent` tells whether what holds them (the
        /// response, a group, a question) is in the response, which decides whether `required` holds.
        mutating func items(_ definitions: [Questionnaire.Item], prefix: String, parentPresent: Bool = true) throws(SurveyError) -> [Element] {
            var result: [Element] = []
            for definition in definitions {
                guard try isEnabled(definition, prefix: prefix) else {
                    if let answered = answered(under: definition, prefix: prefix) {
                        throw .answer(linkId: answered, "answered, but enableWhen turns off '\(definition.linkId)' for these answers")
                    }
                    continue
                }
                switch definition.type {
                case .display: continue
                case .group where definition.repeats:
                    let occurrences = occurrences(of: definition.linkId, prefix: prefix)
                    if occurrences.isEmpty, let missing = unanswered(definition, parentPresent: parentPresent) { throw missing }
                    for occurrence in occurrences {
                        let members = try items(definition.items, prefix: prefix + "\(definition.linkId)[\(occurrence)]/")
                        if !members.isEmpty { result.append(item(definition, children: members)) }
                    }
                case .group:
                    // Present when something under it is answered, or when it is required where it stands.
                    let present = answered(under: definition, prefix: prefix) != nil || (parentPresent && definition.required)
                    let members = try items(definition.items, prefix: prefix, parentPresent: present)
                    if !members.isEmpty { result.append(item(definition, children: members)) } else if let missing = unanswered(definition, parentPresent: parentPresent) { throw missing }
                default:
                    if let question = try question(definition, prefix: prefix, parentPresent: parentPresent) { result.append(question) }
                }
            }
            return result
        }

        /// A question's item: its answers, its follow-ups under the first answer.
        mutating func question(_ definition: Questionnaire.Item, prefix: String, parentPresent: Bool) throws(SurveyError) -> Element? {
            let place = prefix + definition.linkId
            let values = answers.answers[place] ?? []
            let followUps = try items(definition.items, prefix: prefix, parentPresent: !values.isEmpty)
            guard !values.isEmpty else {
                if !followUps.isEmpty { throw .answer(linkId: definition.linkId, "its follow-up questions are answered, but it is not") }
                if let missing = unanswered(definition, parentPresent: parentPresent) { throw missing }
                return nil
            }
            if values.count > 1 && !definition.repeats {
                throw .answer(linkId: definition.linkId, "\(values.count) answers to a question that does not repeat")
            }
            placed.insert(place)
            var item = item(definition, children: [])
            for (index, value) in values.enumerated() {
                var answer = Element(name: "answer", type: "QuestionnaireResponse.item.answer", children: [value])
                if index == 0 { for followUp in followUps { answer.append(followUp) } }
                item.append(answer)
            }
            return item
        }

        func item(_ definition: Questionnaire.Item, children: [Element]) -> Element {
            var item = Element(name: "item", type: "QuestionnaireResponse.item")
            item.append(Element(name: "linkId", type: "string", value: definition.linkId))
            if let text = definition.text { item.append(Element(name: "text", type: "string", value: text)) }
            for child in children { item.append(child) }
            return item
        }

        /// The occurrences of a repeating group the answers name under `prefix`, in order.
        func occurrences(of linkId: String, prefix: String) -> [Int] {
            let start = prefix + linkId + "["
            let numbers = answers.answers.keys.compactMap { key -> Int? in
                guard key.hasPrefix(start), let close = key.dropFirst(start.count).firstIndex(of: "]") else { return nil }
                return Int(key[key.index(key.startIndex, offsetBy: start.count)..<close])
            }
            return Set(numbers).sorted()
        }

        /// The place of an answer to the item or anything under it, if there is one.
        func answered(under definition: Questionnaire.Item, prefix: String) -> String? {
            var linkIds: Set<String> = []
            var pending = [definition]
            while let next = pending.popLast() {
                linkIds.insert(next.linkId)
                pending += next.items
            }
            return answers.answers.keys.sorted().first { key in
                key.hasPrefix(prefix) && linkIds.contains(SurveyAnswers.split(key).linkId)
            }
        }

        /// Whether enableWhen lets the item be asked, with its conditions read at the nearest
        /// occurrence of the question they name (inside the same group occurrence first).
        func isEnabled(_ definition: Questionnaire.Item, prefix: String) throws(SurveyError) -> Bool {
            guard !definition.enableWhen.isEmpty else { return true }
            let results = definition.enableWhen.map { condition in
                EnableWhenTest.holds(condition, answers: nearestAnswers(condition.question, prefix: prefix))
            }
            return definition.enableBehavior == .any ? results.contains(true) : !results.contains(false)
        }

        /// A question's answers at the nearest place: this occurrence's, then each enclosing one's.
        func nearestAnswers(_ linkId: String, prefix: String) -> [Element] {
            var groups = SurveyAnswers.split(prefix).groups
            while true {
                if let found = answers.answers[groups.map { $0 + "/" }.joined() + linkId] { return found }
                if groups.isEmpty {
                    return answers.answers.keys.sorted().first { SurveyAnswers.split($0).linkId == linkId }.map { answers.answers[$0]! } ?? []
                }
                groups.removeLast()
            }
        }
    }
}

/// One enableWhen condition against a question's answers (R5's reading of the ordering
/// operators: at least one answer compares so).
enum EnableWhenTest {
    static func holds(_ condition: Questionnaire.EnableWhen, answers: [Element]) -> Bool {
        switch condition.operator {
        case "exists": return (condition.answer.value == "true") == !answers.isEmpty
        case "=": return answers.contains { compare($0, condition.answer) == .orderedSame }
        case "!=": return !answers.contains { compare($0, condition.answer) == .orderedSame }
        default:
            let wanted: [ComparisonResult] = switch condition.operator {
            case ">": [.orderedDescending]
            case "<": [.orderedAscending]
            case ">=": [.orderedDescending, .orderedSame]
            default: [.orderedAscending, .orderedSame]
            }
            return answers.contains { compare($0, condition.answer).map(wanted.contains) ?? false }
        }
    }

    /// How an answer compares with a condition's value: Codings by system and code, numbers by
    /// value, Quantities by value in the same unit, the rest by their text; nil when they do not compare.
    static func compare(_ answer: Element, _ expected: Element) -> ComparisonResult? {
        switch (answer.typeName, expected.typeName) {
        case ("Coding", "Coding"):
            let same = answer.string("code") == expected.string("code")
                && (expected.string("system") == nil || answer.string("system") == expected.string("system"))
            return same ? .orderedSame : nil
        case ("integer", "integer"), ("decimal", "decimal"), ("integer", "decimal"), ("decimal", "integer"):
            return number(answer.value, expected.value)
        case ("Quantity", "Quantity"):
            guard answer.string("code") == expected.string("code") || answer.string("unit") == expected.string("unit") else { return nil }
            return number(answer.string("value"), expected.string("value"))
        case let (a, b) where a == b:
            guard let x = answer.value, let y = expected.value else { return nil }
            return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
        default: return nil
        }
    }

    static func number(_ a: String?, _ b: String?) -> ComparisonResult? {
        guard let x = a.flatMap({ Decimal(string: $0) }), let y = b.flatMap({ Decimal(string: $0) }) else { return nil }
        return x == y ? .orderedSame : (x < y ? .orderedAscending : .orderedDescending)
    }
}
