import Diagnostics
import FHIR
import Foundation
import Synchronization

/// Counts what evaluations read from outside the context they start from: `%resource`,
/// `%rootResource`, `%context` and the caller's variables, `resolve()`, and the clock (`now()`,
/// `today()`, `timeOfDay()`); not the constants (`%ucum`, `%loinc`, `%vs-…`). An answer given
/// without such a read depends only on the context items, so a caller may reuse it for the same
/// items (the profile validator does, for the subtrees it found clean).
public final class OutsideReads: Sendable {
    private let reads = Atomic<Int>(0)

    /// A counter at zero (give it to the environments of the evaluations to count).
    public init() {}

    /// How many reads were counted so far.
    public var count: Int { reads.load(ordering: .relaxed) }

    func note() {
        reads.add(1, ordering: .relaxed)
    }
}

/// What an evaluation runs against: the context item, the resource it belongs to, variables,
/// and hooks for `trace()` and references outside the resource.
public struct EvaluationEnvironment: Sendable {
    /// `%context`: the items the expression starts from.
    public var context: [FHIRPathValue]
    /// `%resource`: the resource holding the context.
    public var resource: Element?
    /// `%rootResource`: the outermost resource (the Bundle, for a resource read from one), where
    /// `resolve()` looks for references between entries. The same as `resource` unless set.
    public var rootResource: Element?
    /// User-supplied variables (`%dose` from `--var dose=500`), without the `%`.
    public var variables: [String: [FHIRPathValue]]
    /// Called by `trace(name)` with the name and the traced items.
    public var trace: (@Sendable (String, [FHIRPathValue]) -> Void)?
    /// An index of `rootResource`'s entries for `resolve()` (build it once per Bundle when many
    /// expressions run over its resources; without it, each `resolve()` scans the entries).
    public var bundleIndex: BundleIndex?
    /// Resolves references that are not inside `resource` (a server, a file set); nil for none.
    public var resolveReference: (@Sendable (String) -> Element?)?
    /// The clock `now()`, `today()` and `timeOfDay()` read, fixed for one evaluation.
    public var now: Date
    /// Answers `memberOf(valueSet)` for one code, Coding or CodeableConcept: true or false, or
    /// nil when the value set cannot be checked (then the call is an evaluation error).
    public var memberOf: (@Sendable (FHIRPathValue, String) -> Bool?)?
    /// R4's own invariants were written for engines that read a collection of several items as
    /// true where a Boolean is wanted (`telecom or endpoint`) and `as(T)` on several items as a
    /// filter (`descendants().as(canonical)`), as the HL7 validator's engine does. The FHIRPath
    /// specification makes both an error, and so does this engine unless this is set (the
    /// profile validator sets it for invariants).
    public var lenientCollections = false
    /// Told of every read outside the context (`OutsideReads`); nil for no count.
    public var outsideReads: OutsideReads?

    /// An environment with `resource` as the context and `%resource`.
    public init(resource: Element, in rootResource: Element? = nil, variables: [String: [FHIRPathValue]] = [:]) {
        self.context = [.element(resource)]
        self.resource = resource
        self.rootResource = rootResource ?? resource
        self.variables = variables
        self.now = Date()
    }

    /// An environment with its own context collection.
    public init(context: [FHIRPathValue], resource: Element?, rootResource: Element? = nil, variables: [String: [FHIRPathValue]] = [:]) {
        self.context = context
        self.resource = resource
        self.rootResource = rootResource ?? resource
        self.variables = variables
        self.now = Date()
    }
}

/// The iteration variables of a function argument (`$this`, `$index`, `$total`).
struct Focus {
    var this: [FHIRPathValue]?
    var index: Int?
    var total: [FHIRPathValue]?
}

/// Evaluates a parsed expression over the element model. Stateless apart from the environment:
/// one compiled expression serves any number of evaluations, on any threads.
struct Evaluator {
    let environment: EvaluationEnvironment

