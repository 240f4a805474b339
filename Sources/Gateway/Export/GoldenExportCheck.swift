import CareStore
import Diagnostics
import FHIR
import Foundation
import Mapping

/// What a mapping folder's golden tests make, sent back as the folder's export profiles ask
/// (`export-profiles:`) and checked against them, so that a mapping change that breaks US Core
/// fails `caregate validate` in CI with the element's path and the line of the mapping entry
/// that made it.
///
/// Each golden test's input is imported as the test imports it (the built-in files' tests, whose
/// inputs are the repository's samples, when the samples are there); every task it makes (but a
/// survey's, whose answers no test gives) gets one outcome shaped as its `observation-codes`
/// entry says (a value in its unit, one per component, else done); the outcomes are exported
/// through the mappings and the site's rules, claiming each target; each refusal is an error at
/// the entry of the task's code, else at the test.
///
/// ```swift
/// let findings = GoldenExportCheck(mappings: set, targets: [usCore], emptyStore: { try SQLiteCarePlanStore(inMemory: ()) }).run()
/// ```
public struct GoldenExportCheck: Sendable {
    /// The mappings, as the tests import and the export builds.
    public var mappings: MappingSet
    /// The targets what is built must meet.
    public var targets: [ProfileTarget]
    /// A new, empty store for each test (an in-memory one: `SQLiteCarePlanStore(inMemory: ())`).
    public var emptyStore: @Sendable () throws -> any CarePlanStore

    /// A check of `mappings`' golden tests against `targets`, each in a store from `emptyStore`.
    public init(mappings: MappingSet, targets: [ProfileTarget], emptyStore: @escaping @Sendable () throws -> any CarePlanStore) {
        self.mappings = mappings
        self.targets = targets
        self.emptyStore = emptyStore
    }

    /// One error per outcome a target refuses (and per test whose input cannot be imported).
    public func run() -> [Diagnostic] {
        let runner = GoldenTestRunner(mappings: mappings, emptyStore: emptyStore)
        var found: [Diagnostic] = []
        for file in mappings.files.values.sorted(by: { $0.path < $1.path }) {
            for test in file.tests {
                let input = MappingSource.resolve(test.input, from: test.file)
                guard MappingSource.exists(input) else {
                    // The built-in files' inputs are the repository's samples, not in the binary.
                    if !MappingSource.isBuiltIn(input) { found.append(Diagnostic(.error, test.location, "the golden test's input \(test.input) does not exist")) }
                    continue
                }
                do {
                    found += try check(input, test: test, runner: runner)
                } catch {
                    found.append(Diagnostic(.error, test.location, "the golden test's input \(test.input) cannot be exported: \(error)"))
                }
            }
        }
        return found
    }

    /// The refusals of what one test's input makes.
    func check(_ input: String, test: GoldenTest, runner: GoldenTestRunner) throws -> [Diagnostic] {
        let (store, _, zone, now) = try runner.imported(input, test: test)
        let builder = ObservationBuilder(mappings: mappings, timeZone: zone)
        var made: [UUID: CareTask] = [:]
        // After the occurrences the input already recorded (an imported Observation's).
        let recorded = Dictionary(try store.fetchOutcomes().map { ($0.taskUUID, $0.taskOccurrenceIndex) }, uniquingKeysWith: max)
        for task in try store.fetchTasks() where task.version.userInfo?[SurveyTask.questionnaireKey] == nil {
            let entry = builder.codeKey(of: task).flatMap { builder.codes[$0] }
            let occurrence = recorded[task.uuid].map { $0 + 1 } ?? 0
            let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: occurrence, values: Self.values(for: entry), effectiveDate: now)
            _ = try store.add([.outcome(outcome)])
            made[outcome.uuid] = task
        }
        var found: [Diagnostic] = []
        for target in targets {
            var export = OutcomeExport(store: store, builder: builder)
            export.profiles = target
            try export.forEach { item in
                guard let reason = item.refusalReason ?? item.refusal else { return }
                let task = made[item.outcomeVersion]
                let entry = task.flatMap(builder.codeKey).flatMap { mappings.sharedTables.origin(of: $0, in: "observation-codes") }
                found.append(Diagnostic(.error, entry ?? test.location,
                                        "\(reason) (the golden test \(test.input), task \(task?.id ?? "?"))"))
            }
        }
        return found
    }

    /// A made-up outcome's values: one per component, else one in the code's unit, else done.
    static func values(for entry: ObservationCode?) -> [OutcomeValue] {
        guard let entry else { return [OutcomeValue(.boolean(true))] }
        if !entry.components.isEmpty {
            return entry.components.keys.sorted().map { kind in OutcomeValue(.double(1), kind: kind, units: entry.components[kind]?.unit) }
        }
        if let unit = entry.code.unit { return [OutcomeValue(.double(1), units: unit)] }
        return [OutcomeValue(.boolean(true))]
    }
}
