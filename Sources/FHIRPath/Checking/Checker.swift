import Diagnostics
import FHIR

/// A type FHIRPath knows statically: a FHIR type (by name; backbone elements by path, such as
/// `CarePlan.activity`), a System type (`String`, `Boolean`...), or unknown (`resolve()`, `children()`).
public enum StaticType: Hashable, Sendable, CustomStringConvertible {
    /// A FHIR type, by name.
    case fhir(String)
    /// A System type, by name (`String`, `Boolean`).
    case system(String)

    public var description: String {
        switch self {
        case .fhir(let name): name
        case .system(let name): "System.\(name)"
        }
    }
}

/// What the checker knows of a collection before any data is seen.
public struct InferredType: Sendable, CustomStringConvertible, Equatable {
    /// The possible item types; nil when unknown (anything goes).
    public var types: Set<StaticType>?
    /// Whether the collection may hold more than one item.
    public var isCollection: Bool
    /// False after `children()` and `descendants()`, whose order is not defined.
    public var isOrdered = true

    /// A type.
    public init(types: Set<StaticType>?, isCollection: Bool, isOrdered: Bool = true) {
        self.types = types
        self.isCollection = isCollection
        self.isOrdered = isOrdered
    }

    /// Anything: no type known.
    public static let unknown = InferredType(types: nil, isCollection: true)
    /// The empty collection.
    public static let empty = InferredType(types: [], isCollection: false)
    static func system(_ name: String) -> InferredType { InferredType(types: [.system(name)], isCollection: false) }
    static let boolean = system("Boolean")
    static let integer = system("Integer")
    static let string = system("String")

    public var description: String {
        guard let types else { return "unknown" }
        if types.isEmpty { return "empty" }
        let names = types.map(\.description).sorted().joined(separator: " | ")
        return isCollection ? "collection of \(names)" : names
    }
}

/// Types an expression against the R4 definitions for a root type, before any data is seen:
/// unknown elements (with a suggestion), choice types, functions applied to the wrong types, and
/// single-item functions given collections (a warning). The mapping validator runs it on every
/// expression of a mapping file.
///
/// ```swift
/// let checker = FHIRPathChecker(rootType: "CarePlan")
/// checker.check(try FHIRPathExpression("activty.detail"))
/// // [1:1: error: 'activty' is not an element of CarePlan; did you mean 'activity'?]
/// ```
public struct FHIRPathChecker: Sendable {
    /// The type expressions are checked against (a resource type).
    public let rootType: String
    /// Types of user variables (`%dose`), without the `%`; unknown variables are errors.
    public var variables: [String: InferredType]
    /// Strict FHIRPath (the default): FHIR's JSON spelling of a choice (`scheduledTiming`) is an
    /// error with the FHIRPath spelling as its fix, as the R4 specification has it. When false it
    /// is understood as `scheduled.ofType(Timing)` (the evaluator selects it either way).
    public var strict: Bool

    /// A checker for expressions on `rootType`; `strict` makes unknown elements errors instead of
    /// warnings.
    public init(rootType: String, variables: [String: InferredType] = [:], strict: Bool = true) {
        self.rootType = rootType
        self.variables = variables
        self.strict = strict
    }

    /// The findings for `expression`, errors first.
    public func check(_ expression: FHIRPathExpression) -> [Diagnostic] {
        analyse(expression, context: InferredType(types: [.fhir(rootType)], isCollection: false)).diagnostics
    }

    /// The type of the whole expression's result.
    public func resultType(_ expression: FHIRPathExpression) -> InferredType {
        analyse(expression, context: InferredType(types: [.fhir(rootType)], isCollection: false)).type
    }

    /// Findings and result type for an expression evaluated on items of `context` (an element
    /// inside the root resource, such as `CarePlan.activity`; `%resource` stays the root type).
    public func analyse(_ expression: FHIRPathExpression, context: InferredType) -> (type: InferredType, diagnostics: [Diagnostic]) {
        var run = Run(checker: self)
        let type = run.infer(expression.root, input: context, this: context)
        var sorted = run.diagnostics.sorted { ($0.severity, $0.location) < ($1.severity, $1.location) }
        for (severity, count) in [(Diagnostic.Severity.error, run.unshownErrors), (.warning, run.unshownWarnings)] where count > 0 {
            guard let last = sorted.lastIndex(where: { $0.severity == severity }) else { continue }
            sorted.insert(Diagnostic(severity, sorted[last].location, "and \(count) more \(severity == .error ? "error" : "warning")\(count == 1 ? "" : "s") not shown"), at: last + 1)
        }
        return (type, sorted)
    }

