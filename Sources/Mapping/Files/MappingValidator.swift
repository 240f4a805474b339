import Diagnostics
import FHIR
import FHIRPath
import Foundation

/// Checks a loaded mapping file without any data or server: every expression type-checked
/// against the R4 definitions for its context (the resource, or the items of a rule's `each`),
/// each field giving the type the store needs, required keys, task ids that would collide,
/// tables, golden-test files, and rules that can never apply.
public struct MappingValidator: Sendable {
    /// The folder mapping files may read inside (see `MappingLoader.root`).
    public var root: String?

    /// A validator; `include`, `extends` and test inputs must stay inside `root`.
    public init(root: String? = nil) {
        self.root = root
    }

    /// Loads and validates a file: every finding, in file order. A file of shared tables (no
    /// `resource`, only `tables`) is checked as tables.
    public func check(path: String) -> (file: MappingFile?, diagnostics: [Diagnostic]) {
        let (contents, loading) = MappingLoader(root: root).read(path)
        guard case .mapping(let file) = contents else { return (nil, loading.sorted(by: MappingValidator.order)) }
        let found = loading + (file.map { validate($0) } ?? [])
        return (file, found.sorted(by: MappingValidator.order))
    }

    static func order(_ a: Diagnostic, _ b: Diagnostic) -> Bool {
        a.location < b.location
    }

    /// What is wrong with a loaded file: unknown elements, expressions that do not type-check,
    /// missing keys.
    public func validate(_ file: MappingFile) -> [Diagnostic] {
        var run = Run(file: file, root: root)
        run.validate()
        return run.diagnostics.sorted(by: MappingValidator.order)
    }

    struct Run {
        let file: MappingFile
        let readRoot: String?
        var diagnostics: [Diagnostic] = []
        let model = ModelInfo.r4

        init(file: MappingFile, root: String? = nil) {
            self.file = file
            self.readRoot = root
        }

        mutating func error(_ at: SourceLocation, _ message: String) { diagnostics.append(Diagnostic(.error, at, message)) }
        mutating func warning(_ at: SourceLocation, _ message: String) { diagnostics.append(Diagnostic(.warning, at, message)) }

        var root: InferredType { InferredType(types: [.fhir(file.resource)], isCollection: false) }

        var checker: FHIRPathChecker {
            FHIRPathChecker(rootType: file.resource, variables: [
                "resource": root, "rootResource": .unknown, "index": InferredType(types: [.system("Integer")], isCollection: false),
                "plan": InferredType(types: [.system("String")], isCollection: false),
                "patient": InferredType(types: [.system("String")], isCollection: false),
            ])
        }

        mutating func validate() {
            guard model.resourceType(named: file.resource) != nil else { return }  // reported when loading
            let makesEntries = !file.tasks.isEmpty || !file.contacts.isEmpty || !file.outcomes.isEmpty || !file.carePlan.isEmpty
            if file.resource == "Patient" {
                if file.patientFields["id"] == nil { error(file.location, "a Patient mapping needs patient-fields with an 'id'") }
                if let patient = file.patient { error(patient.location, "'patient' is for other resources; a Patient mapping fills 'patient-fields'") }
            } else {
                if !file.patientFields.isEmpty { error(file.location, "'patient-fields' is for resource: Patient") }
                if makesEntries && file.patient == nil { error(file.location, "missing 'patient': the reference to the Patient these entries belong to") }
            }
            if let patient = file.patient { check(patient, .reference, context: root) }
            conditions(file.skip, context: root, kind: "skip")
            conditions(file.end, context: root, kind: "end")
            for (key, e) in file.patientFields.sorted(by: { $0.key < $1.key }) { check(e, MappingSchema.patientFields[key]!, context: root) }
            for (key, e) in file.carePlan.sorted(by: { $0.key < $1.key }) { check(e, MappingSchema.carePlan[key]!, context: root) }
            if !file.tasks.isEmpty && file.carePlan["id"] == nil && file.tasks.contains(where: { !$0.delegate }) {
                error(file.location, "tasks need a care plan: add 'care-plan' with an 'id' (used when the resource is not imported through a CarePlan)")
            }
            var names: [String: SourceLocation] = [:]
            for rule in file.allRules {
                let key = "\(rule.kind.rawValue)/\(rule.name)"
                if let first = names[key], !rule.name.isEmpty {
                    error(rule.location, "a second \(rule.kind.rawValue) rule named '\(rule.name)' (the first is at line \(first.line))")
                }
                names[key] = rule.location
                self.rule(rule, context: root)
            }
            taskIDs()
            tables()
            tests()
        }

        // MARK: Expressions

