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
    /// The expression as written.
    public let text: String
    /// The syntax tree, every node with its position in `text`.
    public let root: ExpressionNode

    /// Parses `text`; a syntax error names the line and column.
    public init(_ text: String) throws(FHIRPathError) {
        self.text = text
        var parser = try Parser(text)
        root = try parser.parse()
    }

    /// Evaluates on a resource (also `%resource` and `%context`), with optional variables.
    public func evaluate(on resource: Element, variables: [String: [FHIRPathValue]] = [:]) throws(FHIRPathError) -> [FHIRPathValue] {
        try evaluate(in: EvaluationEnvironment(resource: resource, variables: variables))
    }

    /// Evaluates in a prepared environment (a context inside a resource, a trace hook, a resolver).
    public func evaluate(in environment: EvaluationEnvironment) throws(FHIRPathError) -> [FHIRPathValue] {
        try Evaluator(environment: environment).evaluate(root, environment.context, Focus())
    }

    public var description: String { text }
}