    /// Findings of one kind past this many are counted, not written out: an expression with
    /// thousands of faults is checked in time proportional to its length, not to its messages.
    static let mostShown = 50

    struct Run {
        let checker: FHIRPathChecker
        var diagnostics: [Diagnostic] = []
        var shownErrors = 0
        var shownWarnings = 0
        var unshownErrors = 0
        var unshownWarnings = 0
        let model = ModelInfo.r4

        mutating func error(_ node: ExpressionNode, _ message: @autoclosure () -> String) {
            guard shownErrors < FHIRPathChecker.mostShown else { unshownErrors += 1; return }
            shownErrors += 1
            diagnostics.append(Diagnostic(.error, node.position, message()))
        }

        mutating func warning(_ node: ExpressionNode, _ message: @autoclosure () -> String) {
            guard shownWarnings < FHIRPathChecker.mostShown else { unshownWarnings += 1; return }
            shownWarnings += 1
            diagnostics.append(Diagnostic(.warning, node.position, message()))
        }

        func isStringLike(_ type: StaticType) -> Bool {
            switch type {
            case .system(let n): return n == "String"
            case .fhir(let n):
                guard let def = model.type(named: n), def.kind == .primitive else { return false }
                return ![.boolean, .integer, .decimal, .positiveInt, .unsignedInt, .date, .dateTime, .instant, .time].contains(def.primitiveKind)
            }
        }

        func isNumeric(_ type: StaticType) -> Bool {
            switch type {
            case .system(let n): return ["Integer", "Decimal", "Quantity"].contains(n)
            case .fhir(let n):
                guard let def = model.type(named: n) else { return false }
                if def.kind == .primitive { return [.integer, .decimal, .positiveInt, .unsignedInt].contains(def.primitiveKind) }
                return model.isType(def, derivedFrom: "Quantity")
            }
        }

        func isBooleanLike(_ type: StaticType) -> Bool {
            type == .system("Boolean") || type == .fhir("boolean")
        }

        /// Whether a type is (or derives from) the named type.
        func conforms(_ type: StaticType, to target: TypeSpecifier) -> Bool {
            let resolved = FHIRPathValue.resolve(target)
            switch type {
            case .system(let n): return resolved.namespace == "System" && (n == resolved.name || resolved.name == "Any")
            case .fhir(let n):
                guard resolved.namespace == "FHIR", let def = model.type(named: n) else { return false }
                if def.kind == .backbone { return ["BackboneElement", "Element", "Base"].contains(resolved.name) }
                return model.isType(def, derivedFrom: resolved.name)
            }
        }

        func knownType(_ target: TypeSpecifier) -> Bool {
            let resolved = FHIRPathValue.resolve(target)
            if resolved.namespace == "System" { return FHIRPathValue.systemTypes.contains(resolved.name) }
            return model.type(named: resolved.name) != nil || ["BackboneElement", "Element", "Base"].contains(resolved.name)
        }

        /// Suggestions found so far in this run, by scope and name: an expression naming one
        /// unknown type fifty times looks for its closest match once.
        final class Suggestions {
            var found: [String: String?] = [:]
        }
        let suggestions = Suggestions()

        /// The closest of `candidates` to `name`, when close enough to be a likely typo.
        func suggestion(for name: String, scope: String, in candidates: @autoclosure () -> [String]) -> String? {
            let key = scope + "\u{0}" + name
            if let known = suggestions.found[key] { return known }
            let best = Suggestion.closest(to: name, among: candidates())
            suggestions.found[key] = best
            return best
        }

