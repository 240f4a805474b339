import Diagnostics
/// Parses FHIRPath text (the normative R4 grammar) into an `ExpressionNode` tree by precedence
/// climbing. Every node keeps the position it starts at; errors name the line and column.
struct Parser {
    private var tokens: [Token]
    private var index = 0
    /// Expressions, signs and parentheses open around the current token.
    private var nesting = 0

    /// The deepest expression accepted, in tree levels and in nesting: far beyond what a mapping
    /// needs, and shallow enough that checking, evaluating and freeing the tree (all recursive)
    /// stay well inside a thread's stack.
    static let deepest = 128

    init(_ text: String) throws(FHIRPathError) {
        var lexer = Lexer(text)
        tokens = try lexer.tokens()
    }

    static let calendarUnits: Set<String> = [
        "year", "years", "month", "months", "week", "weeks", "day", "days",
        "hour", "hours", "minute", "minutes", "second", "seconds", "millisecond", "milliseconds",
    ]

    /// Keywords that may still name an element or function after a dot (the grammar's `identifier`).
    private static let keywordIdentifiers: Set<String> = ["as", "contains", "in", "is"]

    private var current: Token { tokens[index] }

    private mutating func advance() { if index < tokens.count - 1 { index += 1 } }

    private func isSymbol(_ s: String) -> Bool {
        if case .symbol(let t) = current.kind { return t == s }
        return false
    }

    private func describe(_ token: Token) -> String {
        switch token.kind {
        case .identifier(let s): "'\(s)'"
        case .delimitedIdentifier(let s): "`\(s)`"
        case .string(let s): "string '\(s)'"
        case .number(let s), .long(let s): "number \(s)"
        case .dateTime(let s): "@\(s)"
        case .time(let s): "@T\(s)"
        case .variable(let s): "%\(s)"
        case .special(let s): "$\(s)"
        case .symbol(let s): "'\(s)'"
        case .end: "the end of the expression"
        }
    }

    private mutating func expect(_ symbol: String, _ context: String) throws(FHIRPathError) {
        guard isSymbol(symbol) else {
            throw .syntax(current.position, "expected '\(symbol)' \(context), found \(describe(current))")
        }
        advance()
    }

    /// The whole text as one expression.
    mutating func parse() throws(FHIRPathError) -> ExpressionNode {
        if case .end = current.kind { throw .syntax(current.position, "empty expression") }
        let node = try expression(0)
        guard case .end = current.kind else {
            throw .syntax(current.position, "unexpected \(describe(current)) after a complete expression")
        }
        return node
    }

    /// A node, refused when it would make the tree deeper than `deepest`.
    private func node(_ kind: ExpressionNode.Kind, at position: SourceLocation) throws(FHIRPathError) -> ExpressionNode {
        let node = ExpressionNode(kind, at: position)
        guard node.depth <= Parser.deepest else { throw tooDeep(at: position) }
        return node
    }

    private func tooDeep(at position: SourceLocation) -> FHIRPathError {
        .syntax(position, "the expression nests deeper than \(Parser.deepest) levels")
    }

    /// One more level of nesting (the caller leaves it with `nesting -= 1`), refused beyond `deepest`.
    private mutating func enterNesting() throws(FHIRPathError) {
        guard nesting < Parser.deepest else { throw tooDeep(at: current.position) }
        nesting += 1
    }

    /// The binary operator at the current token, if any.
    private func binaryOperator() -> BinaryOperator? {
        switch current.kind {
        case .symbol(let s): BinaryOperator(rawValue: s)
        case .identifier(let s): ["div", "mod", "and", "or", "xor", "implies", "in", "contains"].contains(s) ? BinaryOperator(rawValue: s) : nil
        default: nil
        }
    }

    private mutating func expression(_ minimum: Int) throws(FHIRPathError) -> ExpressionNode {
        try enterNesting()
        defer { nesting -= 1 }
        var lhs = try unary()
        while true {
            if case .identifier(let word) = current.kind, word == "is" || word == "as", 8 > minimum {
                let position = current.position
                advance()
                let type = try typeSpecifier("after '\(word)'")
                lhs = try node(.typeTest(word == "is" ? .is : .as, lhs, type), at: position)
                continue
            }
            guard let op = binaryOperator(), op.precedence > minimum else { return lhs }
            let position = current.position
            advance()
            if case .end = current.kind {
                throw .syntax(current.position, "expected an expression after '\(op.rawValue)'")
            }
            // Left-associative: the right side binds only tighter operators.
            let rhs = try expression(op.precedence)
            lhs = try node(.binary(op, lhs, rhs), at: position)
        }
    }

    private mutating func unary() throws(FHIRPathError) -> ExpressionNode {
        if isSymbol("+") || isSymbol("-") {
            let position = current.position
            let op: UnaryOperator = isSymbol("+") ? .plus : .minus
            advance()
            try enterNesting()
            defer { nesting -= 1 }
            let operand = try unary()
            return try node(.unary(op, operand), at: position)
        }
        return try postfix(try term())
    }

    private mutating func postfix(_ base: ExpressionNode) throws(FHIRPathError) -> ExpressionNode {
        var result = base
        while true {
            if isSymbol(".") {
                advance()
                result = try invocation(base: result)
            } else if isSymbol("[") {
                let position = current.position
                advance()
                let index = try expression(0)
                try expect("]", "to close the indexer")
                result = try node(.indexer(base: result, index: index), at: position)
            } else {
                return result
            }
        }
    }