    func evaluate(_ node: ExpressionNode, _ input: [FHIRPathValue], _ focus: Focus) throws(FHIRPathError) -> [FHIRPathValue] {
        switch node.kind {
        case .literal(let value):
            return [value]
        case .emptyCollection:
            return []
        case .this:
            return focus.this ?? input
        case .index:
            return focus.index.map { [.integer($0)] } ?? []
        case .total:
            return focus.total ?? []
        case .variable(let name):
            return try variable(name, at: node.position)
        case .member(let base, let name):
            var items = input
            if let base { items = try evaluate(base, input, focus) }
            return navigate(items, name, isPathStart: base == nil)
        case .function(let base, let name, let arguments):
            var items = input
            if let base { items = try evaluate(base, input, focus) }
            return try Functions.call(node.function, name, on: items, arguments: arguments, context: input, focus: focus, evaluator: self, at: node.position)
        case .indexer(let base, let indexNode):
            let items = try evaluate(base, input, focus)
            let index = try evaluate(indexNode, input, focus)
            guard let first = index.first else { return [] }
            guard index.count == 1, case .integer(let i) = first.systemValue else {
                throw .evaluation(indexNode.position, "an index must be one integer")
            }
            return i >= 0 && i < items.count ? [items[i]] : []
        case .unary(let op, let operand):
            let items = try evaluate(operand, input, focus)
            guard let item = try singleton(items, operand.position, "the operand of unary '\(op.rawValue)'") else { return [] }
            if op == .plus { return [item] }
            switch item.systemValue {
            case .integer(let i):
                // -(-9223372036854775808) has no Int: empty, like any result FHIRPath cannot represent.
                let (negated, overflow) = 0.subtractingReportingOverflow(i)
                return overflow ? [] : [.integer(negated)]
            case .decimal(let d): return [.decimal(d.negated)]
            case .quantity(let q): return [.quantity(FHIRPathQuantity(value: q.value.negated, unit: q.unit))]
            default: throw .evaluation(node.position, "cannot negate \(Operators.describe(item.systemValue))")
            }
        case .typeTest(let op, let operand, let type):
            let items = try evaluate(operand, input, focus)
            if items.isEmpty { return [] }
            if op == .is {
                guard items.count == 1 else { throw .evaluation(node.position, "'is' needs one item, found \(items.count)") }
                return FHIRPathValue.collection(items[0].isType(type))
            }
            guard items.count == 1 else { throw .evaluation(node.position, "'as' needs one item, found \(items.count)") }
            return items.filter { $0.isType(type, exactPrimitive: true) }
        case .binary(let op, let lhs, let rhs):
            return try binary(op, lhs, rhs, input, focus, at: node.position)
        }
    }

    func variable(_ name: String, at position: SourceLocation) throws(FHIRPathError) -> [FHIRPathValue] {
        // What comes from the environment is a read outside the context; the constants below are not.
        if let value = environment.variables[name] {
            environment.outsideReads?.note()
            return value
        }
        switch name {
        case "context":
            environment.outsideReads?.note()
            return environment.context
        case "resource":
            environment.outsideReads?.note()
            return environment.resource.map { [.element($0)] } ?? []
        case "rootResource":
            environment.outsideReads?.note()
            return (environment.rootResource ?? environment.resource).map { [.element($0)] } ?? []
        case "ucum": return [.string("http://unitsofmeasure.org")]
        case "sct": return [.string("http://snomed.info/sct")]
        case "loinc": return [.string("http://loinc.org")]
        default:
            if name.hasPrefix("vs-") { return [.string("http://hl7.org/fhir/ValueSet/" + name.dropFirst(3))] }
            if name.hasPrefix("ext-") { return [.string("http://hl7.org/fhir/StructureDefinition/" + name.dropFirst(4))] }
            throw .evaluation(position, "unknown variable %\(name)")
        }
    }

    /// Children named `name` of each element; at the start of a path, a name that is the item's
    /// own resource type selects the item (`Patient.name` on a Patient).
    func navigate(_ items: [FHIRPathValue], _ name: String, isPathStart: Bool) -> [FHIRPathValue] {
        var result: [FHIRPathValue] = []
        for item in items {
            switch item {
            case .element(let e):
                Self.forEachStep(from: e, name, isPathStart: isPathStart) { next in
                    result.append(.element(next))
                    return true
                }
            case .typeInfo(let namespace, let typeName):
                if name == "namespace" { result.append(.string(namespace)) }
                if name == "name" { result.append(.string(typeName)) }
            default:
                continue
            }
        }
        return result
    }

    /// Calls `body` with each element one step of a path named `name` reaches from `element`,
    /// in order, until it returns false; returns false when it was stopped. At the start of a
    /// path, a name that is the element's own resource type (or `Resource`, `DomainResource`)
    /// reaches the element itself; otherwise its children of that name, or, when it has none,
    /// the children FHIR's JSON spelling of a choice names (`valueQuantity`, `scheduledTiming`:
    /// the choice element when it has that type; the checker flags this spelling in strict mode).
    @discardableResult
    static func forEachStep(from element: Element, _ name: String, isPathStart: Bool, _ body: (Element) -> Bool) -> Bool {
        if isPathStart, let type = element.resourceType, type == name || name == "Resource" || name == "DomainResource" {
            return body(element)
        }
        var found = false
        for child in element.children where Element.sameName(child.name, name) {
            found = true
            if !body(child) { return false }
        }
        if !found, let (base, type) = Evaluator.choiceSpelling(name, in: element) {
            for child in element.children where child.name == base && child.typeName == type {
                if !body(child) { return false }
            }
        }
        return true
    }

