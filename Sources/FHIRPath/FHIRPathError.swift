import Diagnostics
/// What went wrong with an expression, and where in its text.
public enum FHIRPathError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text is not FHIRPath (`1:14: expected ')' after where(...)`).
    case syntax(SourceLocation, String)
    /// The expression cannot work on the type it is checked against (an unknown element, a
    /// string function on a CodeableConcept), found before any data is seen.
    case semantic(SourceLocation, String)
    /// Evaluation failed on this data (`single()` on two items, an unknown function argument).
    case evaluation(SourceLocation, String)

    /// Where in the expression's text.
    public var position: SourceLocation {
        switch self {
        case .syntax(let p, _), .semantic(let p, _), .evaluation(let p, _): p
        }
    }

    /// What went wrong, in words.
    public var message: String {
        switch self {
        case .syntax(_, let m), .semantic(_, let m), .evaluation(_, let m): m
        }
    }

    public var description: String { "\(position): \(message)" }
}
