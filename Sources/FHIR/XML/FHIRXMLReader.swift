internal import CLibXML2
import Diagnostics

#if canImport(Glibc)
import Glibc
#endif

/// Reads FHIR R4 XML into `Element` trees with libxml2's SAX2 parser.
///
/// Safe by construction: every byte passes `XMLMarkupScan` before libxml2 parses it, so a
/// document type declaration anywhere is refused before libxml2 sees it, and so is an element
/// with more attributes than any FHIR element has (libxml2 2.9 takes time in their square).
/// Documents are read as UTF-8 whatever they declare (FHIR XML is UTF-8), so no encoding
/// converter runs. Even so, the parser runs without network access, DTD loading or entity
/// substitution, external entity loading is disabled process-wide, and entity references are
/// errors. Any error libxml2 reports is an error. libxml2 hands over each tag as it parses it and
/// builds no document of its own, so files are streamed in chunks and document size is bounded
/// only by the configured limit; Bundles can be read entry by entry with `BundleEntryStream`.
public struct FHIRXMLReader: Sendable {
    /// Limits, leniency and the source name for locations.
    public var options: ParseOptions

    /// A reader with these options.
    public init(options: ParseOptions = ParseOptions()) {
        self.options = options
    }

    /// Reads one resource from XML bytes.
    public func read(_ bytes: [UInt8]) throws(FHIRFormatError) -> ParsedResource {
        guard bytes.count <= options.maximumDocumentSize else {
            throw .limitExceeded(ParseIssue(.error, .limit,
                "document is \(bytes.count) bytes, larger than the limit of \(options.maximumDocumentSize)",
                at: SourceLocation(file: options.sourceName)))
        }
        return try XMLResourceParser(bytes: bytes, options: options).parseDocument()
    }

    /// Reads one resource from an XML string.
    public func read(_ text: String) throws(FHIRFormatError) -> ParsedResource {
        try read(Array(text.utf8))
    }

    /// Reads one resource from an XML file, streaming it from disk.
    public func read(contentsOf path: String) throws(FHIRFormatError) -> ParsedResource {
        var options = self.options
        if options.sourceName == nil { options.sourceName = path }
        return try XMLResourceParser(path: path, options: options).parseDocument()
    }
}

/// Process-wide libxml2 set-up, done once: no external entity is ever loaded.
enum LibXML2Setup {
    static let once: Void = {
        xmlInitParser()
        xmlSetExternalEntityLoader { _, _, _ in nil }
    }()
}

/// Drives libxml2's push parser over a document in memory or a file, chunk by chunk, with
/// `XMLTreeBuilder` receiving its events; hands out the resource, or a Bundle's entries one by
/// one. Owns the parser context and the builder, and frees both.
final class XMLResourceParser {
    let options: ParseOptions
    private let context: xmlParserCtxtPtr
    private let builder: UnsafeMutablePointer<XMLTreeBuilder>
    private enum Input {
        case memory([UInt8], offset: Int)
        case file(ChunkedFileReader)
    }
    private var input: Input
    private var chunk: [UInt8] = []
    private var inputEnded = false
    /// The scan of a file's bytes as they are read; its refusal stops the input.
    private var scan = XMLMarkupScan()
    private static let chunkSize = 256 * 1024
    /// The entry `run()` handed out last, when streaming a Bundle's entries.
    var streamedEntry: Element?

    /// The issues of what `run()` returned last: an entry, or the rest of the document.
    private var handedOut = XMLIssueLog()
    var issues: [ParseIssue] {
        get { handedOut.issues }
        set { handedOut.issues = newValue }
    }

    /// When set, the root Bundle's entries are handed out one by one instead of kept.
    var streamEntries: Bool {
        get { builder.pointee.streamEntries }
        set { builder.pointee.streamEntries = newValue }
    }

    convenience init(bytes: [UInt8], options: ParseOptions) throws(FHIRFormatError) {
        let refused = bytes.withUnsafeBytes { raw in
            var scan = XMLMarkupScan()
            return scan.scan(raw).map { XMLResourceParser.refused($0, line: XMLMarkupScan.line(of: $0.offset, in: raw), options: options) }
        }
        if let refused { throw refused }
        try self.init(input: .memory(bytes, offset: 0), options: options)
    }

    convenience init(path: String, options: ParseOptions) throws(FHIRFormatError) {
        try self.init(input: .file(try ChunkedFileReader(path: path)), options: options)
    }

