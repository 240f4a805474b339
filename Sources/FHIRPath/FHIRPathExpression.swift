import FHIR

/// A compiled FHIRPath expression: parsed once, evaluated any number of times, on any threads.
///
/// ```swift
/// let codes = try FHIRPathExpression("activity.detail.code.coding.where(system = %loinc).code")
/// for plan in carePlans {
///     let values = try codes.evaluate(on: plan)   // [FHIRPathValue]
/// }
/// ```
public struct FHIRPathExpression: Sendable, CustomStringConvertible {
    /// What parsing made, shared by every copy of the expression: a validator copies the
    /// expression of each invariant it evaluates, and a copy is then one reference.
    private final class Parsed: Sendable {
        let text: String
        let root: ExpressionNode
        let existenceCheck: ExistenceCheck?

        init(text: String, root: ExpressionNode) {
            self.text = text
            self.root = root
            existenceCheck = ExistenceCheck(root)
        }
    }

    private let parsed: Parsed
    /// The expression as written.
    public var text: String { parsed.text }
    /// The syntax tree, every node with its position in `text`.
    public var root: ExpressionNode { parsed.root }
    /// The expression as existence tests on paths, when it is only that (many invariants are).
    var existenceCheck: ExistenceCheck? { parsed.existenceCheck }

    /// Parses `text`; a syntax error names the line and column.
    public init(_ text: String) throws(FHIRPathError) {
        var parser = try Parser(text)
        parsed = Parsed(text: text, root: try parser.parse())
    }

    /// Evaluates on a resource (also `%resource` and `%context`), with optional variables.
    ///
    /// The expression is first type-checked against the resource's type, and one the checker
    /// refuses with an error is not evaluated: it throws that error (`.semantic`). A misspelt
    /// element (`Observation.nmae`) must not quietly give empty, nor `nmae ~ nmae` give `true`.
    /// `jsonChoiceNames` accepts FHIR's JSON spelling of a choice (`valueQuantity` for
    /// `value.ofType(Quantity)`), which the checker otherwise refuses.
    public func evaluate(on resource: Element, variables: [String: [FHIRPathValue]] = [:],
                         jsonChoiceNames: Bool = false) throws(FHIRPathError) -> [FHIRPathValue] {
        if let type = resource.typeName {
            let checker = FHIRPathChecker(rootType: type, variables: variables.mapValues { _ in InferredType.unknown }, strict: !jsonChoiceNames)
            if let refusal = checker.check(self).first(where: { $0.severity == .error }) {
                throw .semantic(refusal.location, refusal.message)
            }
        }
        return try evaluate(in: EvaluationEnvironment(resource: resource, variables: variables))
    }

    /// Evaluates in a prepared environment (a context inside a resource, a trace hook, a resolver).
    public func evaluate(in environment: EvaluationEnvironment) throws(FHIRPathError) -> [FHIRPathValue] {
        if let existenceCheck, environment.context.count == 1, case .element(let element) = environment.context[0] {
            return FHIRPathValue.collection(existenceCheck.holds(on: element))
        }
        return try evaluateByTree(in: environment)
    }

    /// The answer with `element` as the only context item, when the expression is made only of
    /// existence tests on paths (`dataAbsentReason.empty() or value.empty()`): found without an
    /// environment or collections. Nil for an expression of any other shape (evaluate it).
    public func existenceTest(on element: Element) -> Bool? {
        existenceCheck?.holds(on: element)
    }

    /// Evaluates by walking the syntax tree, whatever the expression's shape.
    func evaluateByTree(in environment: EvaluationEnvironment) throws(FHIRPathError) -> [FHIRPathValue] {
        try Evaluator(environment: environment).evaluate(root, environment.context, Focus())
    }

    public var description: String { text }
}
