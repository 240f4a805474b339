import Diagnostics
/// Reads a Bundle file entry by entry, holding one entry in memory at a time, in JSON or XML.
///
/// `next()` returns each `Bundle.entry` (with its `fullUrl`, `resource`, `request`...) in order.
/// After the last entry, `bundle` holds the Bundle itself without its entries (type, id, links,
/// total, signature), so nothing of the file is lost.
///
/// ```swift
/// let stream = try BundleEntryStream(path: "big-bundle.json")
/// while let entry = try stream.next() {
///     print(entry["resource"]?.resourceType ?? "-")
/// }
/// ```
public final class BundleEntryStream {
    private enum Source {
        case json(JSONBundleScanner)
        case xml(XMLResourceParser)
    }
    private let source: Source
    /// Warnings found so far (unknown elements kept, demoted errors in lenient mode).
    public private(set) var warnings: [ParseIssue] = []
    /// The Bundle without its entries; complete once `next()` has returned nil.
    public private(set) var bundle: Element?
    private var finished = false

    /// Opens a Bundle file; the format comes from the extension or, failing that, the content.
    public init(path: String, format: FHIRFormat? = nil, options: ParseOptions = ParseOptions()) throws(FHIRFormatError) {
        var options = options
        if options.sourceName == nil { options.sourceName = path }
        let resolved: FHIRFormat
        if let format { resolved = format } else { resolved = try FHIRFormat.detect(path: path) }
        switch resolved {
        case .json:
            source = .json(try JSONBundleScanner(path: path, options: options))
        case .xml:
            let parser = try XMLResourceParser(path: path, options: options)
            parser.streamEntries = true
            source = .xml(parser)
        case .ndjson:
            throw .malformed(ParseIssue(.error, .structure, "an NDJSON file is not a Bundle; read it with NDJSONReader",
                                        at: SourceLocation(file: path)))
        }
    }

    /// The next entry, or nil after the last one.
    public func next() throws(FHIRFormatError) -> Element? {
        guard !finished else { return nil }
        switch source {
        case .json(let scanner):
            if let entry = try scanner.nextEntry() {
                warnings += scanner.takeWarnings()
                return entry
            }
            finished = true
            let shell = try scanner.finish()
            warnings += shell.warnings
            bundle = shell.resource
            return nil
        case .xml(let parser):
            return try nextXML(parser)
        }
    }

    private func nextXML(_ parser: XMLResourceParser) throws(FHIRFormatError) -> Element? {
        parser.streamedEntry = nil
        let root = try parser.run()
        if let error = parser.reportedError() { throw error }
        parser.resolveColumns()
        if parser.issues.contains(where: { $0.severity == .error }) {
            let issues = parser.issues
            parser.issues.removeAll()
            throw .invalid(issues)
        }
        warnings += parser.issues
        parser.issues.removeAll()
        if let entry = parser.streamedEntry {
            return entry
        }
        finished = true
        guard let root else { throw parser.syntaxError("the document ended early") }
        guard root.resourceType == "Bundle" else {
            throw .malformed(ParseIssue(.error, .structure, "the document is a \(root.resourceType ?? root.name), not a Bundle",
                                        at: SourceLocation(file: parser.options.sourceName)))
        }
        bundle = root
        return nil
    }
}

/// Scans a JSON Bundle from a file in chunks: top-level properties are collected into a shell,
/// and the `entry` array's items are cut out one at a time and parsed as `Bundle.entry`.
final class JSONBundleScanner {
    private let file: ChunkedFileReader
    private let options: ParseOptions
    private var buffer: [UInt8] = []
    private var pos = 0
    private var discardedLines = 0
    /// The shell Bundle's JSON text: every top-level property except `entry`.
    private var shell: [UInt8] = [0x7B]
    private var shellHasMembers = false
    private var inEntries = false
    private var entryIndex = 0
    /// Entries read from the entry array in hand (an empty one is refused).
    private var entriesInArray = 0
    private var started = false
    private var warnings: [ParseIssue] = []
    private let entryType = ModelInfo.r4.type(named: "Bundle.entry")!

    init(path: String, options: ParseOptions) throws(FHIRFormatError) {
        file = try ChunkedFileReader(path: path)
        self.options = options
    }

    func takeWarnings() -> [ParseIssue] {
        defer { warnings.removeAll() }
        return warnings
    }

    // MARK: Buffer

    /// Makes sure `buffer[pos..<pos+n]` is loaded if the file has it; false at the end.
    private func ensure(_ n: Int) throws(FHIRFormatError) -> Bool {
        while buffer.count - pos < n {
            if file.isAtEnd { return false }
            _ = try file.read(into: &buffer, count: 1 << 20)
        }
        return true
    }

