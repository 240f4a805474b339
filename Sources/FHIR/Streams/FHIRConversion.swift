import Diagnostics
/// Converts a FHIR file between JSON, XML and NDJSON, streaming where the shapes allow.
///
/// - a resource or Bundle in JSON or XML converts to the other format whole;
/// - to NDJSON, a Bundle's entries' resources become the lines (read entry by entry), and any
///   other resource becomes one line;
/// - NDJSON to JSON or XML becomes a `collection` Bundle, written entry by entry.
public struct FHIRConversion {
    /// How the input is read.
    public var options: ParseOptions
    /// Pretty-print JSON and XML output (NDJSON is always one line per resource).
    public var pretty: Bool

    /// What a conversion did.
    public struct Summary: Sendable {
        /// Resources written (for a Bundle converted whole, 1).
        public var resourcesWritten = 0
        /// Warnings from reading (unknown elements kept, and so on).
        public var warnings: [ParseIssue] = []
    }

    /// A conversion; `pretty` indents the output.
    public init(options: ParseOptions = ParseOptions(), pretty: Bool = true) {
        self.options = options
        self.pretty = pretty
    }

    /// Converts `inputPath` (in `from`, or the detected format) to `to`, writing to `output`.
    public func convert(inputPath: String, from: FHIRFormat? = nil, to: FHIRFormat, output: FHIROutput) throws(FHIRFormatError) -> Summary {
        var options = self.options
        if options.sourceName == nil { options.sourceName = inputPath }
        let source: FHIRFormat
        if let from { source = from } else { source = try FHIRFormat.detect(path: inputPath) }
        var summary = Summary()
        switch (source, to) {
        case (.ndjson, .ndjson):
            let reader = try NDJSONReader(path: inputPath, options: options)
            var writer = NDJSONWriter(output: output)
            while let parsed = try reader.next() {
                try writer.write(parsed.resource)
                summary.resourcesWritten += 1
                summary.warnings += parsed.warnings
            }
        case (.ndjson, _):
            let reader = try NDJSONReader(path: inputPath, options: options)
            var bundle = StreamingBundleWriter(format: to, output: output, pretty: pretty)
            try bundle.begin(type: "collection")
            while let parsed = try reader.next() {
                var entry = Element(name: "entry", type: "Bundle.entry")
                entry.append(renamed(parsed.resource, to: "resource"))
                try bundle.write(entry: entry)
                summary.resourcesWritten += 1
                summary.warnings += parsed.warnings
            }
            try bundle.end()
        case (_, .ndjson):
            var writer = NDJSONWriter(output: output)
            if try FHIRFormat.rootResourceType(path: inputPath, format: source) == "Bundle" {
                let stream = try BundleEntryStream(path: inputPath, format: source, options: options)
                while let entry = try stream.next() {
                    guard let resource = entry["resource"] else { continue }
                    try writer.write(renamed(resource, to: resource.resourceType ?? resource.name))
                    summary.resourcesWritten += 1
                }
                summary.warnings += stream.warnings
            } else {
                let parsed = try FHIRDocument.read(contentsOf: inputPath, format: source, options: options)
                try writer.write(parsed.resource)
                summary.resourcesWritten = 1
                summary.warnings = parsed.warnings
            }
        default:
            let parsed = try FHIRDocument.read(contentsOf: inputPath, format: source, options: options)
            try output.write(FHIRDocument.write(parsed.resource, format: to, pretty: pretty))
            if pretty && to == .json { try output.write([0x0A]) }
            summary.resourcesWritten = 1
            summary.warnings = parsed.warnings
        }
        summary.warnings = summary.warnings.map { Self.crossing($0, from: source, to: to) }
        return summary
    }

    /// Unknown content is kept verbatim in its own format, and the other format has no form for
    /// it: converting JSON to XML or back leaves it out, and its warning says so.
    static func crossing(_ issue: ParseIssue, from source: FHIRFormat, to target: FHIRFormat) -> ParseIssue {
        let isXML: (FHIRFormat) -> Bool = { $0 == .xml }
        guard issue.code == .unknownElement, isXML(source) != isXML(target), issue.message.hasSuffix(" (kept)") else { return issue }
        var moved = issue
        let (from, into) = isXML(source) ? ("XML", "JSON") : ("JSON", "XML")
        moved.message = String(issue.message.dropLast(" (kept)".count)) + " (left out: unknown \(from) content has no \(into) form)"
        return moved
    }

