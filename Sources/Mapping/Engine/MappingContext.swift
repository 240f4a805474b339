import CareStore
import FHIR
import FHIRPath
import Foundation

/// What every rule of one mapping run shares: the import time and the patients' time zone, and
/// every resource read by `Type/id`, so references between files resolve. A class: every
/// context of the run holds it, and a context is copied for each item it maps.
final class MappingScope: Sendable {
    let now: Date
    let timeZone: TimeZone
    /// Every resource by `Type/id`.
    let resources: [String: Element]
    /// Where each resource was read from, by `Type/id`.
    let origins: [String: String]
    /// CareKit's calendar (Gregorian, weeks from Sunday) in the patients' time zone.
    let calendar: Calendar
    /// `resolve()`, compiled once per run (not a static: it goes when the run does).
    let resolveExpression = try! FHIRPathExpression("resolve()")
    /// The forms survey tasks are found in: the run's Questionnaires, then the engine's.
    let questionnaires: QuestionnaireCatalog

    init(now: Date, timeZone: TimeZone, sources: [SourcedResource], questionnaires: QuestionnaireCatalog = QuestionnaireCatalog()) {
        self.now = now
        self.timeZone = timeZone
        var resources: [String: Element] = [:]
        var origins: [String: String] = [:]
        for source in sources {
            guard let key = source.key else { continue }
            resources[key] = resources[key] ?? source.resource
            origins[key] = origins[key] ?? source.origin
        }
        self.resources = resources
        self.origins = origins
        calendar = Schedule.calendar(timeZone)
        var catalog = QuestionnaireCatalog(sources)
        catalog.merge(questionnaires)
        self.questionnaires = catalog
    }

    /// The start of the import day: where new versions take effect.
    var today: Date { calendar.startOfDay(for: now) }

    /// A resource a reference names, by its last `Type/id` (version and base ignored).
    func resource(named reference: String) -> Element? {
        if let found = resources[reference] { return found }
        return Element.relativeReference(of: reference).flatMap { resources[$0] }
    }
}

/// Where a rule's expressions are evaluated: the item (the resource, or one item of `each`),
/// the resource and Bundle it came from, the rule's variables (`%patient`, `%plan`, `%index`)
/// and the file the rule belongs to (its tables).
struct MappingContext {
    let scope: MappingScope
    let source: SourcedResource
    let file: MappingFile
    var item: Element
    var variables: [String: [FHIRPathValue]]

    /// The same resource with another item (and index).
    func with(item: Element, index: Int? = nil) -> MappingContext {
        var context = self
        context.item = item
        if let index { context.variables["index"] = [.integer(index)] }
        return context
    }

    var environment: EvaluationEnvironment {
        var environment = EvaluationEnvironment(context: [.element(item)], resource: source.resource, rootResource: source.container ?? source.resource,
                                                variables: variables)
        environment.bundleIndex = source.index
        environment.now = scope.now
        let scope = self.scope
        environment.resolveReference = { scope.resource(named: $0) }
        return environment
    }

    func evaluate(_ e: MappingExpression?) throws(FHIRPathError) -> [FHIRPathValue] {
        guard let compiled = e?.compiled else { return [] }
        return try compiled.evaluate(in: environment)
    }

    /// The first value as text (nil for nothing or an empty string).
    func string(_ e: MappingExpression?) throws(FHIRPathError) -> String? {
        guard let first = try evaluate(e).first else { return nil }
        if case .string(let s) = first.systemValue { return s.isEmpty ? nil : s }
        return first.element?.value ?? first.systemValue.literalText
    }

    func strings(_ e: MappingExpression?) throws(FHIRPathError) -> [String] {
        try evaluate(e).compactMap(text)
    }

    /// A value as text: a string, or a primitive element's value.
    func text(_ value: FHIRPathValue) -> String? {
        if case .string(let s) = value.systemValue { return s }
        return value.element?.value
    }

    /// nil when there is no expression; false for an empty result; true for anything but `false`.
    func boolean(_ e: MappingExpression?) throws(FHIRPathError) -> Bool? {
        guard let e else { return nil }
        guard let first = try evaluate(e).first else { return false }
        if case .boolean(let b) = first.systemValue { return b }
        return true
    }

    /// A date or dateTime as the instant it starts, in the patients' zone.
    func date(_ e: MappingExpression?) throws(FHIRPathError) -> Date? {
        guard let first = try evaluate(e).first else { return nil }
        switch first.systemValue {
        case .date(let d), .dateTime(let d): return FHIRDateTime(d.description)?.start(in: scope.timeZone)
        default: return nil
        }
    }

    /// The resource a Reference (the item, or `reference`) names: contained, in the Bundle, or
    /// in another imported file.
    func resolve(_ reference: FHIRPathValue? = nil) -> Element? {
        var environment = self.environment
        if let reference { environment.context = [reference] }
        return (try? scope.resolveExpression.evaluate(in: environment))?.first?.element
    }

    /// The first of `rules` whose test holds for the item; a test that fails on this data is
    /// reported and counts as not holding.
    func firstMatch(_ rules: [MappingCondition], path: String?, notes: inout MappingNotes) -> MappingCondition? {
        for rule in rules {
            do {
                if try boolean(rule.test) == true { return rule }
            } catch {
                notes.failed(source, path, "the condition at \(rule.location)", error)
            }
        }
        return nil
    }

    /// The label for a unit: the file's `units` table for the UCUM code, else the Quantity's own
    /// `unit` text, else the code.
    func unitLabel(_ value: FHIRPathValue, _ q: FHIRPathQuantity) -> String {
        file.tables.units[q.unit] ?? value.element.flatMap { $0.string("unit") } ?? q.unit
    }
}

extension SourcedResource {
    /// The resource's identity across files: `Type/id`.
    var key: String? { resource.relativeReference }

    /// `Type/id`, or the element's name for a resource without an id (messages).
    var reference: String { key ?? resource.name }
}

/// The notes of a run, each naming its resource and where it was read.
struct MappingNotes {
    var all: [ImportNote] = []

    mutating func add(_ kind: ImportNote.Kind, _ source: SourcedResource, _ path: String?, _ message: String) {
        all.append(ImportNote(kind: kind, resource: source.reference, path: path, origin: source.origin, message: message))
    }

    /// An expression that failed on this data.
    mutating func failed(_ source: SourcedResource, _ path: String?, _ what: String, _ error: FHIRPathError) {
        add(.error, source, path, "\(what): \(error.message) (expression position \(error.position))")
    }
}