    /// A name or function call after a dot (or at the start of a path).
    private mutating func invocation(base: ExpressionNode?) throws(FHIRPathError) -> ExpressionNode {
        let position = current.position
        let name: String
        switch current.kind {
        case .identifier(let s): name = s
        case .delimitedIdentifier(let s): name = s
        case .special(let s) where base == nil:
            advance()
            return ExpressionNode(s == "this" ? .this : s == "index" ? .index : .total, at: position)
        default:
            throw .syntax(position, "expected a name or function after '.', found \(describe(current))")
        }
        advance()
        guard isSymbol("(") else { return try node(.member(base: base, name: name), at: position) }
        advance()
        var arguments: [ExpressionNode] = []
        if !isSymbol(")") {
            while true {
                arguments.append(try expression(0))
                if isSymbol(",") { advance(); continue }
                break
            }
        }
        try expect(")", "after the arguments of \(name)(...)")
        return try node(.function(base: base, name: name, arguments: arguments), at: position)
    }

    private mutating func typeSpecifier(_ context: String) throws(FHIRPathError) -> TypeSpecifier {
        func name(_ token: Token) -> String? {
            switch token.kind {
            case .identifier(let s), .delimitedIdentifier(let s): s
            default: nil
            }
        }
        guard let first = name(current) else {
            throw .syntax(current.position, "expected a type name \(context), found \(describe(current))")
        }
        advance()
        // `FHIR.Patient`, `System.String`: only these namespaces, so that `(x as Quantity).unit` and
        // `x as Quantity` followed by more path stay unambiguous.
        if (first == "FHIR" || first == "System"), isSymbol("."), index + 1 < tokens.count, let second = name(tokens[index + 1]) {
            advance(); advance()
            return TypeSpecifier(namespace: first, name: second)
        }
        return TypeSpecifier(namespace: nil, name: first)
    }

    /// A number literal as a decimal; one with more digits than a decimal holds is a syntax error.
    private func decimal(_ digits: String, at position: SourceLocation) throws(FHIRPathError) -> FHIRPathDecimal {
        guard let value = FHIRPathDecimal(digits) else {
            throw .syntax(position, "the number \(digits.prefix(24))\(digits.count > 24 ? "…" : "") has more digits than a FHIRPath decimal holds")
        }
        return value
    }

    private mutating func term() throws(FHIRPathError) -> ExpressionNode {
        let token = current
        let position = token.position
        switch token.kind {
        case .identifier(let s):
            if s == "true" || s == "false" {
                advance()
                return try node(.literal(.boolean(s == "true")), at: position)
            }
            if ["div", "mod", "and", "or", "xor", "implies"].contains(s) {
                throw .syntax(position, "expected an expression, found the operator '\(s)'")
            }
            return try invocation(base: nil)
        case .delimitedIdentifier:
            return try invocation(base: nil)
        case .special:
            return try invocation(base: nil)
        case .string(let s):
            advance()
            return try node(.literal(.string(s)), at: position)
        case .long(let digits):
            advance()
            guard let value = Int(digits) else { throw .syntax(position, "integer \(digits) is too large") }
            return try node(.literal(.integer(value)), at: position)
        case .number(let digits):
            advance()
            // A number followed by a unit is a quantity: `4 'mg'`, `7 days`.
            if case .string(let unit) = current.kind {
                advance()
                return try node(.literal(.quantity(FHIRPathQuantity(value: try decimal(digits, at: position), unit: unit))), at: position)
            }
            if case .identifier(let unit) = current.kind, Parser.calendarUnits.contains(unit) {
                advance()
                return try node(.literal(.quantity(FHIRPathQuantity(value: try decimal(digits, at: position), unit: unit))), at: position)
            }
            if digits.contains(".") {
                return try node(.literal(.decimal(try decimal(digits, at: position))), at: position)
            }
            guard let value = Int(digits), value <= Int(Int32.max) + 1 else {
                // Beyond a 32-bit integer: keep it exact as a decimal.
                return try node(.literal(.decimal(try decimal(digits, at: position))), at: position)
            }
            return try node(.literal(.integer(value)), at: position)
        case .dateTime(let text):
            advance()
            if text.contains("T") {
                guard let value = PartialDateTime(fhirPath: text) else { throw .syntax(position, "invalid date/time literal @\(text)") }
                return try node(.literal(.dateTime(value)), at: position)
            }
            guard let value = PartialDateTime(fhirPath: text) else { throw .syntax(position, "invalid date literal @\(text)") }
            return try node(.literal(.date(value)), at: position)
        case .time(let text):
            advance()
            guard let value = PartialTime(text) else { throw .syntax(position, "invalid time literal @T\(text)") }
            return try node(.literal(.time(value)), at: position)
        case .variable(let name):
            advance()
            return try node(.variable(name), at: position)
        case .symbol("("):
            advance()
            let inner = try expression(0)
            try expect(")", "to close '(' opened at \(position)")
            return inner
        case .symbol("{"):
            advance()
            try expect("}", "for the empty collection '{}'")
            return try node(.emptyCollection, at: position)
        case .end:
            throw .syntax(position, "unexpected end of the expression")
        default:
            throw .syntax(position, "expected an expression, found \(describe(token))")
        }
    }
}