        mutating func member(_ node: ExpressionNode, _ base: InferredType, _ name: String, isPathStart: Bool) -> InferredType {
            guard let types = base.types else { return .unknown }
            if types.isEmpty { return .empty }
            var result: Set<StaticType> = []
            var collection = base.isCollection
            var candidates: [String] = []
            var owners: [String] = []
            for type in types {
                guard case .fhir(let typeName) = type, let def = model.type(named: typeName) else {
                    owners.append(type.description)
                    continue
                }
                if isPathStart, def.kind == .resource, typeName == name || name == "Resource" || name == "DomainResource" {
                    result.insert(type)
                    continue
                }
                owners.append(typeName)
                if let element = def.element(named: name) {
                    for t in element.typeNames { result.insert(.fhir(t)) }
                    if element.isRepeating { collection = true }
                    continue
                }
                if !checker.strict, let (element, typeIndex) = def.property(named: name), element.isChoice {
                    result.insert(.fhir(model.types[Int(typeIndex)].name))
                    if element.isRepeating { collection = true }
                    continue
                }
                for element in def.elements {
                    candidates.append(element.name)
                    if element.isChoice { candidates += element.typeNames.map { element.name + ElementDefinition.choiceSuffix(for: $0) } }
                }
            }
            if result.isEmpty {
                // Written out (suggestion and all) only when shown: see `mostShown`.
                let message = { [self] () -> String in
                    let owner = owners.sorted().joined(separator: " or ")
                    if isPathStart, model.resourceType(named: name) != nil { return "the expression starts from \(owner), not \(name)" }
                    if let choice = choiceName(name, in: types) { return "'\(name)' is not an element of \(owner); write \(choice)" }
                    if let best = suggestion(for: name, scope: owner, in: candidates) { return "'\(name)' is not an element of \(owner); did you mean '\(best)'?" }
                    return "'\(name)' is not an element of \(owner)"
                }
                error(node, message())
                return .empty
            }
            return InferredType(types: result, isCollection: collection)
        }

        /// `valueQuantity` on a type with `value[x]`: the FHIRPath spelling.
        func choiceName(_ name: String, in types: Set<StaticType>) -> String? {
            for case .fhir(let typeName) in types {
                guard let def = model.type(named: typeName) else { continue }
                for element in def.elements where element.isChoice {
                    for t in element.typeNames where element.name + ElementDefinition.choiceSuffix(for: t) == name {
                        return "\(element.name).ofType(\(t))"
                    }
                }
            }
            return nil
        }

        mutating func infer(_ node: ExpressionNode, input: InferredType, this: InferredType) -> InferredType {
            switch node.kind {
            case .literal(let value):
                return .system(value.typeInfo.name)
            case .emptyCollection:
                return .empty
            case .this:
                return this
            case .index:
                return .integer
            case .total:
                return .unknown
            case .variable(let name):
                if let type = checker.variables[name] { return type }
                switch name {
                case "context", "resource", "rootResource": return InferredType(types: [.fhir(checker.rootType)], isCollection: false)
                case "ucum", "sct", "loinc": return .string
                default:
                    if name.hasPrefix("vs-") || name.hasPrefix("ext-") { return .string }
                    error(node, "unknown variable %\(name)")
                    return .unknown
                }
            case .member(let base, let name):
                let baseType = base.map { infer($0, input: input, this: this) } ?? input
                var result = member(node, baseType, name, isPathStart: base == nil)
                result.isOrdered = baseType.isOrdered
                return result
            case .indexer(let base, let index):
                let baseType = infer(base, input: input, this: this)
                let indexType = infer(index, input: input, this: this)
                if let types = indexType.types, !types.isEmpty, !types.contains(.system("Integer")) && !types.contains(.fhir("integer")) {
                    error(index, "an index must be an integer, not \(indexType)")
                }
                if !baseType.isOrdered { error(node, "indexing a collection whose order is not defined (from children() or descendants())") }
                return InferredType(types: baseType.types, isCollection: false)
            case .unary(_, let operand):
                let t = infer(operand, input: input, this: this)
                if let types = t.types, !types.isEmpty, !types.allSatisfy(isNumeric) {
                    error(node, "unary minus works on numbers and quantities, not \(t)")
                }
                return t
            case .typeTest(let op, let operand, let type):
                let t = infer(operand, input: input, this: this)
                return typeOperation(node, op == .is ? "is" : "as", t, type)
            case .binary(let op, let lhs, let rhs):
                let a = infer(lhs, input: input, this: this)
                let b = infer(rhs, input: input, this: this)
                return binary(node, op, a, b)
            case .function(let base, let name, let arguments):
                let baseType = base.map { infer($0, input: input, this: this) } ?? input
                return function(node, name, baseType, arguments, context: input, this: this)
            }
        }