    /// `valueQuantity` on an element with `value[x]`: the element name and the type it names.
    static func choiceSpelling(_ name: String, in element: Element) -> (String, String)? {
        // The spelling ends in a type's name, capitalised (`valueQuantity`, `valueString`): a
        // name without a capital is not one, and is not looked up.
        guard name.utf8.contains(where: { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }) else { return nil }
        guard let definition = element.definition, definition.element(named: name) == nil,
              let (choice, typeIndex) = definition.property(named: name), choice.isChoice else { return nil }
        return (choice.name, ModelInfo.r4.types[Int(typeIndex)].name)
    }

    /// A collection of at most one item, as operators and single-item functions need it.
    /// (`what` names the operand in the error, and is written only for one.)
    func singleton(_ items: [FHIRPathValue], _ position: SourceLocation, _ what: @autoclosure () -> String) throws(FHIRPathError) -> FHIRPathValue? {
        guard items.count <= 1 else { throw .evaluation(position, "\(what()) must be a single item, found \(items.count)") }
        return items.first
    }

    /// A collection as a boolean: empty is unknown, one boolean is itself, one other item is true.
    func boolean(_ items: [FHIRPathValue], _ position: SourceLocation, _ what: @autoclosure () -> String) throws(FHIRPathError) -> Bool? {
        if items.count > 1 && environment.lenientCollections { return true }
        guard let item = try singleton(items, position, what()) else { return nil }
        if case .boolean(let b) = item.systemValue { return b }
        return true
    }

    private func binary(_ op: BinaryOperator, _ lhs: ExpressionNode, _ rhs: ExpressionNode, _ input: [FHIRPathValue], _ focus: Focus,
                        at position: SourceLocation) throws(FHIRPathError) -> [FHIRPathValue] {
        switch op {
        case .and, .or, .xor, .implies:
            let a = try boolean(try evaluate(lhs, input, focus), lhs.position, "the left side of '\(op.rawValue)'")
            // Short cuts the specification allows: false and ..., true or ..., false implies ...
            if op == .and, a == false { return FHIRPathValue.collection(false) }
            if op == .or, a == true { return FHIRPathValue.collection(true) }
            if op == .implies, a == false { return FHIRPathValue.collection(true) }
            let b = try boolean(try evaluate(rhs, input, focus), rhs.position, "the right side of '\(op.rawValue)'")
            let result: Bool? = switch op {
            case .and: a == true && b == true ? true : (b == false ? false : nil)
            case .or: b == true ? true : (a == false && b == false ? false : nil)
            case .xor: a.flatMap { x in b.map { x != $0 } }
            default: a == true ? b : (b == true ? true : nil)
            }
            return result.map { FHIRPathValue.collection($0) } ?? []
        default:
            break
        }
        let a = try evaluate(lhs, input, focus)
        let b = try evaluate(rhs, input, focus)
        switch op {
        case .union:
            return Functions.distinct(a + b)
        case .equal:
            return Operators.equal(a, b).map { FHIRPathValue.collection($0) } ?? []
        case .notEqual:
            return Operators.equal(a, b).map { FHIRPathValue.collection(!$0) } ?? []
        case .equivalent:
            return FHIRPathValue.collection(Operators.equivalent(a, b))
        case .notEquivalent:
            return FHIRPathValue.collection(!Operators.equivalent(a, b))
        case .in, .contains:
            let (element, collection) = op == .in ? (a, b) : (b, a)
            guard let item = try singleton(element, position, "the item tested by '\(op.rawValue)'") else { return [] }
            return FHIRPathValue.collection(collection.contains { Operators.equal(item, $0) == true })
        case .concatenate:
            let x = try singleton(a, lhs.position, "the left side of '&'")
            let y = try singleton(b, rhs.position, "the right side of '&'")
            func text(_ v: FHIRPathValue?) -> String {
                guard let v else { return "" }
                if case .string(let s) = v.systemValue { return s }
                return Functions.string(of: v) ?? ""
            }
            return [.string(text(x) + text(y))]
        case .lessThan, .greaterThan, .lessOrEqual, .greaterOrEqual:
            guard let x = try singleton(a, lhs.position, "the left side of '\(op.rawValue)'"),
                  let y = try singleton(b, rhs.position, "the right side of '\(op.rawValue)'") else { return [] }
            guard let c = try Operators.compare(x, y, at: position) else { return [] }
            let result = switch op {
            case .lessThan: c < 0
            case .greaterThan: c > 0
            case .lessOrEqual: c <= 0
            default: c >= 0
            }
            return FHIRPathValue.collection(result)
        default:
            guard let x = try singleton(a, lhs.position, "the left side of '\(op.rawValue)'"),
                  let y = try singleton(b, rhs.position, "the right side of '\(op.rawValue)'") else { return [] }
            return try Operators.arithmetic(op, x, y, at: position).map { [$0] } ?? []
        }
    }
}