    /// Drops bytes before `pos`, counting the lines they held.
    private func compact() {
        guard pos > 1 << 20 || pos == buffer.count else { return }
        discardedLines = lineNumber(at: pos) - 1
        buffer.removeSubrange(0..<pos)
        pos = 0
        countedOffset = 0
        countedLines = 0
    }

    private func location() -> SourceLocation {
        var line = discardedLines + 1
        var column = 1
        for b in buffer[0..<min(pos, buffer.count)] {
            if b == 0x0A { line += 1; column = 1 } else if b & 0xC0 != 0x80 { column += 1 }
        }
        return SourceLocation(file: options.sourceName, line: line, column: column,
                              path: inEntries ? "Bundle.entry[\(entryIndex)]" : "Bundle")
    }

    private func syntax(_ message: String) -> FHIRFormatError {
        .malformed(ParseIssue(.error, .syntax, message, at: location()))
    }

    private func peek() throws(FHIRFormatError) -> UInt8? {
        while true {
            guard try ensure(1) else { return nil }
            let b = buffer[pos]
            if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 { pos += 1 } else { return b }
        }
    }

    /// The extent of the complete JSON value at `pos`, loading more of the file as needed.
    private func valueExtent() throws(FHIRFormatError) -> Range<Int> {
        guard let first = try peek() else { throw syntax("expected a value, found end of input") }
        let start = pos
        var i = pos
        if first == 0x7B || first == 0x5B {
            var depth = 0
            var inString = false
            while true {
                if i >= buffer.count {
                    if file.isAtEnd { throw syntax("unterminated \(first == 0x7B ? "object" : "array")") }
                    if buffer.count - start > options.maximumDocumentSize {
                        throw .limitExceeded(ParseIssue(.error, .limit,
                            "an entry is larger than the limit of \(options.maximumDocumentSize) bytes", at: location()))
                    }
                    _ = try file.read(into: &buffer, count: 1 << 20)
                    continue
                }
                let b = buffer[i]
                if inString {
                    if b == 0x5C { i += 2; continue }
                    if b == 0x22 { inString = false }
                } else if b == 0x22 {
                    inString = true
                } else if b == 0x7B || b == 0x5B {
                    depth += 1
                    if depth > options.maximumDepth {
                        throw .limitExceeded(ParseIssue(.error, .limit, "nesting deeper than the limit of \(options.maximumDepth)", at: location()))
                    }
                } else if b == 0x7D || b == 0x5D {
                    depth -= 1
                    if depth == 0 { i += 1; break }
                }
                i += 1
            }
        } else if first == 0x22 {
            i += 1
            while true {
                if i >= buffer.count {
                    if file.isAtEnd { throw syntax("unterminated string") }
                    _ = try file.read(into: &buffer, count: 1 << 20)
                    continue
                }
                if buffer[i] == 0x5C { i += 2; continue }
                if buffer[i] == 0x22 { i += 1; break }
                i += 1
            }
        } else {
            while true {
                if i >= buffer.count {
                    if file.isAtEnd { break }
                    _ = try file.read(into: &buffer, count: 1 << 20)
                    continue
                }
                let b = buffer[i]
                if b == 0x2C || b == 0x7D || b == 0x5D || Lexical.isWhitespace(b) { break }
                i += 1
            }
        }
        pos = i
        return start..<i
    }

    // MARK: Walking the Bundle

