import FHIR

/// A FHIR R4 Questionnaire as the gateway asks and answers it: its canonical, and its items in
/// order with what a response must mirror (linkId, text, type, nesting) and what decides them
/// (enableWhen, answer options). Read once from the resource, which is kept for what scores and
/// extraction need from it.
///
/// ```swift
/// let form = try Questionnaire(FHIRDocument.read(contentsOf: "Questionnaire-phq-9.json").resource)
/// form.item(linkId: "/44250-9")?.type    // .choice
/// ```
public struct Questionnaire: Sendable {
    /// The canonical url, when the form has one.
    public var url: String?
    /// The business version, when the form has one.
    public var version: String?
    /// The form's title, as an app shows it.
    public var title: String?
    /// The top-level items, in order.
    public var items: [Item]
    /// The resource the form was read from.
    public var resource: Element
    /// Every item by its linkId (unique across the form: que-2).
    let itemsByLinkId: [String: Item]
    /// Every item's ancestors' linkIds, nearest last.
    let ancestors: [String: [String]]

    /// Deepest nesting of items read (the official forms nest at most 7 levels).
    public static let maximumDepth = 32
    /// Most items read in one form.
    public static let maximumItems = 10_000

    /// `url|version` (or the url alone), as a response's `questionnaire` names the form.
    public var canonical: String? { url.map { url in version.map { "\(url)|\($0)" } ?? url } }

    /// Reads a Questionnaire, refusing items without a linkId or type, a linkId used twice, an
    /// unknown item type, and forms nested or sized past the limits; each error names the item.
    public init(_ resource: Element) throws(SurveyError) {
        guard resource.resourceType == "Questionnaire" else {
            throw .form(linkId: nil, "expected a Questionnaire, found \(resource.resourceType ?? resource.name)")
        }
        var reader = ItemReader()
        for contained in resource.children(named: "contained") where contained.resourceType == "ValueSet" {
            if let id = contained.string("id") { reader.valueSets["#" + id] = QuestionnaireCatalog.listedCodes(contained) ?? [] }
        }
        self.items = try resource.children(named: "item").enumerated().map { index, element throws(SurveyError) in
            try reader.item(element, path: "item[\(index)]", parents: [])
        }
        if let (item, missing) = reader.danglingCondition() {
            throw .form(linkId: item, "its enableWhen names '\(missing)', which is not an item of this form (a defect of the form, not of any answer)")
        }
        self.url = resource.string("url")
        self.version = resource.string("version")
        self.title = resource.string("title")
        self.resource = resource
        self.itemsByLinkId = reader.byLinkId
        self.ancestors = reader.ancestors
    }

    /// An answer option's value, carrying the option's own extensions (a score's `ordinalValue`
    /// or `itemWeight` sits on the option as often as on its Coding) unless it has its own.
    static func optionValue(_ option: Element) -> Element? {
        guard var value = option["value"] else { return nil }
        for ext in option.children(named: "extension") where !value.children(named: "extension").contains(where: { $0.string("url") == ext.string("url") }) {
            value.children.insert(ext, at: 0)
        }
        return value
    }

    /// A ValueSet's composed codes as `valueCoding`s, each with its concept's extensions (an
    /// `ordinalValue`, what a score adds up): `compose.include` in order (what
    /// `QuestionnaireCatalog.listedCodes` reads when the set has no expansion).
    static func codings(of valueSet: Element) -> [Element] {
        valueSet.children(named: "compose").flatMap { $0.children(named: "include") }.flatMap { include in
            include.children(named: "concept").compactMap { concept -> Element? in
                guard let code = concept.string("code") else { return nil }
                return AnswerValue.codingElement(system: include.string("system"), code: code, display: concept.string("display"),
                                                 extensions: concept.children(named: "extension"))
            }
        }
    }

    /// The item with this linkId, wherever it is nested.
    public func item(linkId: String) -> Item? { itemsByLinkId[linkId] }

    /// What a Questionnaire item asks, and how its answers are typed and decided.
    public struct Item: Sendable {
        /// The item's linkId: what a response item carries to name it.
        public var linkId: String
        /// The question or heading, as the form words it.
        public var text: String?
        /// What kind of item: a group, a display text, or the type of its answers.
        public var type: ItemType
        /// Whether a completed response must answer it.
        public var required: Bool
        /// Whether a question takes several answers, or a group occurs several times.
        public var repeats: Bool
        /// The longest answer text allowed.
        public var maxLength: Int?
        /// The answer options' values (a `Coding`, `string`, `integer`...), in order; for an
        /// `answerValueSet` the form contains, its codes.
        public var options: [Element]
        /// When the item is asked at all.
        public var enableWhen: [EnableWhen]
        /// Whether every condition must hold, or one.
        public var enableBehavior: EnableBehavior
        /// The items under it (a group's members, or a question's follow-ups).
        public var items: [Item]
        /// The item as the form has it (extensions, codes, initial values).
        public var element: Element
    }