    private func renamed(_ element: Element, to name: String) -> Element {
        var copy = element
        copy.name = name
        return copy
    }
}

/// Writes a Bundle's frame and then its entries one at a time, so a large Bundle never has to
/// be held in memory.
public struct StreamingBundleWriter {
    let format: FHIRFormat
    let output: FHIROutput
    let pretty: Bool
    private var entries = 0

    /// A writer of a Bundle in `format` (JSON or XML) to `output`.
    public init(format: FHIRFormat, output: FHIROutput, pretty: Bool = true) {
        precondition(format != .ndjson, "NDJSON has no Bundle frame; use NDJSONWriter")
        self.format = format
        self.output = output
        self.pretty = pretty
    }

    /// Writes the start of a Bundle of the given type.
    public mutating func begin(type: String) throws(FHIRFormatError) {
        let nl = pretty ? "\n" : ""
        let indent = pretty ? "  " : ""
        switch format {
        case .json:
            try output.write(Array("{\(nl)\(indent)\"resourceType\": \"Bundle\",\(nl)\(indent)\"type\": \"\(type)\",\(nl)\(indent)\"entry\": [".utf8))
        default:
            try output.write(Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\(nl)<Bundle xmlns=\"http://hl7.org/fhir\">\(nl)\(indent)<type value=\"\(type)\"/>".utf8))
        }
    }

    /// Writes one `Bundle.entry` element.
    public mutating func write(entry: Element) throws(FHIRFormatError) {
        switch format {
        case .json:
            var emitter = JSONEmitter(pretty: pretty)
            if entries > 0 { emitter.out.append(0x2C) }
            emitter.newline(2)
            emitter.writeObject(entry, indent: 2)
            try output.write(emitter.out.bytes)
        default:
            var emitter = XMLEmitter(pretty: pretty)
            emitter.out.append(0x0A)
            withUnsafePointer(to: entry) { emitter.writeElement(at: $0, suffix: nil, indent: 1) }
            try output.write(emitter.out.bytes)
        }
        entries += 1
    }

    /// Closes the Bundle.
    public mutating func end() throws(FHIRFormatError) {
        let nl = pretty ? "\n" : ""
        switch format {
        case .json: try output.write(Array("\(nl)\(pretty ? "  " : "")]\(nl)}\(nl)".utf8))
        default: try output.write(Array("\(nl)</Bundle>\(nl)".utf8))
        }
    }
}

extension FHIRFormat {
    /// The resource type at the root of a JSON or XML file, when it can be seen from the first
    /// bytes (`resourceType` as the first JSON property, or the XML root element); else nil.
    public static func rootResourceType(path: String, format: FHIRFormat) throws(FHIRFormatError) -> String? {
        let head = try FileBytes.head(path)
        var i = 0
        if head.count >= 3 && head[0] == 0xEF && head[1] == 0xBB && head[2] == 0xBF { i = 3 }
        func skipSpace() { while i < head.count, Lexical.isWhitespace(head[i]) { i += 1 } }
        func name(until stop: (UInt8) -> Bool) -> String {
            let start = i
            while i < head.count, !stop(head[i]) { i += 1 }
            return String(decoding: head[start..<i], as: UTF8.self)
        }
        switch format {
        case .json, .ndjson:
            skipSpace()
            guard i < head.count, head[i] == 0x7B else { return nil }
            i += 1; skipSpace()
            guard i < head.count, head[i] == 0x22 else { return nil }
            i += 1
            guard name(until: { $0 == 0x22 }) == "resourceType" else { return nil }
            i += 1; skipSpace()
            guard i < head.count, head[i] == 0x3A else { return nil }
            i += 1; skipSpace()
            guard i < head.count, head[i] == 0x22 else { return nil }
            i += 1
            return name(until: { $0 == 0x22 })
        case .xml:
            while i < head.count {
                guard let lt = head[i...].firstIndex(of: 0x3C), lt + 1 < head.count else { return nil }
                i = lt + 1
                if head[i] == 0x3F || head[i] == 0x21 { continue }
                let qualified = name(until: { Lexical.isWhitespace($0) || $0 == 0x3E || $0 == 0x2F })
                return qualified.split(separator: ":").last.map(String.init)
            }
            return nil
        }
    }
}