    private init(input: Input, options: ParseOptions) throws(FHIRFormatError) {
        _ = LibXML2Setup.once
        caregate_silence_generic_errors()
        self.options = options
        self.input = input
        builder = .allocate(capacity: 1)
        builder.initialize(to: XMLTreeBuilder(options: options))
        var handler = XMLSAXEvents.handler()
        guard let created = xmlCreatePushParserCtxt(&handler, builder, nil, 0, options.sourceName) else {
            builder.deinitialize(count: 1)
            builder.deallocate()
            throw .malformed(ParseIssue(.error, .syntax, "cannot start the XML parser", at: SourceLocation(file: options.sourceName)))
        }
        context = created
        xmlCtxtUseOptions(created, XMLResourceParser.parserOptions)
        builder.pointee.context = created
    }

    deinit {
        xmlFreeParserCtxt(context)
        builder.deinitialize(count: 1)
        builder.deallocate()
    }

    /// No network, no entity substitution, no DTD loading or validation; libxml2's own
    /// size and depth hardening stays on (no XML_PARSE_HUGE). The declaration's encoding is
    /// ignored (FHIR XML is UTF-8, and `XMLMarkupScan` refuses documents that start as UTF-16,
    /// UTF-32 or EBCDIC), so no encoding converter runs and a byte that is not UTF-8 is an error
    /// libxml2 reports with its line.
    static let parserOptions: Int32 = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOXINCNODE.rawValue | XML_PARSE_BIG_LINES.rawValue
                                            | XML_PARSE_IGNORE_ENC.rawValue)

    /// The error for what `XMLMarkupScan` refused, at its line.
    static func refused(_ refusal: XMLMarkupScan.Refusal, line: Int, options: ParseOptions) -> FHIRFormatError {
        let code: ParseIssue.Code = switch refusal.reason {
        case .doctype: .forbidden
        case .attributes: .limit
        case .notUTF8: .syntax
        }
        return .malformed(ParseIssue(.error, code, refusal.message,
                              at: SourceLocation(file: options.sourceName, line: line)))
    }

    /// The error for what the scan of a file refused, if it refused anything: its line is counted
    /// by reading the file again up to the refused byte (only on this error path).
    private func fileRefusal() -> FHIRFormatError? {
        guard let refusal = scan.refusal, case .file(let file) = input else { return nil }
        var line = 1
        if let reader = try? ChunkedFileReader(path: file.path) {
            var buffer: [UInt8] = []
            var seen = 0
            while seen < refusal.offset, (try? reader.read(into: &buffer, count: min(64 * 1024, refusal.offset - seen))) ?? 0 > 0 {
                line += buffer.withUnsafeBytes { XMLMarkupScan.line(of: $0.count, in: $0) } - 1
                seen += buffer.count
                buffer.removeAll(keepingCapacity: true)
            }
        }
        return XMLResourceParser.refused(refusal, line: line, options: options)
    }

    // MARK: Reading

    /// Reads the whole document.
    func parseDocument() throws(FHIRFormatError) -> ParsedResource {
        guard let root = try run() else {
            throw syntaxError(builder.pointee.frames.isEmpty ? "the document has no root element"
                              : "the document ends before <\(builder.pointee.frames[0].element.name)> is closed")
        }
        if let error = reportedError() { throw error }
        resolveColumns()
        if issues.contains(where: { $0.severity == .error }) { throw .invalid(issues) }
        return ParsedResource(resource: root, warnings: issues)
    }

    /// Parses on until the whole document is read (the root is returned) or, when streaming
    /// Bundle entries, until the next entry is complete (left in `streamedEntry` with its issues
    /// in `issues`, and nil returned). Entries complete before an error are handed out first.
    func run() throws(FHIRFormatError) -> Element? {
        while true {
            if builder.pointee.streamEntries, let next = builder.pointee.takeEntry() {
                streamedEntry = next.entry
                handedOut = next.log
                return nil
            }
            if let fatal = builder.pointee.fatal { throw fatal }
            if let refusal = fileRefusal() { throw refusal }
            if builder.pointee.libxmlError != nil && inputEnded { throw syntaxError("malformed XML") }
            if inputEnded {
                handedOut = builder.pointee.log
                builder.pointee.log = XMLIssueLog()
                return builder.pointee.root
            }
            try feed()
        }
    }

    /// Hands libxml2 the next chunk of input, or tells it the input has ended.
    private func feed() throws(FHIRFormatError) {
        switch input {
        case .memory(let bytes, let offset):
            let count = min(XMLResourceParser.chunkSize, bytes.count - offset)
            let last = offset + count == bytes.count
            bytes.withUnsafeBytes { raw in
                let start = raw.baseAddress.map { ($0 + offset).assumingMemoryBound(to: CChar.self) }
                _ = xmlParseChunk(context, start, Int32(count), last ? 1 : 0)
            }
            input = .memory(bytes, offset: offset + count)
            inputEnded = last
        case .file(let file):
            chunk.removeAll(keepingCapacity: true)
            let count = try file.read(into: &chunk, count: XMLResourceParser.chunkSize)
            if count > 0, chunk.withUnsafeBytes({ scan.scan($0) }) != nil { inputEnded = true; return }
            chunk.withUnsafeBytes { raw in
                _ = xmlParseChunk(context, raw.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(count), count == 0 ? 1 : 0)
            }
            inputEnded = count == 0
        }
        if builder.pointee.fatal != nil || (builder.pointee.libxmlError != nil && context.pointee.disableSAX != 0) {
            inputEnded = true
        }
    }

    /// Anything libxml2 reported, even when reading went on (a warning such as an XML version
    /// other than 1.0 included), or what the markup scan refused: an error, whole or streamed.
    func reportedError() -> FHIRFormatError? {
        builder.pointee.libxmlError != nil || scan.refusal != nil ? syntaxError("malformed XML") : nil
    }

    func syntaxError(_ fallback: String) -> FHIRFormatError {
        if let refusal = fileRefusal() { return refusal }
        if let error = builder.pointee.libxmlError {
            return .malformed(ParseIssue(.error, .syntax, error.message,
                at: SourceLocation(file: options.sourceName, line: error.line, column: error.column, path: builder.pointee.pathString())))
        }
        return .malformed(ParseIssue(.error, .syntax, fallback, at: location()))
    }

    /// Where the parser is: the source, line and element path.
    func location() -> SourceLocation {
        builder.pointee.location()
    }

    /// Fills in the columns of the issues in `issues`.
    func resolveColumns() {
        var source: XMLIssueLog.Source = .none
        switch input {
        case .memory(let bytes, _): source = .memory(bytes)
        case .file(let file): source = .file(file.path)
        }
        handedOut.resolveColumns(in: source)
    }
}