    /// An R4 item type (`item-type`); `question` is abstract and never an item's own.
    public enum ItemType: String, Sendable, CaseIterable {
        /// Holds other items; no answer of its own.
        case group
        /// Text shown, never answered.
        case display
        /// Yes or no.
        case boolean
        /// A number with a fraction.
        case decimal
        /// A whole number.
        case integer
        /// A date.
        case date
        /// A date and time.
        case dateTime
        /// A time of day.
        case time
        /// A short text.
        case string
        /// A longer, free text.
        case text
        /// A URL.
        case url
        /// One (or, repeating, several) of the options.
        case choice
        /// One of the options, or free text.
        case openChoice = "open-choice"
        /// A file.
        case attachment
        /// A reference to a resource.
        case reference
        /// A measurement with a unit.
        case quantity
    }

    /// How several enableWhen conditions combine.
    public enum EnableBehavior: String, Sendable {
        /// Every condition must hold.
        case all
        /// One condition suffices.
        case any
    }

    /// One condition on another question's answers.
    public struct EnableWhen: Sendable {
        /// The linkId of the question it looks at.
        public var question: String
        /// `exists`, `=`, `!=`, `>`, `<`, `>=` or `<=`.
        public var `operator`: String
        /// The value compared with (`answerBoolean`, `answerCoding`...).
        public var answer: Element
    }

    /// Reads items depth first, keeping every linkId once.
    struct ItemReader {
        /// The first item (in the order read) whose enableWhen names a linkId the form lacks, and that linkId.
        func danglingCondition() -> (item: String, missing: String)? {
            for linkId in order {
                if let missing = byLinkId[linkId]?.enableWhen.first(where: { byLinkId[$0.question] == nil }) { return (linkId, missing.question) }
            }
            return nil
        }
        /// The linkIds in the order read.
        var order: [String] = []
        var byLinkId: [String: Item] = [:]
        var ancestors: [String: [String]] = [:]
        var seen: Set<String> = []
        /// The contained ValueSets' codes, by `#id` (how `answerValueSet` names them).
        var valueSets: [String: [Element]] = [:]
        var count = 0

        mutating func item(_ element: Element, path: String, parents: [String]) throws(SurveyError) -> Item {
            count += 1
            guard count <= Questionnaire.maximumItems else {
                throw .form(linkId: nil, "more than \(Questionnaire.maximumItems) items; no form the gateway serves is that large")
            }
            guard parents.count < Questionnaire.maximumDepth else {
                throw .form(linkId: parents.last, "items nested more than \(Questionnaire.maximumDepth) deep")
            }
            guard let linkId = element.string("linkId"), !linkId.isEmpty else { throw .form(linkId: nil, "\(path) has no linkId") }
            guard seen.insert(linkId).inserted else { throw .form(linkId: linkId, "the linkId is used by two items (que-2: linkIds are unique)") }
            order.append(linkId)
            guard let code = element.string("type") else { throw .form(linkId: linkId, "the item has no type") }
            guard let type = ItemType(rawValue: code), code != "question" else {
                throw .form(linkId: linkId, "'\(code)' is not an R4 item type")
            }
            let conditions = try element.children(named: "enableWhen").map { condition throws(SurveyError) in
                guard let question = condition.string("question"), let op = condition.string("operator"), let answer = condition["answer"] else {
                    throw SurveyError.form(linkId: linkId, "an enableWhen without question, operator or answer")
                }
                guard ["exists", "=", "!=", ">", "<", ">=", "<="].contains(op) else {
                    throw SurveyError.form(linkId: linkId, "enableWhen operator '\(op)' is not an R4 operator")
                }
                return EnableWhen(question: question, operator: op, answer: answer)
            }
            ancestors[linkId] = parents
            var children: [Item] = []
            for (index, child) in element.children(named: "item").enumerated() {
                children.append(try item(child, path: "\(path).item[\(index)]", parents: parents + [linkId]))
            }
            let item = Item(linkId: linkId, text: element.string("text"), type: type, required: element.string("required") == "true",
                            repeats: element.string("repeats") == "true", maxLength: element.string("maxLength").flatMap { Int($0) },
                            options: element.children(named: "answerOption").compactMap(Questionnaire.optionValue)
                                + (element.string("answerValueSet").flatMap { valueSets[$0] } ?? []),
                            enableWhen: conditions, enableBehavior: element.string("enableBehavior") == "any" ? .any : .all,
                            items: children, element: element)
            byLinkId[linkId] = item
            return item
        }
    }
}

/// Why a form could not be read, or answers could not become a response: naming the item.
public enum SurveyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The Questionnaire itself (an item without linkId, a linkId used twice, nesting too deep).
    case form(linkId: String?, String)
    /// An answer: a linkId the form lacks, a wrong type, a value not among the options, an
    /// answer to a disabled item.
    case answer(linkId: String, String)

    /// The problem with its item, on one line (control characters a form or an answer carries
    /// are written escaped): `item '1.1': the linkId is used by two items`.
    public var description: String {
        let text = switch self {
        case .form(let linkId?, let message), .answer(let linkId, let message): "item '\(linkId)': \(message)"
        case .form(nil, let message): message
        }
        guard text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else { return text }
        return String(String.UnicodeScalarView(text.unicodeScalars.flatMap { scalar -> [Unicode.Scalar] in
            scalar.properties.generalCategory == .control ? Array(scalar.escaped(asASCII: true).unicodeScalars) : [scalar]
        }))
    }
}