        /// Type-checks an expression on `context`, then its result against `required`; returns the result type.
        @discardableResult
        mutating func check(_ e: MappingExpression, _ required: FieldType, context: InferredType) -> InferredType {
            guard let compiled = e.compiled else { return .unknown }
            let (type, found) = checker.analyse(compiled, context: context)
            for d in found {
                let at = e.location(of: d.location)
                if d.severity == .error { error(at, d.message) } else { warning(at, d.message) }
            }
            if found.contains(where: { $0.severity == .error }) { return type }
            if let types = type.types, !types.isEmpty, !types.contains(where: { accepts(required, $0) }) {
                error(e.location, "this must give \(required.rawValue), not \(type)")
            }
            if let types = type.types, types.isEmpty, required != .any {
                warning(e.location, "this never gives a value")
            }
            return type
        }

        func accepts(_ required: FieldType, _ type: StaticType) -> Bool {
            let fhir: TypeDefinition? = if case .fhir(let n) = type { model.type(named: n) } else { nil }
            let system: String? = if case .system(let n) = type { n } else { nil }
            let primitive = fhir?.primitiveKind
            func derives(_ name: String) -> Bool { fhir.map { model.isType($0, derivedFrom: name) } ?? false }
            let stringLike = system == "String" || (primitive != nil && ![.boolean, .integer, .decimal, .positiveInt, .unsignedInt, .date, .dateTime, .instant, .time].contains(primitive!))
            switch required {
            case .string: return stringLike
            case .boolean: return system == "Boolean" || primitive == .boolean
            case .date: return system == "Date" || system == "DateTime" || [.date, .dateTime, .instant].contains(primitive)
            case .quantity: return system == "Quantity" || derives("Quantity")
            case .timing: return derives("Timing") || derives("Period") || stringLike || system == "DateTime" || [.dateTime, .instant].contains(primitive)
            case .humanName: return derives("HumanName")
            case .contactPoint: return derives("ContactPoint")
            case .address: return derives("Address")
            case .value:
                return system != nil || primitive != nil || derives("Quantity") || derives("CodeableConcept")
            case .reference: return derives("Reference") || fhir?.kind == .resource || stringLike
            case .questionnaire: return derives("Reference") || stringLike
            case .any: return true
            }
        }

        mutating func conditions(_ list: [MappingCondition], context: InferredType, kind: String) {
            var always: MappingCondition?
            for c in list {
                if let earlier = always {
                    warning(c.location, "never reached: the \(kind) rule at line \(earlier.location.line) applies to everything")
                }
                check(c.test, .boolean, context: context)
                switch c.test.text.trimmingCharacters(in: .whitespaces) {
                case "true": always = c
                case "false": warning(c.test.location, "this \(kind) rule never applies (its condition is false)")
                default: break
                }
                if c.reason == nil { warning(c.location, "a \(kind) rule without a 'reason': the report will not say why") }
            }
        }

        mutating func rule(_ rule: MappingRule, context: InferredType) {
            var itemType = context
            if let each = rule.each {
                let type = check(each, .any, context: context)
                itemType = InferredType(types: type.types, isCollection: false)
            }
            conditions(rule.skip, context: itemType, kind: "skip")
            conditions(rule.end, context: itemType, kind: "end")
            if rule.delegate {
                if rule.each == nil { error(rule.location, "a delegating rule needs 'each': the resources to map with their own files") }
                for key in rule.fields.keys.sorted() {
                    error(rule.fields[key]!.location, "'\(key)' has no effect in a delegating rule: the referenced resource's own mapping fills it")
                }
                return
            }
            for key in MappingSchema.required(for: rule.kind) where rule.fields[key] == nil {
                error(rule.location, "the \(rule.kind.rawValue) rule\(rule.name.isEmpty ? "" : " '\(rule.name)'") needs '\(key)'")
            }
            let schema = MappingSchema.fields(for: rule.kind)
            for (key, e) in rule.fields.sorted(by: { $0.key < $1.key }) { check(e, schema[key]!, context: itemType) }
            for (key, list) in rule.lists.sorted(by: { $0.key < $1.key }) {
                for e in list { check(e, MappingSchema.taskLists[key]!, context: itemType) }
            }
            for (key, lookup) in rule.lookups.sorted(by: { $0.key < $1.key }) {
                check(lookup.key, .string, context: itemType)
                let expected = MappingSchema.taskLookups[key] ?? key
                if lookup.table != expected {
                    error(lookup.location, "'\(key)' looks up the '\(expected)' table, not '\(lookup.table)'")
                } else if (expected == "healthkit" && file.tables.healthKit.isEmpty) || (expected == "task-codes" && file.tables.taskCodes.isEmpty) {
                    warning(lookup.location, "the '\(expected)' table is empty: include a file that defines it, or add entries")
                }
            }
            if rule.kind == .outcome {
                if rule.values.isEmpty { error(rule.location, "the outcome rule '\(rule.name)' needs 'values'") }
                for value in rule.values { self.rule(value, context: itemType) }
            }
        }

