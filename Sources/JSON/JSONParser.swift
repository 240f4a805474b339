import Foundation

/// Malformed JSON: what was wrong and where.
public struct JSONSyntaxError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var line: Int
    public var column: Int
    public var description: String { "\(line):\(column): \(message)" }
}

/// A byte-level JSON parser with line and column in its errors, and a nesting limit.
struct JSONParser {
    let bytes: [UInt8]
    var position = 0

    func error(_ message: String) -> JSONSyntaxError {
        var line = 1, column = 1
        for b in bytes[0..<min(position, bytes.count)] {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return JSONSyntaxError(message: message, line: line, column: column)
    }

    mutating func skipSpace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    mutating func value(depth: Int) throws(JSONSyntaxError) -> JSONValue {
        guard depth < 256 else { throw error("nesting too deep") }
        skipSpace()
        guard position < bytes.count else { throw error("expected a value, found the end") }
        switch bytes[position] {
        case 0x7B:
            position += 1
            var members: [(String, JSONValue)] = []
            skipSpace()
            if position < bytes.count, bytes[position] == 0x7D { position += 1; return .object(members) }
            while true {
                skipSpace()
                guard position < bytes.count, bytes[position] == 0x22 else { throw error("expected a member name") }
                let key = try string()
                skipSpace()
                guard position < bytes.count, bytes[position] == 0x3A else { throw error("expected ':'") }
                position += 1
                members.append((key, try value(depth: depth + 1)))
                skipSpace()
                guard position < bytes.count else { throw error("unterminated object") }
                let c = bytes[position]
                position += 1
                if c == 0x7D { return .object(members) }
                guard c == 0x2C else { position -= 1; throw error("expected ',' or '}'") }
            }
        case 0x5B:
            position += 1
            var items: [JSONValue] = []
            skipSpace()
            if position < bytes.count, bytes[position] == 0x5D { position += 1; return .array(items) }
            while true {
                items.append(try value(depth: depth + 1))
                skipSpace()
                guard position < bytes.count else { throw error("unterminated array") }
                let c = bytes[position]
                position += 1
                if c == 0x5D { return .array(items) }
                guard c == 0x2C else { position -= 1; throw error("expected ',' or ']'") }
            }
        case 0x22:
            return .string(try string())
        case 0x74:
            try literal("true"); return .bool(true)
        case 0x66:
            try literal("false"); return .bool(false)
        case 0x6E:
            try literal("null"); return .null
        default:
            let start = position
            while position < bytes.count, "+-.eE0123456789".utf8.contains(bytes[position]) { position += 1 }
            guard position > start, let n = Double(String(decoding: bytes[start..<position], as: UTF8.self)) else {
                position = start
                throw error("expected a value")
            }
            // 1e400 reads as infinity: refused here, so that no store or file ever holds it.
            guard n.isFinite else {
                position = start
                throw error("the number is out of range (past ±1.8e308)")
            }
            return .number(n)
        }
    }

    mutating func literal(_ word: String) throws(JSONSyntaxError) {
        let w = Array(word.utf8)
        guard position + w.count <= bytes.count, Array(bytes[position..<(position + w.count)]) == w else { throw error("expected a value") }
        position += w.count
    }

    mutating func string() throws(JSONSyntaxError) -> String {
        position += 1
        let start = position
        var plain = true
        while position < bytes.count, bytes[position] != 0x22 {
            if bytes[position] == 0x5C { plain = false; position += 1 }
            else if bytes[position] < 0x20 { throw error("control character in a string (escape it)") }
            position += 1
        }
        guard position < bytes.count else { throw error("unterminated string") }
        let end = position
        position += 1
        if plain { return String(decoding: bytes[start..<end], as: UTF8.self) }
        do {
            return try bytes.withUnsafeBufferPointer { all throws(JSONEscaping.InvalidEscape) in
                try JSONEscaping.unescape(UnsafeBufferPointer(rebasing: all[start..<end]))
            }
        } catch {
            position = start + error.offset
            throw self.error(error.message)
        }
    }
}
