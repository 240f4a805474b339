import Diagnostics
import FHIR
import Foundation
import Yams

/// A YAML document as a plain tree with the position of every node, so that every finding can
/// name its line and column. Built from Yams' composed nodes.
public indirect enum YAMLTree: Sendable {
    /// A scalar; `quoted` tells whether the text in the file starts one character later (a quote).
    case scalar(String, at: SourceLocation, quoted: Bool)
    /// A mapping, its keys in file order with their places.
    case mapping([(key: String, keyAt: SourceLocation, value: YAMLTree)], at: SourceLocation)
    /// A list.
    case sequence([YAMLTree], at: SourceLocation)

    /// Where the node starts.
    public var location: SourceLocation {
        switch self {
        case .scalar(_, let at, _), .mapping(_, let at), .sequence(_, let at): at
        }
    }

    /// What the node is, for messages (`a list`, `a mapping`, `text`).
    public var kindName: String {
        switch self {
        case .scalar: "a value"
        case .mapping: "a mapping of keys"
        case .sequence: "a list"
        }
    }

    /// The text of a scalar; nil for a mapping or a list.
    public var scalar: String? {
        if case .scalar(let s, _, _) = self { return s }
        return nil
    }

    /// Reads and parses a YAML file (through `FileBytes`: Foundation leaks on empty files);
    /// unreadable files and text that is not UTF-8 are one diagnostic each.
    public static func load(path: String) throws(MappingError) -> YAMLTree? {
        let bytes: [UInt8]
        do { bytes = try FileBytes.read(path, limit: 16 << 20) } catch {
            throw MappingError([Diagnostic(.error, SourceLocation(file: path, line: 0, column: 0), "cannot read: \(error.issues.first?.message ?? "\(error)")")])
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw MappingError([Diagnostic(.error, SourceLocation(file: path, line: 1, column: 1), "not UTF-8 text")])
        }
        return try parse(text, file: path)
    }

    /// Parses YAML text; a syntax error is one diagnostic at its place.
    public static func parse(_ text: String, file: String) throws(MappingError) -> YAMLTree? {
        if let refusal = YAMLKeyScan.firstComplexKey(text, file: file) { throw MappingError([refusal]) }
        let node: Node?
        do {
            // Scalars are kept as text (no tag resolution: Yams' default resolver runs regular
            // expressions over every value), and the encoding is given (the default reads the
            // environment at every parse).
            node = try Yams.compose(yaml: text, .basic, .default, .utf8)
        } catch let error as YamlError {
            throw MappingError([YAMLTree.diagnostic(error, at: Places(text, file: file))])
        } catch {
            throw MappingError([Diagnostic(.error, SourceLocation(file: file, line: 1, column: 1), "not YAML: \(error)")])
        }
        guard let node else { return nil }
        var budget = YAMLTree.maximumNodes
        guard let tree = convert(node, at: Places(text, file: file), budget: &budget) else {
            throw MappingError([Diagnostic(.error, SourceLocation(file: file, line: 1, column: 1),
                                           "YAML: the document expands to more than \(YAMLTree.maximumNodes) values (aliases nested in aliases?); mapping files are far smaller")])
        }
        return tree
    }

    /// The most values a mapping file may expand to, aliases included: a few hundred bytes of
    /// nested aliases would otherwise expand to gigabytes. The shipped files have a few thousand.
    static let maximumNodes = 100_000

    /// Where a libyaml mark is in the file. libyaml puts the end of a file without a final line
    /// break on the line after the last (an error there, or the null of an empty last document);
    /// such marks are shown at the end of the last line, a place the file has.
    struct Places {
        let file: String
        /// Lines as YAML counts them (LF, CR, CRLF, NEL, LS and PS each end one), and the
        /// characters on the last.
        let lines: Int
        let lastLineLength: Int

        init(_ text: String, file: String) {
            self.file = file
            var lines = 1, length = 0
            var previous: Unicode.Scalar = "\0"
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\n" where previous == "\r": break
                case "\n", "\r", "\u{85}", "\u{2028}", "\u{2029}": lines += 1; length = 0
                default: length += 1
                }
                previous = scalar
            }
            self.lines = lines
            lastLineLength = length
        }

        func location(line: Int, column: Int) -> SourceLocation {
            line > lines ? SourceLocation(file: file, line: lines, column: lastLineLength + 1)
                : SourceLocation(file: file, line: line, column: column)
        }

        func location(_ mark: Mark?) -> SourceLocation { location(line: mark?.line ?? 1, column: mark?.column ?? 1) }
    }

    static func diagnostic(_ error: YamlError, at places: Places) -> Diagnostic {
        let file = places.file
        func at(_ mark: Mark) -> SourceLocation { places.location(mark) }
        switch error {
        case .scanner(let context, let problem, let mark, _), .parser(let context, let problem, let mark, _), .composer(let context, let problem, let mark, _):
            let where_ = context.map { " \($0.text)" } ?? ""
            return Diagnostic(.error, at(mark), "YAML: \(problem)\(where_)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return Diagnostic(.error, at(context.mark), "YAML: the key \(duplicates.map { "'\($0)'" }.joined(separator: ", ")) appears twice in one mapping")
        default:
            return Diagnostic(.error, SourceLocation(file: file, line: 1, column: 1), "YAML: \(error)")
        }
    }

    /// The tree of a composed node, or nil once more than `budget` values have been made.
    private static func convert(_ node: Node, at places: Places, budget: inout Int) -> YAMLTree? {
        budget -= 1
        guard budget >= 0 else { return nil }
        let at = places.location(node.mark)
        switch node {
        case .scalar(let scalar):
            let quoted = scalar.style == .singleQuoted || scalar.style == .doubleQuoted
            return .scalar(scalar.string, at: at, quoted: quoted)
        case .mapping(let mapping):
            var pairs: [(key: String, keyAt: SourceLocation, value: YAMLTree)] = []
            for pair in mapping {
                let keyAt = pair.key.mark.map { places.location($0) } ?? at
                guard let value = convert(pair.value, at: places, budget: &budget) else { return nil }
                pairs.append((pair.key.string ?? "", keyAt, value))
            }
            return .mapping(pairs, at: at)
        case .sequence(let sequence):
            var items: [YAMLTree] = []
            for item in sequence {
                guard let value = convert(item, at: places, budget: &budget) else { return nil }
                items.append(value)
            }
            return .sequence(items, at: at)
        case .alias:
            return .scalar("", at: at, quoted: false)
        }
    }
}