        // MARK: Ids

        /// Whether an expression refers to the item it runs on (a relative path, `$this`, `%index`).
        static func dependsOnItem(_ node: ExpressionNode) -> Bool {
            switch node.kind {
            case .member(nil, _), .this, .index: return true
            case .variable(let name): return name == "index"
            case .function(nil, let name, let arguments): return name != "iif" || arguments.contains(where: dependsOnItem)
            case .member(let base?, _): return dependsOnItem(base)
            case .function(let base?, _, let arguments): return dependsOnItem(base) || arguments.contains(where: dependsOnItem)
            case .indexer(let base, let index): return dependsOnItem(base) || dependsOnItem(index)
            case .unary(_, let operand), .typeTest(_, let operand, _): return dependsOnItem(operand)
            case .binary(_, let lhs, let rhs): return dependsOnItem(lhs) || dependsOnItem(rhs)
            case .literal, .emptyCollection, .total: return false
            }
        }

        /// Whether an expression refers to the resource (`%resource`, or a path from it at the top level).
        static func dependsOnResource(_ node: ExpressionNode) -> Bool {
            switch node.kind {
            case .variable(let name): return name == "resource" || name == "rootResource"
            case .member(nil, _), .this: return true
            case .member(let base?, _): return dependsOnResource(base)
            case .function(let base, _, let arguments): return (base.map(dependsOnResource) ?? false) || arguments.contains(where: dependsOnResource)
            case .indexer(let base, let index): return dependsOnResource(base) || dependsOnResource(index)
            case .unary(_, let operand), .typeTest(_, let operand, _): return dependsOnResource(operand)
            case .binary(_, let lhs, let rhs): return dependsOnResource(lhs) || dependsOnResource(rhs)
            default: return false
            }
        }

        mutating func taskIDs() {
            var seen: [String: MappingRule] = [:]
            for rule in file.tasks + file.contacts where !rule.delegate {
                guard let id = rule.fields["id"], let compiled = id.compiled else { continue }
                let text = id.text.replacingOccurrences(of: " ", with: "")
                if let other = seen[text], other.kind == rule.kind {
                    error(id.location, "the same id expression as the \(rule.kind.rawValue) rule '\(other.name)' (line \(other.location.line)): their \(rule.kind.rawValue)s would collide")
                }
                seen[text] = rule
                if !Run.dependsOnResource(compiled.root) {
                    error(id.location, "this id does not depend on the resource: every \(file.resource) would make the same \(rule.kind.rawValue) (use %resource.id)")
                } else if let each = rule.each?.compiled, checker.analyse(each, context: root).type.isCollection, !Run.dependsOnItem(compiled.root) {
                    error(id.location, "this id does not depend on the item: every item of 'each' would get the same id (use a path from the item, or %index)")
                }
            }
        }

        // MARK: Tables and tests

        mutating func tables() {
            let usesTiming = file.tasks.contains { $0.fields["timing"] != nil }
            if usesTiming, let codes = model.type(named: "Timing.repeat")?.element(named: "when")?.binding?.codes {
                let missing = codes.filter { file.tables.timing.eventTimes[$0] == nil }
                if !missing.isEmpty {
                    warning(file.location, "the event-times table has no clock time for \(missing.joined(separator: ", ")): Timings with these 'when' codes will be reported, not scheduled")
                }
            }
        }

        /// A golden test's missing file is a warning here: it only matters to `caregate test`
        /// (which reports it as a failure), never to import, export or push. The built-in files'
        /// tests read CareGate's own samples, which only its repository holds: not looked for.
        mutating func tests() {
            for test in file.tests where !MappingSource.isInsideFolder(MappingSource.resolve(test.expect, from: test.file), of: test.file) {
                error(test.location, "the expected snapshot '\(test.expect)' is outside the mapping file's folder; caregate test --update writes it, so it must stay inside")
            }
            for test in file.tests {
                let input = MappingSource.resolve(test.input, from: test.file)
                if let readRoot, !MappingSource.isInside(input, root: readRoot) {
                    error(test.location, "the test input '\(test.input)' is outside the mapping root \(readRoot); mapping files read only inside it (--mapping-root widens it)")
                }
            }
            for test in file.tests where !MappingSource.isBuiltIn(test.file) {
                for path in [test.input, test.expect] where !MappingSource.exists(MappingSource.resolve(path, from: test.file)) {
                    warning(test.location, "the test file '\(path)' does not exist (caregate test will fail until it does)")
                }
            }
        }
    }
}
