import Diagnostics
/// A token of FHIRPath text.
struct Token: Sendable {
    enum Kind: Sendable, Equatable {
        case identifier(String)
        /// `` `name` ``: never a keyword.
        case delimitedIdentifier(String)
        case string(String)
        case number(String)
        case long(String)
        /// `@2014-01-01`, `@2014-01-01T10:00:00Z`, `@T10:00` (text after the `@`).
        case dateTime(String)
        case time(String)
        /// `%name` or `%'name'` / `` %`name` ``.
        case variable(String)
        /// `$this`, `$index`, `$total`.
        case special(String)
        /// Operators and punctuation: `.`, `(`, `<=`, `!~`, ...
        case symbol(String)
        case end
    }

    let kind: Kind
    let position: SourceLocation
}

/// Splits FHIRPath text into tokens, skipping whitespace and comments.
struct Lexer {
    private let bytes: [UInt8]
    private var offset = 0
    private var line = 1
    /// The column at `offset`: characters, not bytes, so UTF-8 continuation bytes do not count.
    /// Kept as the lexer advances (counting from the line's start each time was quadratic).
    private var column = 1

    init(_ text: String) {
        bytes = Array(text.utf8)
    }

    private var position: SourceLocation { SourceLocation(line: line, column: column) }

    private func peek(_ ahead: Int = 0) -> UInt8? {
        offset + ahead < bytes.count ? bytes[offset + ahead] : nil
    }

    private mutating func advance() {
        if bytes[offset] == 0x0A {
            line += 1
            column = 1
        } else if bytes[offset] & 0xC0 != 0x80 {
            column += 1
        }
        offset += 1
    }

    static func isIdentifierStart(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x5F
    }

    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    static func isIdentifierPart(_ b: UInt8) -> Bool { isIdentifierStart(b) || isDigit(b) }

    private mutating func skipTrivia() throws(FHIRPathError) {
        while let b = peek() {
            if b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D {
                advance()
            } else if b == 0x2F, peek(1) == 0x2F {
                while let c = peek(), c != 0x0A { _ = c; advance() }
            } else if b == 0x2F, peek(1) == 0x2A {
                let start = position
                advance(); advance()
                var closed = false
                while let c = peek() {
                    if c == 0x2A, peek(1) == 0x2F { advance(); advance(); closed = true; break }
                    advance()
                }
                if !closed { throw .syntax(start, "unterminated comment: '/*' without '*/'") }
            } else {
                return
            }
        }
    }

    /// All tokens, ending with `.end`.
    mutating func tokens() throws(FHIRPathError) -> [Token] {
        var result: [Token] = []
        while true {
            try skipTrivia()
            let start = position
            guard let b = peek() else {
                result.append(Token(kind: .end, position: start))
                return result
            }
            result.append(Token(kind: try next(b, start), position: start))
        }
    }

    private mutating func text(_ from: Int) -> String {
        String(decoding: bytes[from..<offset], as: UTF8.self)
    }

    private mutating func next(_ b: UInt8, _ start: SourceLocation) throws(FHIRPathError) -> Token.Kind {
        let from = offset
        if Lexer.isIdentifierStart(b) {
            while let c = peek(), Lexer.isIdentifierPart(c) { advance() }
            return .identifier(text(from))
        }
        if Lexer.isDigit(b) {
            while let c = peek(), Lexer.isDigit(c) { advance() }
            if peek() == 0x2E, let c = peek(1), Lexer.isDigit(c) {
                advance()
                while let c = peek(), Lexer.isDigit(c) { advance() }
                return .number(text(from))
            }
            if peek() == 0x4C {  // 1L
                let digits = text(from)
                advance()
                return .long(digits)
            }
            return .number(text(from))
        }
        switch b {
        case 0x27:  // 'string'
            return .string(try quoted(0x27, start, what: "string"))
        case 0x60:  // `identifier`
            return .delimitedIdentifier(try quoted(0x60, start, what: "delimited identifier"))
        case 0x40:  // @date, @dateTime, @Ttime
            advance()
            if peek() == 0x54 {
                advance()
                let t = offset
                scanTime()
                if offset == t { throw .syntax(start, "expected a time after '@T' (hh, hh:mm or hh:mm:ss.fff)") }
                return .time(String(decoding: bytes[t..<offset], as: UTF8.self))
            }
            let d = offset
            guard scanDate() else { throw .syntax(start, "expected a date after '@' (YYYY, YYYY-MM or YYYY-MM-DD)") }
            if peek() == 0x54 {
                advance()
                scanTime()
                scanZone()
            }
            return .dateTime(String(decoding: bytes[d..<offset], as: UTF8.self))
        case 0x25:  // %variable
            advance()
            if peek() == 0x27 { return .variable(try quoted(0x27, start, what: "variable name")) }
            if peek() == 0x60 { return .variable(try quoted(0x60, start, what: "variable name")) }
            let n = offset
            while let c = peek(), Lexer.isIdentifierPart(c) { advance() }
            if offset == n { throw .syntax(start, "expected a variable name after '%'") }
            return .variable(String(decoding: bytes[n..<offset], as: UTF8.self))
        case 0x24:  // $this
            advance()
            let n = offset
            while let c = peek(), Lexer.isIdentifierPart(c) { advance() }
            let name = String(decoding: bytes[n..<offset], as: UTF8.self)
            guard ["this", "index", "total"].contains(name) else {
                throw .syntax(start, "unknown special variable '$\(name)' (expected $this, $index or $total)")
            }
            return .special(name)
        default:
            break
        }
        let two = peek(1).map { String(decoding: [b, $0], as: UTF8.self) } ?? ""
        if ["<=", ">=", "!=", "!~"].contains(two) {
            advance(); advance()
            return .symbol(two)
        }
        let one = String(decoding: [b], as: UTF8.self)
        if ".,()[]{}+-*/&|<>=~".contains(one) {
            advance()
            return .symbol(one)
        }
        throw .syntax(start, "unexpected character '\(String(decoding: [b], as: UTF8.self))'")
    }