    /// Advances to the next entry and parses it; nil when the entries are done.
    func nextEntry() throws(FHIRFormatError) -> Element? {
        if !started {
            started = true
            if try ensure(3), buffer[0] == 0xEF, buffer[1] == 0xBB, buffer[2] == 0xBF { pos = 3 }
            guard try peek() == 0x7B else { throw syntax("expected a FHIR Bundle (a JSON object)") }
            pos += 1
            if try peek() == 0x7D { pos += 1; try expectEnd(); return nil }
            guard try advanceToEntries() else { return nil }
        }
        guard inEntries else { return nil }
        // Inside the entry array: `[` already consumed; at an item or `]`.
        guard let b = try peek() else { throw syntax("unterminated entry array") }
        if b == 0x5D {
            if entriesInArray == 0 {
                // `"entry": []`: an error, as in a whole read (a warning when lenient).
                let issue = ParseIssue(options.lenient ? .warning : .error, .structure, "Bundle.entry: empty array (FHIR JSON has no empty arrays)", at: location())
                guard options.lenient else { throw .invalid([issue]) }
                warnings.append(issue)
            }
            pos += 1
            inEntries = false
            try afterProperty()
            guard try advanceToEntries() else { return nil }
            return try nextEntry()
        }
        let extent = try valueExtent()
        let lineBase = lineNumber(at: extent.lowerBound)
        let index = entryIndex
        let entry = try buffer.withUnsafeBufferPointer { all throws(FHIRFormatError) -> Element in
            var parser = JSONParser(input: UnsafeBufferPointer(rebasing: all[extent]), options: options, lineOffset: lineBase - 1)
            parser.path = [.init(name: "Bundle", index: -1), .init(name: "entry", index: index)]
            guard parser.peek() == 0x7B else { throw parser.syntaxError("an entry must be an object") }
            let entrySlot = ModelInfo.r4.type(named: "Bundle")!.element(named: "entry")!.slot
            var element = Element(name: "entry", typeIndex: entryType.index, slot: entrySlot)
            try parser.parseObject(type: entryType, into: &element, isResource: false)
            if parser.issues.contains(where: { $0.severity == .error }) { throw .invalid(parser.issues) }
            warnings += parser.issues
            return element
        }
        entryIndex += 1
        entriesInArray += 1
        guard let next = try peek() else { throw syntax("unterminated entry array") }
        if next == 0x2C {
            pos += 1
            // JSON has no trailing comma: `[{…}, ]` is refused, as the whole read refuses it.
            if try peek() == 0x5D { throw syntax("expected an entry after ','") }
        } else if next != 0x5D {
            throw syntax("expected ',' or ']' after an entry")
        }
        compact()
        return entry
    }

    /// Newlines in `buffer[0..<countedOffset]`: entries are cut out in order, so each count
    /// carries on from the last instead of rescanning the buffer.
    private var countedOffset = 0
    private var countedLines = 0

    /// The 1-based line of a buffer offset.
    private func lineNumber(at offset: Int) -> Int {
        if offset < countedOffset { countedOffset = 0; countedLines = 0 }
        for b in buffer[countedOffset..<offset] where b == 0x0A { countedLines += 1 }
        countedOffset = offset
        return discardedLines + countedLines + 1
    }

    /// Copies top-level properties into the shell until `"entry": [` (true) or the end (false).
    private func advanceToEntries() throws(FHIRFormatError) -> Bool {
        while true {
            guard let b = try peek() else { throw syntax("unterminated Bundle object") }
            if b == 0x7D { pos += 1; try expectEnd(); return false }
            guard b == 0x22 else { throw syntax("expected a property name") }
            let keyRange = try valueExtent()
            let key = buffer[keyRange]
            guard try peek() == 0x3A else { throw syntax("expected ':'") }
            pos += 1
            if key.elementsEqual("\"entry\"".utf8) {
                guard try peek() == 0x5B else { throw syntax("Bundle.entry must be an array") }
                pos += 1
                inEntries = true
                entriesInArray = 0
                return true
            }
            let valueRange = try valueExtent()
            if shellHasMembers { shell.append(0x2C) }
            shellHasMembers = true
            shell.append(contentsOf: key)
            shell.append(0x3A)
            shell.append(contentsOf: buffer[valueRange])
            try afterProperty()
            compact()
        }
    }

    /// After the Bundle's closing brace only whitespace may follow, as for a whole-document read.
    private func expectEnd() throws(FHIRFormatError) {
        guard try peek() != nil else { return }
        throw syntax("unexpected content after the resource: '\(String(decoding: buffer[pos..<min(pos + 12, buffer.count)], as: UTF8.self))'")
    }

    private func afterProperty() throws(FHIRFormatError) {
        guard let b = try peek() else { throw syntax("unterminated Bundle object") }
        if b == 0x2C {
            pos += 1
            if try peek() == 0x7D { throw syntax("expected a property after ','") }
        } else if b != 0x7D {
            throw syntax("expected ',' or '}'")
        }
    }

    /// Parses the shell (the Bundle without entries) once the file is done.
    func finish() throws(FHIRFormatError) -> ParsedResource {
        shell.append(0x7D)
        var options = self.options
        options.sourceName = (options.sourceName ?? "") + " (Bundle without entries)"
        let parsed = try FHIRJSONReader(options: options).read(shell)
        guard parsed.resource.resourceType == "Bundle" else {
            throw .malformed(ParseIssue(.error, .structure,
                "the document is a \(parsed.resource.resourceType ?? "?"), not a Bundle", at: SourceLocation(file: self.options.sourceName)))
        }
        return parsed
    }
}
