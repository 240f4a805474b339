import CareStore
import FHIR
import FHIRPath
import Foundation

/// An outcome rule's items (an Observation, say) become outcomes for the task whose group they
/// record, with a value per value rule (several for a panel's components).
struct OutcomeMapper: Sendable {
    let rule: MappingRule
    /// The resource's context (its item is the resource itself).
    let context: MappingContext
    /// Set when an outcome no task mapped so far records is left for `MappedOutcome.completed()`
    /// (most results an EHR holds match no task and are never stored); nil: always worked out here.
    var deferral: Deferral? = nil

    struct Deferral {
        /// The groups the patient's tasks mapped so far record.
        let recorded: Set<String>
        /// What the outcomes left unworked share: the rule, its file and the run's scope, kept once.
        let shared: OutcomeRuleScope
    }

    /// The outcomes of the resource; skipped items and failures are noted.
    func map(record: SourceRecord, notes: inout MappingNotes) -> [MappedOutcome] {
        var outcomes: [MappedOutcome] = []
        do {
            let items = rule.each == nil ? [context.item] : try context.evaluate(rule.each).compactMap(\.element)
            for (index, item) in items.enumerated() {
                let itemContext = context.with(item: item, index: index)
                if let outcome = try outcome(itemContext, record: record, notes: &notes) { outcomes.append(outcome) }
            }
        } catch {
            notes.failed(context.source, nil, rule.name, error)
        }
        return outcomes
    }

    func outcome(_ context: MappingContext, record: SourceRecord, notes: inout MappingNotes) throws(FHIRPathError) -> MappedOutcome? {
        if let skip = context.firstMatch(rule.skip, path: nil, notes: &notes) {
            notes.add(.skipped, context.source, nil, skip.reason ?? "a skip rule matched")
            return nil
        }
        let groups = try context.strings(rule.fields["task-group"])
        if let deferral, !groups.contains(where: deferral.recorded.contains) {
            let pending = PendingOutcome(shared: deferral.shared, source: context.source, item: context.item, variables: context.variables)
            return MappedOutcome(taskGroups: groups, pending: pending, source: record)
        }
        return try dated(context, groups: groups, record: record, notes: &notes)
    }

    /// The outcome with its date and values (nil, noted, when it has no date or no value).
    func dated(_ context: MappingContext, groups: [String], record: SourceRecord, notes: inout MappingNotes) throws(FHIRPathError) -> MappedOutcome? {
        guard let when = try context.date(rule.fields["date"]) else {
            notes.add(.error, context.source, nil, "no date for the outcome (\(rule.fields["date"]?.text ?? "date"))")
            return nil
        }
        var values: [OutcomeValue] = []
        for valueRule in rule.values {
            let valueItems = valueRule.each == nil ? [context.item] : try context.evaluate(valueRule.each).compactMap(\.element)
            for valueItem in valueItems {
                let valueContext = context.with(item: valueItem)
                let kind = try valueContext.string(valueRule.fields["kind"])
                let units = try valueContext.string(valueRule.fields["units"])
                for v in try valueContext.evaluate(valueRule.fields["value"]) {
                    if let value = outcomeValue(v, kind: kind, units: units) { values.append(value) }
                }
            }
        }
        if values.isEmpty {
            notes.add(.skipped, context.source, nil, "no value to record")
            return nil
        }
        return MappedOutcome(taskGroups: groups, date: when, values: values, source: record)
    }

    /// A FHIRPath value as a CareKit outcome value (Quantity, integer, decimal, boolean, string,
    /// date, or a CodeableConcept's text); nil for anything else.
    func outcomeValue(_ v: FHIRPathValue, kind: String?, units: String?) -> OutcomeValue? {
        let now = context.scope.now
        switch v.systemValue {
        case .quantity(let q):
            let unit = units ?? context.unitLabel(v, q)
            // A whole number within Int is an integer; any other (1e20 too) a double.
            let integer = q.value.scale == 0 ? q.value.integer : nil
            return OutcomeValue(integer.map { .integer($0) } ?? .double(q.value.double), kind: kind, units: unit, createdDate: now)
        case .integer(let i): return OutcomeValue(.integer(i), kind: kind, units: units, createdDate: now)
        case .decimal(let d): return OutcomeValue(.double(d.double), kind: kind, units: units, createdDate: now)
        case .boolean(let b): return OutcomeValue(.boolean(b), kind: kind, units: units, createdDate: now)
        case .string(let s): return OutcomeValue(.text(s), kind: kind, units: units, createdDate: now)
        case .dateTime(let d), .date(let d):
            return FHIRDateTime(d.description).map { OutcomeValue(.date($0.start(in: context.scope.timeZone)), kind: kind, units: units, createdDate: now) }
        case .element(let e) where e.typeName == "CodeableConcept":
            let text = e.string("text") ?? e.first("coding.display")?.value ?? e.first("coding.code")?.value
            return text.map { OutcomeValue(.text($0), kind: kind, units: units, createdDate: now) }
        default: return nil
        }
    }
}

/// An outcome rule with its file and the run's scope: one for all the outcomes of the rule left
/// unworked in a run (a population leaves hundreds of thousands).
final class OutcomeRuleScope: Sendable {
    let rule: MappingRule
    let file: MappingFile
    let scope: MappingScope

    init(rule: MappingRule, file: MappingFile, scope: MappingScope) {
        self.rule = rule
        self.file = file
        self.scope = scope
    }
}

/// An outcome item whose date and values are not worked out yet (see `OutcomeMapper.deferral`):
/// what its context needs beyond what the rule's outcomes share.
final class PendingOutcome: Sendable {
    let shared: OutcomeRuleScope
    let source: SourcedResource
    let item: Element
    let variables: [String: [FHIRPathValue]]

    init(shared: OutcomeRuleScope, source: SourcedResource, item: Element, variables: [String: [FHIRPathValue]]) {
        self.shared = shared
        self.source = source
        self.item = item
        self.variables = variables
    }

    var context: MappingContext {
        MappingContext(scope: shared.scope, source: source, file: shared.file, item: item, variables: variables)
    }
}