/// libxml2's SAX2 callbacks, each passing its event to the `XMLTreeBuilder` it was given.
enum XMLSAXEvents {
    /// The handler a parser copies when it is made.
    static func handler() -> xmlSAXHandler {
        var handler = xmlSAXHandler()
        handler.initialized = XML_SAX2_MAGIC
        handler.startElementNs = { context, localName, prefix, uri, namespaceCount, namespaces, attributeCount, _, attributes in
            guard let localName else { return }
            XMLSAXEvents.builder(context).pointee.start(XMLStartTag(localName: localName, prefix: prefix, uri: uri,
                namespaceCount: Int(namespaceCount), namespaces: namespaces,
                attributeCount: Int(attributeCount), attributes: attributes))
        }
        handler.endElementNs = { context, localName, prefix, _ in
            guard let localName else { return }
            XMLSAXEvents.builder(context).pointee.end(localName: localName, prefix: prefix)
        }
        handler.characters = { context, characters, length in
            guard let characters else { return }
            XMLSAXEvents.builder(context).pointee.text(UnsafeBufferPointer(start: characters, count: Int(length)))
        }
        handler.ignorableWhitespace = handler.characters
        handler.cdataBlock = { context, characters, length in
            guard let characters else { return }
            XMLSAXEvents.builder(context).pointee.cdata(UnsafeBufferPointer(start: characters, count: Int(length)))
        }
        handler.comment = { context, value in
            XMLSAXEvents.builder(context).pointee.markup(open: "<!--", value, close: "-->")
        }
        handler.processingInstruction = { context, target, data in
            guard let target else { return }
            XMLSAXEvents.builder(context).pointee.instruction(target: target, data: data)
        }
        handler.reference = { context, _ in
            XMLSAXEvents.builder(context).pointee.stop(.malformed(ParseIssue(.error, .forbidden, "entity references are not allowed",
                                                                at: XMLSAXEvents.builder(context).pointee.location())))
        }
        handler.internalSubset = { context, _, _, _ in
            XMLSAXEvents.builder(context).pointee.stop(.malformed(ParseIssue(.error, .forbidden,
                "document type declarations (DTDs) are not allowed in FHIR XML", at: XMLSAXEvents.builder(context).pointee.location())))
        }
        handler.serror = { context, error in
            guard let context, let error else { return }
            XMLSAXEvents.builder(context).pointee.noteLibXMLError(error.pointee)
        }
        return handler
    }

    @inline(__always)
    fileprivate static func builder(_ context: UnsafeMutableRawPointer?) -> UnsafeMutablePointer<XMLTreeBuilder> {
        context.unsafelyUnwrapped.assumingMemoryBound(to: XMLTreeBuilder.self)
    }
}
