import FHIR
import Foundation

/// A canonical reference as FHIR writes one: `url|version`, a `#fragment` dropped.
public struct Canonical: Sendable, Hashable, CustomStringConvertible {
    /// The canonical url (or a relative `Questionnaire/id`).
    public var url: String
    /// The business version asked for, when the reference pins one.
    public var version: String?

    /// A canonical from its parts.
    public init(url: String, version: String? = nil) {
        self.url = url
        self.version = version
    }

    /// Reads `url|version`; nil for an empty url.
    public init?(_ text: String) {
        var text = Substring(text.trimmingCharacters(in: .whitespaces))
        if let hash = text.firstIndex(of: "#") { text = text[..<hash] }
        let parts = text.split(separator: "|", maxSplits: 1, omittingEmptySubsequences: false)
        guard let url = parts.first, !url.isEmpty else { return nil }
        self.url = String(url)
        self.version = parts.count > 1 && !parts[1].isEmpty ? String(parts[1]) : nil
    }

    /// `url|version`, or the url alone.
    public var description: String { version.map { "\(url)|\($0)" } ?? url }
}

/// The Questionnaires an import finds survey forms in: those it read (the same Bundle or files),
/// a `--questionnaires` folder's, and those fetched from the EHR. A form is found by its
/// canonical url (the version asked for, else the latest) or, for a relative canonical such as
/// `Questionnaire/phq-9`, by its id. The ValueSets among them answer the forms' answerValueSets
/// (`containingAnswerSets`).
public struct QuestionnaireCatalog: Sendable {
    var byURL: [String: [SourcedResource]] = [:]
    var byKey: [String: SourcedResource] = [:]
    /// Other definitions read with a url (an ActivityDefinition, a PlanDefinition), by url and
    /// type: a canonical naming one of them asks for no survey.
    var definitions: [String: String] = [:]
    /// ValueSets by url, as forms' `answerValueSet`s name them.
    var valueSets: [String: [SourcedResource]] = [:]

    /// The types a catalog keeps (forms and their answer sets): an import reads them whole as
    /// context for survey tasks, never counts them as left unmapped.
    public static let types: Set<String> = ["Questionnaire", "ValueSet"]

    /// A catalog of the Questionnaires among `sources` (other resources are passed over).
    public init(_ sources: [SourcedResource] = []) {
        for source in sources { add(source) }
    }

    /// Adds a Questionnaire (the first of a url, version and content is kept); notes the url of
    /// any other definition.
    public mutating func add(_ source: SourcedResource) {
        let resource = source.resource
        if resource.resourceType == "ValueSet", let url = resource.string("url") {
            let version = resource.string("version")
            if !valueSets[url, default: []].contains(where: { $0.resource.string("version") == version }) { valueSets[url, default: []].append(source) }
            return
        }
        guard resource.resourceType == "Questionnaire" else {
            if let type = resource.resourceType, let url = resource.string("url") { definitions[url] = definitions[url] ?? type }
            return
        }
        if let key = resource.relativeReference, byKey[key] == nil { byKey[key] = source }
        guard let url = resource.string("url") else { return }
        let version = resource.string("version")
        if byURL[url, default: []].contains(where: { $0.resource.string("version") == version }) { return }
        byURL[url, default: []].append(source)
    }

    /// Adds the entries of another catalog that this one lacks.
    public mutating func merge(_ other: QuestionnaireCatalog) {
        for sources in other.byURL.values { for source in sources { add(source) } }
        for source in other.byKey.values { add(source) }
        for (url, type) in other.definitions where definitions[url] == nil { definitions[url] = type }
        for sources in other.valueSets.values { for source in sources { add(source) } }
    }

    /// How many Questionnaires the catalog holds.
    public var count: Int {
        var keys = Set(byKey.keys)
        for sources in byURL.values { for source in sources { keys.insert(source.key ?? source.origin) } }
        return keys.count
    }

    /// The form `canonical` names: the version it pins, else the latest (by `date`, then by
    /// version); nil when the catalog has none.
    public func find(_ canonical: Canonical) -> SourcedResource? {
        if let forms = byURL[canonical.url] {
            if let version = canonical.version { return forms.first { $0.resource.string("version") == version } }
            return forms.max { Self.isOlder($0.resource, than: $1.resource) }
        }
        guard let key = Element.relativeReference(of: canonical.url), key.hasPrefix("Questionnaire/"),
              let form = byKey[key] else { return nil }
        if let version = canonical.version, form.resource.string("version") != version { return nil }
        return form
    }

    /// The ValueSet `canonical` names: the version it pins, else the latest.
    public func valueSet(_ canonical: Canonical) -> SourcedResource? {
        guard let sets = valueSets[canonical.url] else { return nil }
        if let version = canonical.version { return sets.first { $0.resource.string("version") == version } }
        return sets.max { Self.isOlder($0.resource, than: $1.resource) }
    }

    /// The type of a definition other than a Questionnaire that `canonical` names, if one was read.
    public func otherDefinition(_ canonical: Canonical) -> String? {
        if let type = definitions[canonical.url] { return type }
        let type = Element.relativeReference(of: canonical.url)?.split(separator: "/").first.map(String.init)
        return type.flatMap { Self.otherTargets.contains($0) ? $0 : nil }
    }

    /// What else an activity's `instantiatesCanonical` may name (R4).
    static let otherTargets: Set<String> = ["PlanDefinition", "ActivityDefinition", "Measure", "OperationDefinition"]

    static func isOlder(_ a: Element, than b: Element) -> Bool {
        let (dateA, dateB) = (a.string("date") ?? "", b.string("date") ?? "")
        if dateA != dateB { return dateA < dateB }
        return (a.string("version") ?? "").compare(b.string("version") ?? "", options: .numeric) == .orderedAscending
    }
}
