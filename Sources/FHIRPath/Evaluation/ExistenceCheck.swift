import FHIR

/// An expression made only of existence tests on paths (`contained.meta.security.empty()`,
/// `dataAbsentReason.empty() or value.empty()`, `(component.empty() and hasMember.empty())
/// implies value.exists()`), answered by following the paths through the element tree, without
/// building a collection for each step.
///
/// Many of FHIR's invariants have this shape, and validation evaluates them on every resource:
/// `FHIRPathExpression` recognises it when parsing and evaluates it this way whenever the context
/// is one element. The answer is the tree walker's: every part is a single Boolean, never empty,
/// so the three-valued logic reduces to two values; paths are followed as `Evaluator.navigate`
/// follows them (a path may start with the resource's type; JSON's spelling of a choice).
indirect enum ExistenceCheck: Sendable {
    case exists([String])
    case empty([String])
    case not(ExistenceCheck)
    case binary(BinaryOperator, ExistenceCheck, ExistenceCheck)

    /// The check an expression's tree is, or nil when it is not made only of existence tests.
    init?(_ node: ExpressionNode) {
        switch node.kind {
        case .function(let base, _, let arguments) where arguments.isEmpty:
            switch node.function?.id {
            case .exists?, .empty?:
                guard let path = base.map(Self.path) ?? [] else { return nil }
                self = node.function?.id == .exists ? .exists(path) : .empty(path)
            case .not?:
                guard let base, let operand = ExistenceCheck(base) else { return nil }
                self = .not(operand)
            default:
                return nil
            }
        case .binary(let op, let lhs, let rhs):
            guard [.and, .or, .xor, .implies].contains(op), let left = ExistenceCheck(lhs), let right = ExistenceCheck(rhs) else { return nil }
            self = .binary(op, left, right)
        default:
            return nil
        }
    }

    /// The names of a plain path (`contained.meta.security`), or nil for anything else.
    private static func path(_ node: ExpressionNode) -> [String]? {
        guard case .member(let base, let name) = node.kind else { return nil }
        guard let base else { return [name] }
        return path(base).map { $0 + [name] }
    }

    /// The check's answer with `element` as the context.
    func holds(on element: Element) -> Bool {
        switch self {
        case .exists(let path): Self.reaches(element, path[...], isPathStart: true)
        case .empty(let path): !Self.reaches(element, path[...], isPathStart: true)
        case .not(let operand): !operand.holds(on: element)
        case .binary(let op, let lhs, let rhs):
            switch op {
            case .and: lhs.holds(on: element) && rhs.holds(on: element)
            case .or: lhs.holds(on: element) || rhs.holds(on: element)
            case .xor: lhs.holds(on: element) != rhs.holds(on: element)
            default: !lhs.holds(on: element) || rhs.holds(on: element)
            }
        }
    }

    /// Whether `path` reaches any element from `element`.
    private static func reaches(_ element: Element, _ path: ArraySlice<String>, isPathStart: Bool) -> Bool {
        guard let name = path.first else { return true }
        let rest = path.dropFirst()
        return !Evaluator.forEachStep(from: element, name, isPathStart: isPathStart) { next in
            !reaches(next, rest, isPathStart: false)
        }
    }
}