        mutating func typeOperation(_ node: ExpressionNode, _ op: String, _ input: InferredType, _ type: TypeSpecifier) -> InferredType {
            guard knownType(type) else {
                // The hint is looked for only when the finding is written out (see `mostShown`).
                let hint = { [self] in
                    suggestion(for: type.name, scope: "types", in: model.types.filter { $0.kind != .backbone }.map(\.name) + Array(FHIRPathValue.systemTypes))
                        .map { "; did you mean '\($0)'?" } ?? ""
                }
                // `System.Patient` is merely never true; an unqualified unknown name is a mistake.
                if type.namespace == nil { error(node, "unknown type '\(type)'\(hint())") } else { warning(node, "no type '\(type)'\(hint())") }
                return op == "is" ? .boolean : .empty
            }
            if op == "is" { return .boolean }
            let resolved = FHIRPathValue.resolve(type)
            let target: StaticType = resolved.namespace == "System" ? .system(resolved.name) : .fhir(resolved.name)
            if let types = input.types, !types.isEmpty, !types.contains(where: { conforms($0, to: type) }) {
                let subtypes = types.contains { t in
                    if case .fhir(let n) = t, let def = model.type(named: n), let targetDef = model.type(named: resolved.name) {
                        return model.isType(targetDef, derivedFrom: def.name)
                    }
                    return false
                }
                if !subtypes {
                    warning(node, "\(input) can never be \(type): the result is always empty")
                    return .empty
                }
            }
            return InferredType(types: [target], isCollection: op == "ofType" ? input.isCollection : false)
        }

        mutating func binary(_ node: ExpressionNode, _ op: BinaryOperator, _ a: InferredType, _ b: InferredType) -> InferredType {
            switch op {
            case .and, .or, .xor, .implies, .equal, .notEqual, .equivalent, .notEquivalent, .in, .contains,
                 .lessThan, .greaterThan, .lessOrEqual, .greaterOrEqual:
                return .boolean
            case .union:
                guard let x = a.types, let y = b.types else { return .unknown }
                return InferredType(types: x.union(y), isCollection: true)
            case .concatenate:
                return .string
            case .divide:
                if a.types?.contains(.system("Quantity")) == true { return .system("Quantity") }
                return .system("Decimal")
            case .div, .mod, .add, .subtract, .multiply:
                guard let x = a.types, let y = b.types else { return .unknown }
                if x.isEmpty || y.isEmpty { return .empty }
                let temporal: Set<StaticType> = [.system("Date"), .system("DateTime"), .system("Time"), .fhir("date"), .fhir("dateTime"), .fhir("time"), .fhir("instant")]
                if op == .add || op == .subtract, x.isSubset(of: temporal),
                   !y.contains(where: { $0 == .system("Quantity") || (model.type(named: $0.description).map { model.isType($0, derivedFrom: "Quantity") } ?? false) }) {
                    error(node, "a date or time takes a time quantity (`+ 7 days`), not \(b)")
                    return .unknown
                }
                if x.contains(where: isStringLike), op == .add { return .string }
                if let first = x.first, x.count == 1, [StaticType.system("Integer"), .fhir("integer")].contains(first),
                   y.allSatisfy({ [StaticType.system("Integer"), .fhir("integer")].contains($0) }) {
                    return .integer
                }
                if x.contains(where: { [.system("Date"), .system("DateTime"), .system("Time"), .fhir("date"), .fhir("dateTime"), .fhir("time"), .fhir("instant")].contains($0) }) {
                    return InferredType(types: x, isCollection: false)
                }
                if x.contains(.system("Quantity")) || y.contains(.system("Quantity")) { return .system("Quantity") }
                return .system("Decimal")
            }
        }