    /// A quoted string or identifier with FHIRPath's escapes.
    private mutating func quoted(_ quote: UInt8, _ start: SourceLocation, what: String) throws(FHIRPathError) -> String {
        advance()
        var out: [UInt8] = []
        while let c = peek() {
            if c == quote {
                advance()
                return String(decoding: out, as: UTF8.self)
            }
            if c == 0x5C {
                advance()
                guard let e = peek() else { break }
                advance()
                switch e {
                case 0x27, 0x22, 0x60, 0x5C, 0x2F: out.append(e)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x66: out.append(0x0C)
                case 0x75:
                    var hex = 0
                    for _ in 0..<4 {
                        guard let h = peek(), let v = Lexer.hexValue(h) else {
                            throw .syntax(position, "expected four hex digits after '\\u'")
                        }
                        hex = hex * 16 + v
                        advance()
                    }
                    out.append(contentsOf: Array(String(UnicodeScalar(UInt32(hex)).map(Character.init) ?? "\u{FFFD}").utf8))
                default:
                    throw .syntax(position, "unknown escape '\\\(String(decoding: [e], as: UTF8.self))'")
                }
                continue
            }
            out.append(c)
            advance()
        }
        throw .syntax(start, "unterminated \(what): missing closing \(quote == 0x27 ? "'" : "`")")
    }

    static func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: Int(b - 0x30)
        case 0x41...0x46: Int(b - 0x41 + 10)
        case 0x61...0x66: Int(b - 0x61 + 10)
        default: nil
        }
    }

    private mutating func digits(_ count: Int) -> Bool {
        for i in 0..<count { guard let c = peek(i), Lexer.isDigit(c) else { return false } }
        for _ in 0..<count { advance() }
        return true
    }

    /// YYYY(-MM(-DD)?)?
    private mutating func scanDate() -> Bool {
        guard digits(4) else { return false }
        if peek() == 0x2D, let c = peek(1), Lexer.isDigit(c) {
            advance()
            _ = digits(2)
            if peek() == 0x2D, let c = peek(1), Lexer.isDigit(c) {
                advance()
                _ = digits(2)
            }
        }
        return true
    }

    /// hh(:mm(:ss(.fff)?)?)?
    private mutating func scanTime() {
        guard digits(2) else { return }
        if peek() == 0x3A, let c = peek(1), Lexer.isDigit(c) {
            advance()
            _ = digits(2)
            if peek() == 0x3A, let c = peek(1), Lexer.isDigit(c) {
                advance()
                _ = digits(2)
                if peek() == 0x2E, let c = peek(1), Lexer.isDigit(c) {
                    advance()
                    while let c = peek(), Lexer.isDigit(c) { advance() }
                }
            }
        }
    }

    /// Z or (+|-)hh:mm
    private mutating func scanZone() {
        if peek() == 0x5A { advance(); return }
        if let s = peek(), s == 0x2B || s == 0x2D, let c = peek(1), Lexer.isDigit(c), peek(3) == 0x3A {
            advance()
            _ = digits(2)
            advance()
            _ = digits(2)
        }
    }
}
