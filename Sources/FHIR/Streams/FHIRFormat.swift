import Diagnostics
/// The three FHIR serialisations CareGate reads and writes.
public enum FHIRFormat: String, Sendable, CaseIterable {
    /// FHIR JSON, FHIR XML, or newline-delimited JSON (one resource a line).
    case json, xml, ndjson

    /// The format of a file: by extension (`.json`, `.xml`, `.ndjson`, `.jsonl`), else by
    /// content (`<` is XML; `{` is JSON, or NDJSON when a second line holds another object).
    public static func detect(path: String) throws(FHIRFormatError) -> FHIRFormat {
        let lower = path.lowercased()
        if lower.hasSuffix(".ndjson") || lower.hasSuffix(".jsonl") { return .ndjson }
        if lower.hasSuffix(".json") { return .json }
        if lower.hasSuffix(".xml") { return .xml }
        let head = try FileBytes.head(path)
        return detect(head: head, path: path)
    }

    /// The format of some bytes from a document's start.
    public static func detect(head: [UInt8], path: String = "") -> FHIRFormat {
        var i = 0
        if head.count >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF { i = 3 }
        while i < head.count, Lexical.isWhitespace(head[i]) { i += 1 }
        guard i < head.count else { return .json }
        if head[i] == 0x3C { return .xml }
        // JSON object per line: an NDJSON file has a newline after a complete first object.
        var depth = 0
        var inString = false
        var j = i
        while j < head.count {
            let b = head[j]
            if inString {
                if b == 0x5C { j += 2; continue }
                if b == 0x22 { inString = false }
            } else if b == 0x22 { inString = true }
            else if b == 0x7B || b == 0x5B { depth += 1 }
            else if b == 0x7D || b == 0x5D {
                depth -= 1
                if depth == 0 {
                    var k = j + 1
                    while k < head.count, head[k] == 0x20 || head[k] == 0x09 || head[k] == 0x0D { k += 1 }
                    guard k < head.count, head[k] == 0x0A else { return .json }
                    k += 1
                    while k < head.count, Lexical.isWhitespace(head[k]) { k += 1 }
                    return k < head.count && head[k] == 0x7B ? .ndjson : .json
                }
            } else if b == 0x0A && depth > 0 && j > i {
                // A line break inside the first object: pretty JSON, not NDJSON.
                return .json
            }
            j += 1
        }
        return .json
    }

    /// The usual file extension.
    public var fileExtension: String { rawValue }
}

/// Reading any FHIR file in one call.
public enum FHIRDocument {
    /// Reads one resource from a JSON or XML file (the format from `FHIRFormat.detect`).
    public static func read(contentsOf path: String, format: FHIRFormat? = nil, options: ParseOptions = ParseOptions()) throws(FHIRFormatError) -> ParsedResource {
        let resolved: FHIRFormat
        if let format { resolved = format } else { resolved = try FHIRFormat.detect(path: path) }
        switch resolved {
        case .json: return try FHIRJSONReader(options: options).read(contentsOf: path)
        case .xml: return try FHIRXMLReader(options: options).read(contentsOf: path)
        case .ndjson:
            throw .malformed(ParseIssue(.error, .structure, "an NDJSON file holds many resources; read it with NDJSONReader",
                                        at: SourceLocation(file: path)))
        }
    }

    /// Reads one resource as `read` does and, for a JSON Bundle, the text of each entry's
    /// `resource` as the file has it, by entry (nil for an entry without one, and for XML): what
    /// a reader that keeps resources for later keeps, instead of writing them again. `compacting`
    /// leaves out the whitespace between tokens (smaller to keep; copying as is is faster).
    public static func readKeepingEntryText(contentsOf path: String, format: FHIRFormat? = nil, options: ParseOptions = ParseOptions(),
                                            compacting: Bool = true) throws(FHIRFormatError) -> (parsed: ParsedResource, entryText: [[UInt8]?]?) {
        let resolved: FHIRFormat
        if let format { resolved = format } else { resolved = try FHIRFormat.detect(path: path) }
        guard resolved == .json else { return (try read(contentsOf: path, format: resolved, options: options), nil) }
        var options = options
        if options.sourceName == nil { options.sourceName = path }
        let bytes = try FileBytes.read(path, limit: options.maximumDocumentSize)
        return try bytes.withUnsafeBufferPointer { text throws(FHIRFormatError) in
            let (parsed, ranges) = try FHIRJSONReader(options: options).read(text, keepingEntryRanges: true)
            guard parsed.resource.resourceType == "Bundle" else { return (parsed, nil) }
            let entries = parsed.resource.children.filter { $0.name == "entry" }
            // Paired by position: only when every entry read with a resource has its range.
            guard ranges.count == entries.count(where: { $0["resource"] != nil }) else { return (parsed, nil) }
            var next = ranges.makeIterator()
            return (parsed, entries.map { entry in
                guard entry["resource"] != nil, let range = next.next() else { return nil }
                return compacting ? CompactJSON.text(text, range) : Array(text[range])
            })
        }
    }

    /// Serialises a resource in JSON or XML (pretty printed).
    public static func write(_ resource: Element, format: FHIRFormat, pretty: Bool = true) -> [UInt8] {
        switch format {
        case .json: return FHIRJSONWriter(pretty: pretty).write(resource)
        case .xml: return FHIRXMLWriter(pretty: pretty).write(resource)
        case .ndjson:
            var line = FHIRJSONWriter(pretty: false).write(resource)
            line.append(0x0A)
            return line
        }
    }
}
