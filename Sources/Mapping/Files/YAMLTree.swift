import Diagnostics
import Foundation
import Yams

/// A YAML document as a plain tree with the position of every node, so that every finding can
/// name its line and column. Built from Yams' composed nodes.
indirect enum YAMLTree: Sendable {
    /// A scalar; `quoted` tells whether the text in the file starts one character later (a quote).
    case scalar(String, at: SourceLocation, quoted: Bool)
    case mapping([(key: String, keyAt: SourceLocation, value: YAMLTree)], at: SourceLocation)
    case sequence([YAMLTree], at: SourceLocation)

    var location: SourceLocation {
        switch self {
        case .scalar(_, let at, _), .mapping(_, let at), .sequence(_, let at): at
        }
    }

    /// What the node is, for messages (`a list`, `a mapping`, `text`).
    var kindName: String {
        switch self {
        case .scalar: "a value"
        case .mapping: "a mapping of keys"
        case .sequence: "a list"
        }
    }

    var scalar: String? {
        if case .scalar(let s, _, _) = self { return s }
        return nil
    }

    /// Parses YAML text; a syntax error is one diagnostic at its place.
    static func parse(_ text: String, file: String) throws(MappingError) -> YAMLTree? {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw MappingError([YAMLTree.diagnostic(error, file: file)])
        } catch {
            throw MappingError([Diagnostic(.error, SourceLocation(file: file, line: 1, column: 1), "not YAML: \(error)")])
        }
        return node.map { convert($0, file: file) }
    }

    static func diagnostic(_ error: YamlError, file: String) -> Diagnostic {
        func at(_ mark: Mark) -> SourceLocation { SourceLocation(file: file, line: mark.line, column: mark.column) }
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

    private static func convert(_ node: Node, file: String) -> YAMLTree {
        let at = SourceLocation(file: file, line: node.mark?.line ?? 1, column: node.mark?.column ?? 1)
        switch node {
        case .scalar(let scalar):
            let quoted = scalar.style == .singleQuoted || scalar.style == .doubleQuoted
            return .scalar(scalar.string, at: at, quoted: quoted)
        case .mapping(let mapping):
            return .mapping(mapping.map { pair in
                let keyAt = pair.key.mark.map { SourceLocation(file: file, line: $0.line, column: $0.column) } ?? at
                return (pair.key.string ?? "", keyAt, convert(pair.value, file: file))
            }, at: at)
        case .sequence(let sequence):
            return .sequence(sequence.map { convert($0, file: file) }, at: at)
        case .alias:
            return .scalar("", at: at, quoted: false)
        }
    }
}