        /// Functions that expect at most one input item, and what they do with its type.
        static let singleInput: Set<String> = [
            "iif", "toBoolean", "convertsToBoolean", "toInteger", "convertsToInteger", "toDate", "convertsToDate",
            "toDateTime", "convertsToDateTime", "toDecimal", "convertsToDecimal", "toQuantity", "convertsToQuantity",
            "toString", "convertsToString", "toTime", "convertsToTime", "indexOf", "substring", "startsWith", "endsWith",
            "contains", "upper", "lower", "replace", "matches", "matchesFull", "replaceMatches", "length", "toChars",
            "trim", "split", "encode", "decode", "escape", "unescape", "abs", "ceiling", "exp", "floor", "ln", "log",
            "power", "round", "sqrt", "truncate", "not", "is", "as", "hasValue", "getValue",
        ]

        static let stringFunctions: Set<String> = [
            "indexOf", "substring", "startsWith", "endsWith", "contains", "upper", "lower", "replace", "matches",
            "matchesFull", "replaceMatches", "length", "toChars", "trim", "split", "encode", "decode", "escape", "unescape",
        ]

        static let mathFunctions: Set<String> = ["abs", "ceiling", "exp", "floor", "ln", "log", "power", "round", "sqrt", "truncate"]

        mutating func function(_ node: ExpressionNode, _ name: String, _ input: InferredType, _ arguments: [ExpressionNode],
                               context: InferredType, this: InferredType) -> InferredType {
            guard let arity = Functions.arity[name] else {
                let hint = { [self] in suggestion(for: name, scope: "()", in: Array(Functions.arity.keys)).map { "; did you mean '\($0)()'?" } ?? "" }
                error(node, "unknown function \(name)()\(hint())")
                return .unknown
            }
            guard arity.contains(arguments.count) else {
                let expected = arity.lowerBound == arity.upperBound ? "\(arity.lowerBound)" : "\(arity.lowerBound) to \(arity.upperBound)"
                error(node, "\(name)() takes \(expected) argument\(arity.upperBound == 1 ? "" : "s"), found \(arguments.count)")
                return .unknown
            }
            let item = InferredType(types: input.types, isCollection: false)
            /// Lambda arguments see one input item as `$this`; ordinary ones see the call's context.
            func lambda(_ i: Int) -> InferredType { infer(arguments[i], input: item, this: item) }
            func plain(_ i: Int) -> InferredType { infer(arguments[i], input: context, this: this) }

            if Run.singleInput.contains(name), input.isCollection {
                warning(node, "\(name)() expects one item, but its input can hold several (\(input))")
            }
            if Run.stringFunctions.contains(name), let types = input.types, !types.isEmpty, !types.contains(where: isStringLike) {
                error(node, "\(name)() works on strings, not \(InferredType(types: types, isCollection: false))")
            }
            if Run.mathFunctions.contains(name), let types = input.types, !types.isEmpty, !types.contains(where: isNumeric) {
                error(node, "\(name)() works on numbers, not \(InferredType(types: types, isCollection: false))")
            }
            if ["skip", "take", "first", "last", "tail", "single"].contains(name), !input.isOrdered {
                error(node, "\(name)() on a collection whose order is not defined (from children() or descendants())")
            }
            switch name {
            case "empty", "exists", "all", "allTrue", "anyTrue", "allFalse", "anyFalse", "subsetOf", "supersetOf", "isDistinct",
                 "hasValue", "startsWith", "endsWith", "contains", "matches", "matchesFull", "comparable", "conformsTo",
                 "memberOf", "subsumes", "subsumedBy", "htmlChecks":
                for i in arguments.indices { _ = ["exists", "all"].contains(name) ? lambda(i) : plain(i) }
                if name.hasPrefix("convertsTo") { return .boolean }
                return .boolean
            case "not":
                if let types = input.types, !types.isEmpty, !types.contains(where: isBooleanLike) {
                    warning(node, "not() on \(input) is always false for a single non-boolean item")
                }
                return .boolean
            case "count", "indexOf", "length", "precision":
                for i in arguments.indices { _ = plain(i) }
                return .integer
            case "where":
                let criteria = lambda(0)
                if let types = criteria.types, !types.isEmpty, !types.contains(where: isBooleanLike) {
                    error(arguments[0], "the criteria of where() must be boolean, not \(criteria)")
                }
                return input
            case "select":
                let projected = lambda(0)
                return InferredType(types: projected.types, isCollection: input.isCollection || projected.isCollection)
            case "repeat":
                _ = lambda(0)
                return .unknown
            case "aggregate":
                for i in arguments.indices { _ = i == 0 ? lambda(i) : plain(i) }
                return .unknown
            case "ofType", "as", "is":
                guard let type = Functions.typeSpecifier(arguments[0]) else {
                    error(arguments[0], "\(name)() expects a type name")
                    return .unknown
                }
                var result = typeOperation(node, name, input, type)
                if name == "ofType" { result.isCollection = input.isCollection }
                return result
            case "distinct", "trace", "intersect", "exclude":
                for i in arguments.indices { _ = name == "trace" && i == 1 ? lambda(i) : plain(i) }
                return input
            case "first", "last", "single":
                return item
            case "tail", "skip", "take", "sort":
                for argument in arguments {
                    if name == "sort" {
                        // A sort key may carry a minus for descending order, whatever its type.
                        var key = argument
                        if case .unary(.minus, let inner) = argument.kind { key = inner }
                        _ = infer(key, input: item, this: item)
                    } else {
                        _ = infer(argument, input: context, this: this)
                    }
                }
                return InferredType(types: input.types, isCollection: true, isOrdered: input.isOrdered)
            case "union", "combine":
                let other = plain(0)
                guard let x = input.types, let y = other.types else { return .unknown }
                return InferredType(types: x.union(y), isCollection: true)
            case "iif":
                let condition = infer(arguments[0], input: context, this: this)
                if let types = condition.types, !types.isEmpty, !types.contains(where: isBooleanLike) {
                    error(arguments[0], "the criterion of iif() must be boolean, not \(condition)")
                } else if condition.isCollection {
                    warning(arguments[0], "the criterion of iif() can hold several items")
                }
                let branches = arguments.dropFirst().map { infer($0, input: context, this: this) }
                if branches.contains(where: { $0.types == nil }) { return .unknown }
                return InferredType(types: branches.reduce(into: Set<StaticType>()) { $0.formUnion($1.types!) },
                                    isCollection: branches.contains { $0.isCollection })
            case "toBoolean": return .boolean
            case "toInteger": return .integer
            case "toDecimal": return .system("Decimal")
            case "toString", "upper", "lower", "replace", "replaceMatches", "substring", "trim", "encode", "decode", "escape", "unescape", "join":
                for i in arguments.indices { _ = plain(i) }
                return .string
            case "toChars", "split":
                for i in arguments.indices { _ = plain(i) }
                return InferredType(types: [.system("String")], isCollection: true)
            case "toDate": return .system("Date")
            case "toDateTime", "now": return .system("DateTime")
            case "today": return .system("Date")
            case "toTime", "timeOfDay": return .system("Time")
            case "toQuantity": return .system("Quantity")
            case let n where n.hasPrefix("convertsTo"): return .boolean
            case "abs", "round", "exp", "ln", "log", "power", "sqrt":
                for i in arguments.indices { _ = plain(i) }
                if name == "abs" || name == "power" { return InferredType(types: input.types, isCollection: false) }
                return .system("Decimal")
            case "ceiling", "floor", "truncate": return .integer
            case "children", "descendants":
                return InferredType(types: nil, isCollection: true, isOrdered: false)
            case "extension":
                _ = plain(0)
                return InferredType(types: [.fhir("Extension")], isCollection: true)
            case "getValue":
                return .unknown
            case "ordinal", "weight":
                return InferredType(types: [.system("Decimal")], isCollection: true)
            case "sum":
                return InferredType(types: input.types?.contains(.system("Decimal")) == false && input.types?.isEmpty == false
                                    && input.types!.allSatisfy { $0 == .system("Integer") || $0 == .fhir("integer") } ? [.system("Integer")] : nil,
                                    isCollection: false)
            case "resolve", "type", "lowBoundary", "highBoundary", "elementDefinition", "slice", "checkModifiers":
                return .unknown
            default:
                return .unknown
            }
        }
    }
}
