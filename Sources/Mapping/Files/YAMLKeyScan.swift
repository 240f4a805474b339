import CYaml
import Diagnostics

/// A pass over a YAML document's events (libyaml's, the parser Yams itself runs) before Yams
/// composes it, refusing keys that are not plain values: a list or mapping used as a key, or an
/// alias of one. Mapping files and configurations never need them, and Yams checks such keys
/// for duplicates by hashing and sorting them, which takes time exponential in their nesting
/// (the `server-config` fuzzer found 1.5 KB of nested keys that ran for ten minutes).
enum YAMLKeyScan {
    /// The first key that is not a plain value, as an error at its place; nil when there is
    /// none, or when the text does not parse (Yams then reports the syntax error itself).
    static func firstComplexKey(_ text: String, file: String) -> Diagnostic? {
        var bytes = Array(text.utf8)
        return bytes.withUnsafeMutableBufferPointer { buffer -> Diagnostic? in
            var parser = yaml_parser_t()
            guard yaml_parser_initialize(&parser) == 1 else { return nil }
            defer { yaml_parser_delete(&parser) }
            yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
            var scan = KeyScan()
            var event = yaml_event_t()
            while yaml_parser_parse(&parser, &event) == 1 {
                defer { yaml_event_delete(&event) }
                if event.type == YAML_STREAM_END_EVENT { return nil }
                if let refusal = scan.take(event) {
                    let mark = event.start_mark
                    return Diagnostic(.error, SourceLocation(file: file, line: Int(mark.line) + 1, column: Int(mark.column) + 1), refusal)
                }
            }
            return nil
        }
    }

    /// Where the scan is: the open lists and mappings (for a mapping, whether a key comes next),
    /// and the anchors that name lists or mappings.
    struct KeyScan {
        var open: [Bool?] = []  // nil: a list; true: a mapping awaiting a key; false: awaiting a value
        var collectionAnchors: Set<String> = []

        /// Takes one event; a refusal when it is a key that is not a plain value.
        mutating func take(_ event: yaml_event_t) -> String? {
            switch event.type {
            case YAML_SCALAR_EVENT:
                node()
            case YAML_ALIAS_EVENT:
                let name = Self.text(event.data.alias.anchor)
                if atKey && collectionAnchors.contains(name) { return "YAML: a key must be a plain value, not an alias of a list or mapping (*\(name))" }
                node()
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                let mapping = event.type == YAML_MAPPING_START_EVENT
                if atKey { return "YAML: a key must be a plain value, not a \(mapping ? "mapping" : "list")" }
                let anchor = mapping ? event.data.mapping_start.anchor : event.data.sequence_start.anchor
                if anchor != nil { collectionAnchors.insert(Self.text(anchor)) }
                node()
                open.append(mapping ? true : nil)
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                _ = open.popLast()
            default:
                break
            }
            return nil
        }

        var atKey: Bool { open.last == .some(true) }

        /// A node began where the innermost mapping awaited a key or a value: it awaits the other.
        mutating func node() {
            if let last = open.last, let awaitingKey = last { open[open.count - 1] = !awaitingKey }
        }

        static func text(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String {
            pointer.map { String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self)) } ?? ""
        }
    }
}
