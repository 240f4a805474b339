import Diagnostics
import FHIR

/// A type named in an expression (`Quantity`, `FHIR.Patient`, `System.String`).
public struct TypeSpecifier: Sendable, Hashable, CustomStringConvertible {
    /// `FHIR`, `System`, or nil when the name is unqualified.
    public let namespace: String?
    /// The type's name.
    public let name: String
    /// The namespace an unqualified name means (`FHIR` when R4 has a type of that name, else
    /// `System`) and the R4 type's index in `ModelInfo.r4.types`, looked up once here rather than
    /// at each `is` and `as` evaluated.
    let resolvedNamespace: String
    let fhirTypeIndex: Int32?

    /// A type name, qualified or not.
    public init(namespace: String?, name: String) {
        self.namespace = namespace
        self.name = name
        let index = namespace == nil || namespace == "FHIR" ? ModelInfo.r4.typeIndex(named: name) : nil
        resolvedNamespace = namespace ?? (index == nil ? "System" : "FHIR")
        fhirTypeIndex = index
    }

    public var description: String { namespace.map { "\($0).\(name)" } ?? name }
}

/// One node of a parsed FHIRPath expression, with the position it starts at.
public struct ExpressionNode: Sendable, CustomStringConvertible {
    /// What the node is.
    public indirect enum Kind: Sendable {
        /// A literal: boolean, string, integer, decimal, date, dateTime, time or quantity.
        case literal(FHIRPathValue)
        /// `{}`
        case emptyCollection
        /// A name: a child element of each input item (or the input itself, when it names its type).
        case member(base: ExpressionNode?, name: String)
        /// `name(arguments)`; arguments stay unevaluated until the function decides (`where`, `iif`).
        case function(base: ExpressionNode?, name: String, arguments: [ExpressionNode])
        /// `$this`, `$index` and `$total`.
        case this, index, total
        /// `%name` or `%'name'`.
        case variable(String)
        /// `base[index]`.
        case indexer(base: ExpressionNode, index: ExpressionNode)
        /// `+x` or `-x`.
        case unary(UnaryOperator, ExpressionNode)
        /// An operator between two operands.
        case binary(BinaryOperator, ExpressionNode, ExpressionNode)
        /// `x is T` or `x as T`.
        case typeTest(TypeOperator, ExpressionNode, TypeSpecifier)

        /// The nodes directly below this one.
        var children: [ExpressionNode] {
            switch self {
            case .literal, .emptyCollection, .this, .index, .total, .variable: []
            case .member(let base, _): base.map { [$0] } ?? []
            case .function(let base, _, let arguments): (base.map { [$0] } ?? []) + arguments
            case .indexer(let base, let index): [base, index]
            case .unary(_, let operand): [operand]
            case .binary(_, let lhs, let rhs): [lhs, rhs]
            case .typeTest(_, let operand, _): [operand]
            }
        }
    }

    /// What the node is.
    public let kind: Kind
    /// Where it starts in the expression's text.
    public let position: SourceLocation
    /// Levels of nodes from this one down to its deepest leaf (a leaf is 1). The parser refuses
    /// trees deeper than `Parser.deepest`, so the checker and evaluator, which recurse, stay on
    /// the stack.
    public let depth: Int
    /// For a function call, the function it names (nil for a name no function has).
    let function: FunctionReference?

    /// A node of `kind` at `position`.
    public init(_ kind: Kind, at position: SourceLocation) {
        self.kind = kind
        self.position = position
        self.depth = 1 + (kind.children.map(\.depth).max() ?? 0)
        if case .function(_, let name, _) = kind { function = Functions.table[name] } else { function = nil }
    }

    /// The expression written back in FHIRPath syntax (fully parenthesised where operators nest).
    public var description: String {
        switch kind {
        case .literal(let value): value.literalText
        case .emptyCollection: "{}"
        case .member(let base, let name): base.map { "\($0).\(name)" } ?? name
        case .function(let base, let name, let arguments):
            (base.map { "\($0)." } ?? "") + "\(name)(" + arguments.map(\.description).joined(separator: ", ") + ")"
        case .this: "$this"
        case .index: "$index"
        case .total: "$total"
        case .variable(let name): "%\(name)"
        case .indexer(let base, let index): "\(base)[\(index)]"
        case .unary(let op, let operand): "\(op.rawValue)\(operand)"
        case .binary(let op, let lhs, let rhs): "(\(lhs) \(op.rawValue) \(rhs))"
        case .typeTest(let op, let operand, let type): "(\(operand) \(op.rawValue) \(type))"
        }
    }
}

/// A function an expression names, resolved when it is parsed: what the evaluator dispatches
/// on, and how many arguments it takes.
struct FunctionReference: Sendable {
    let id: Functions.ID
    let arity: ClosedRange<Int>
}

/// A prefix operator.
public enum UnaryOperator: String, Sendable {
    /// Plus and minus.
    case plus = "+", minus = "-"
}

/// A type operator.
public enum TypeOperator: String, Sendable {
    /// A type test and a cast.
    case `is`, `as`
}

/// An infix operator.
public enum BinaryOperator: String, Sendable, CaseIterable {
    /// Multiplication and division.
    case multiply = "*", divide = "/", div, mod
    /// Addition, subtraction and string concatenation.
    case add = "+", subtract = "-", concatenate = "&"
    /// Collection union.
    case union = "|"
    /// Comparison.
    case lessThan = "<", greaterThan = ">", lessOrEqual = "<=", greaterOrEqual = ">="
    /// Equality and equivalence.
    case equal = "=", equivalent = "~", notEqual = "!=", notEquivalent = "!~"
    /// Membership.
    case `in`, contains
    /// Three-valued boolean logic.
    case and, or, xor, implies

    /// Binding power: higher binds tighter (the normative grammar's precedence).
    var precedence: Int {
        switch self {
        case .implies: 1
        case .or, .xor: 2
        case .and: 3
        case .in, .contains: 4
        case .equal, .equivalent, .notEqual, .notEquivalent: 5
        case .lessThan, .greaterThan, .lessOrEqual, .greaterOrEqual: 6
        case .union: 7
        case .add, .subtract, .concatenate: 9
        case .multiply, .divide, .div, .mod: 10
        }
    }
}
