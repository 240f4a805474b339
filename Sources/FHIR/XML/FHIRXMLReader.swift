internal import CLibXML2
import Diagnostics

#if canImport(Glibc)
import Glibc
#endif

/// Reads FHIR R4 XML into `Element` trees with libxml2's streaming reader.
///
/// Safe by construction: every byte passes `XMLMarkupScan` before libxml2 parses it, so a
/// document type declaration anywhere is refused before libxml2 sees it, and so is an element
/// with more attributes than any FHIR element has (libxml2 2.9 takes time in their square).
/// Documents are read as UTF-8 whatever they declare (FHIR XML is UTF-8), so no encoding
/// converter runs. Even so, the parser runs without network access, DTD loading or entity
/// substitution, external entity loading is disabled process-wide, and entity references are
/// errors. Any error libxml2 reports, including a subtree deeper than it reads, is an error.
/// Files are streamed, so document size is bounded only by the configured limit; Bundles can be
/// read entry by entry with `FHIRXMLBundleReader`.
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
        var parser = try XMLResourceParser(bytes: bytes, options: options)
        return try parser.parseDocument()
    }

    /// Reads one resource from an XML string.
    public func read(_ text: String) throws(FHIRFormatError) -> ParsedResource {
        try read(Array(text.utf8))
    }

    /// Reads one resource from an XML file, streaming it from disk.
    public func read(contentsOf path: String) throws(FHIRFormatError) -> ParsedResource {
        var options = self.options
        if options.sourceName == nil { options.sourceName = path }
        var parser = try XMLResourceParser(path: path, options: options)
        return try parser.parseDocument()
    }
}

/// Process-wide libxml2 set-up, done once: no external entity is ever loaded.
enum LibXML2Setup {
    static let once: Void = {
        xmlInitParser()
        xmlSetExternalEntityLoader { _, _, _ in nil }
    }()
}

/// Collects libxml2's errors for one reader.
final class XMLErrorBox {
    var message: String?
    var line = 0
    var column = 0
}

/// Owns a libxml2 reader and what it reads: an in-memory document is copied into memory the
/// handle allocates (libxml2 reads it in place, so its address must stay fixed for the reader's
/// life), or a file descriptor, read through `XMLMarkupScan` chunk by chunk as libxml2 asks for
/// it. Everything is released together.
final class LibXMLReaderHandle {
    var reader: xmlTextReaderPtr?
    let errors = XMLErrorBox()
    /// The document, for readers made from memory, and its length.
    let memory: UnsafeMutableBufferPointer<UInt8>?
    let length: Int
    let fd: Int32
    /// The scan of a file's bytes as they are read; its refusal stops libxml2's input.
    var scan = XMLMarkupScan()

    init(copying bytes: [UInt8]) {
        let memory = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        _ = memory.initialize(from: bytes)
        self.memory = memory
        self.length = bytes.count
        self.fd = -1
    }

    init(fd: Int32) {
        self.memory = nil
        self.length = 0
        self.fd = fd
    }

    /// libxml2's input callback for a file: reads the next chunk and scans it; a refused chunk is
    /// never handed to libxml2 (it sees an I/O error, and the reader reports the refusal).
    static let readFile: xmlInputReadCallback = { context, buffer, length in
        guard let context, let buffer else { return -1 }
        let handle = Unmanaged<LibXMLReaderHandle>.fromOpaque(context).takeUnretainedValue()
        while true {
            let n = sysRead(handle.fd, buffer, Int(length))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return Int32(n) }
            return handle.scan.scan(UnsafeRawBufferPointer(start: buffer, count: n)) == nil ? Int32(n) : -1
        }
    }

    deinit {
        if let reader { xmlFreeTextReader(reader) }
        memory?.deallocate()
        if fd >= 0 { close(fd) }
    }
}

/// The libxml2 reader loop that builds `Element` trees; also drives entry-by-entry Bundle reads.
/// A struct, so that the hot loop runs without dynamic exclusivity checks on its state.
struct XMLResourceParser {
    static let fhirNamespace = "http://hl7.org/fhir"
    static let xhtmlNamespace = "http://www.w3.org/1999/xhtml"

    let reader: xmlTextReaderPtr
    let handle: LibXMLReaderHandle
    let options: ParseOptions
    let model = ModelInfo.r4
    var issues: [ParseIssue] = []
    private var errors: XMLErrorBox { handle.errors }
    private let path: String?
    /// For each issue without a column yet: the tag (and attribute) to find on its line, and the
    /// number of the element it is on (issues on one element share its tag).
    private var pendingColumns: [(issue: Int, tag: String, attribute: String?, element: Int)] = []
    /// Elements the reader has opened so far.
    private var elementsOpened = 0

    /// One open element.
    struct Frame {
        var element: Element
        var type: TypeDefinition?
        /// For elements whose content is a resource (`contained`, `entry.resource`): the resource read.
        var wrapsResource: Bool
        var wrapped: Element?
        var seen = SlotSet()
        var lastSlot: Int16 = -1
        var sorted = true
        var lastChildIndex = -1
        var pathIndex: Int

        /// The element this frame built (for a resource wrapper, the resource it holds), moved out.
        consuming func finished() -> Element {
            wrapsResource ? wrapped! : element
        }
    }
    var frames: [Frame] = []
    /// When set, entries of the root Bundle are handed out one by one instead of kept.
    var streamEntries = false
    var streamedEntry: Element?

    init(bytes: [UInt8], options: ParseOptions) throws(FHIRFormatError) {
        _ = LibXML2Setup.once
        caregate_silence_generic_errors()
        self.options = options
        self.path = nil
        let refused = bytes.withUnsafeBytes { raw in
            var scan = XMLMarkupScan()
            return scan.scan(raw).map { XMLResourceParser.refused($0, line: XMLMarkupScan.line(of: $0.offset, in: raw), options: options) }
        }
        if let refused { throw refused }
        let handle = LibXMLReaderHandle(copying: bytes)
        let created = handle.memory!.withMemoryRebound(to: CChar.self) { base in
            xmlReaderForMemory(base.baseAddress, Int32(handle.length), options.sourceName, nil, XMLResourceParser.parserOptions)
        }
        guard let created else {
            throw .malformed(ParseIssue(.error, .syntax, "cannot start the XML reader", at: SourceLocation(file: options.sourceName)))
        }
        handle.reader = created
        self.handle = handle
        reader = created
        installErrorHandler()
    }

    init(path: String, options: ParseOptions) throws(FHIRFormatError) {
        _ = LibXML2Setup.once
        caregate_silence_generic_errors()
        self.options = options
        self.path = path
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .io(path: path, reason: "cannot read: " + FileBytes.errnoDescription()) }
        var info = stat()
        if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw .io(path: path, reason: "cannot read: is a directory")
        }
        let handle = LibXMLReaderHandle(fd: fd)
        // The reader holds the handle unretained: `self.handle` keeps it alive as long as the reader.
        guard let created = xmlReaderForIO(LibXMLReaderHandle.readFile, nil, Unmanaged.passUnretained(handle).toOpaque(),
                                           path, nil, XMLResourceParser.parserOptions) else {
            throw .io(path: path, reason: "cannot read: cannot start the XML reader")
        }
        handle.reader = created
        self.handle = handle
        reader = created
        installErrorHandler()
    }

    /// No network, no entity substitution, no DTD loading or validation; libxml2's own
    /// size and depth hardening stays on (no XML_PARSE_HUGE). The declaration's encoding is
    /// ignored (FHIR XML is UTF-8, and `XMLMarkupScan` refuses documents that start as UTF-16,
    /// UTF-32 or EBCDIC), so no encoding converter runs and a byte that is not UTF-8 is an error
    /// libxml2 reports with its line.
    static let parserOptions: Int32 = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOXINCNODE.rawValue | XML_PARSE_BIG_LINES.rawValue
                                            | XML_PARSE_COMPACT.rawValue | XML_PARSE_IGNORE_ENC.rawValue)

    func installErrorHandler() {
        xmlTextReaderSetStructuredErrorHandler(reader, { context, error in
            guard let context, let error else { return }
            let box = Unmanaged<XMLErrorBox>.fromOpaque(context).takeUnretainedValue()
            guard box.message == nil else { return }
            var message = error.pointee.message.map { String(cString: $0) } ?? "XML error"
            while message.last == "\n" || message.last == " " { message.removeLast() }
            if message.hasPrefix("Input is not proper UTF-8") {
                // libxml2 asks to "indicate encoding", which FHIR does not allow: say what is wrong.
                let bytes = message.split(separator: "\n").dropFirst().joined(separator: " ")
                message = "a byte sequence that is not UTF-8 (FHIR XML is always UTF-8, whatever its declaration says)"
                    + (bytes.isEmpty ? "" : "; " + (bytes.hasPrefix("Bytes:") ? "bytes" + bytes.dropFirst(6) : bytes))
            }
            box.message = message
            box.line = Int(error.pointee.line)
            box.column = Int(error.pointee.int2)
        }, Unmanaged.passUnretained(errors).toOpaque())
    }

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
    func fileRefusal() -> FHIRFormatError? {
        guard let refusal = handle.scan.refusal, let path else { return nil }
        var line = 1
        if let reader = try? ChunkedFileReader(path: path) {
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

    // MARK: Reader access

    func string(_ pointer: UnsafePointer<xmlChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    var localName: String { string(xmlTextReaderConstLocalName(reader)) }
    var namespaceURI: String { string(xmlTextReaderConstNamespaceUri(reader)) }

    /// The current node's source, line and element path; the column is filled in later by
    /// `resolveColumns()` (libxml2 keeps lines on nodes, not columns).
    func location() -> SourceLocation {
        SourceLocation(file: options.sourceName, line: caregate_reader_line(reader), column: 0, path: pathString())
    }

    /// Records where to look for the column of the issue just appended.
    private mutating func noteColumn(attribute: String?) {
        guard !issues.isEmpty else { return }
        var tag = localName
        var attribute = attribute
        if xmlTextReaderNodeType(reader) == 2 {
            // On an attribute: find its element's tag, then the attribute.
            attribute = tag
            if let node = xmlTextReaderCurrentNode(reader), let parent = node.pointee.parent, let name = parent.pointee.name {
                tag = String(cString: name)
            }
        }
        pendingColumns.append((issues.count - 1, tag, attribute, elementsOpened))
    }

    /// Fills in the columns of pending issues: each is where its element's tag (or attribute)
    /// starts on its line, found in one pass over the source.
    mutating func resolveColumns() {
        guard !pendingColumns.isEmpty else { return }
        defer { pendingColumns.removeAll() }
        let wanted = Set(pendingColumns.map { issues[$0.issue].location.line })
        guard let maxLine = wanted.max() else { return }
        var lines: [Int: [UInt8]] = [:]
        func collect(_ bytes: some Sequence<UInt8>, startLine: inout Int, current: inout [UInt8]) {
            for b in bytes {
                if b == 0x0A {
                    if wanted.contains(startLine) { lines[startLine] = current }
                    startLine += 1
                    current.removeAll(keepingCapacity: true)
                    if startLine > maxLine { return }
                } else if wanted.contains(startLine) {
                    current.append(b)
                }
            }
        }
        var line = 1
        var current: [UInt8] = []
        if let path, let file = try? ChunkedFileReader(path: path) {
            var chunk: [UInt8] = []
            while line <= maxLine, (try? file.read(into: &chunk, count: 1 << 20)) ?? 0 > 0 {
                collect(chunk[...], startLine: &line, current: &current)
                chunk.removeAll(keepingCapacity: true)
            }
        } else {
            if let memory = handle.memory { collect(memory.prefix(handle.length), startLine: &line, current: &current) }
        }
        if line <= maxLine && wanted.contains(line) { lines[line] = current }
        // Issues come in document order: issues on the element of the line's last issue share its
        // tag, a later element's tag is searched for after it, and columns are counted from the
        // last one (forwards or back), so a line with 200,000 issues is read a few times, not
        // once per issue.
        var cursors: [Int: (tag: Int, element: Int, attribute: Int, counted: Int, column: Int)] = [:]
        for pending in pendingColumns {
            let line = issues[pending.issue].location.line
            guard let text = lines[line] else { continue }
            var cursor = cursors[line] ?? (tag: 0, element: -1, attribute: -1, counted: 0, column: 1)
            if pending.element != cursor.element {
                let tagBytes = Array(("<" + pending.tag).utf8)
                let from = cursor.element < 0 ? 0 : cursor.tag + 1
                guard let tag = firstIndex(of: tagBytes, in: text, from: from) else { continue }
                cursor.tag = tag
                cursor.element = pending.element
                cursor.attribute = -1
            }
            var index = cursor.tag
            if let attribute = pending.attribute {
                let name = Array((attribute + "=").utf8)
                if let at = firstIndex(of: name, in: text, from: max(cursor.tag, cursor.attribute + 1)) ?? firstIndex(of: name, in: text, from: cursor.tag) {
                    index = at
                    cursor.attribute = at
                }
            }
            let characters = { (range: Range<Int>) in text[range].reduce(0) { $1 & 0xC0 != 0x80 ? $0 + 1 : $0 } }
            cursor.column += index >= cursor.counted ? characters(cursor.counted..<index) : -characters(index..<cursor.counted)
            cursor.counted = index
            issues[pending.issue].location.column = cursor.column
            cursors[line] = cursor
        }
    }

    private func firstIndex(of needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        var i = start
        while i + needle.count <= haystack.count {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    /// The element path of the open elements: `valueQuantity` for choices, `ofType(Patient)` for
    /// the resource inside `contained` or `entry.resource`, indexes on repeated elements.
    func pathString(extra: String? = nil) -> String {
        var parts: [String] = []
        for (i, frame) in frames.enumerated() {
            var name = frame.element.name
            if i == 0 {
                name = frame.type?.name ?? name
            } else if frames[i - 1].wrapsResource {
                name = "ofType(\(frame.type?.name ?? name))"
            } else if let parent = frames[i - 1].type, let definition = parent.element(named: name), definition.isChoice, let type = frame.type {
                name = definition.name + ElementDefinition.choiceSuffix(for: type.name)
            }
            parts.append(frame.pathIndex >= 0 ? "\(name)[\(frame.pathIndex)]" : name)
        }
        if let extra { parts.append(extra) }
        return parts.joined(separator: ".")
    }

    mutating func report(_ code: ParseIssue.Code, _ message: String, severity: ParseIssue.Severity = .error, attribute: String? = nil) {
        let demoted = severity == .error && options.lenient && code != .syntax
        issues.append(ParseIssue(demoted ? .warning : severity, code, message, at: location()))
        noteColumn(attribute: attribute)
    }

    /// Anything libxml2 reported, even when reading went on (a warning such as an XML version
    /// other than 1.0 included), or what the markup scan refused: an error, whole or streamed.
    func reportedError() -> FHIRFormatError? {
        errors.message != nil || handle.scan.refusal != nil ? syntaxError("malformed XML") : nil
    }

    func syntaxError(_ fallback: String) -> FHIRFormatError {
        if let refusal = fileRefusal() { return refusal }
        if let message = errors.message {
            return .malformed(ParseIssue(.error, .syntax, message,
                at: SourceLocation(file: options.sourceName, line: errors.line, column: errors.column, path: pathString())))
        }
        return .malformed(ParseIssue(.error, .syntax, fallback, at: location()))
    }

    /// Reads the current node and its subtree as XML text, leaving the reader on the node; a
    /// subtree libxml2 cannot read whole (too deep, malformed) is an error, not empty text.
    func outerXML() throws(FHIRFormatError) -> String {
        let xml = xmlTextReaderReadOuterXml(reader)
        defer { if let xml { caregate_xml_free(xml) } }
        guard let xml, errors.message == nil else {
            throw syntaxError("cannot read <\(localName)> and what it holds")
        }
        return String(cString: xml)
    }

    // MARK: Parsing

    /// Reads the whole document.
    mutating func parseDocument() throws(FHIRFormatError) -> ParsedResource {
        guard let root = try run() else {
            throw syntaxError(frames.isEmpty ? "the document has no root element" : "the document ends before <\(frames[0].element.name)> is closed")
        }
        if let error = reportedError() { throw error }
        resolveColumns()
        if issues.contains(where: { $0.severity == .error }) { throw .invalid(issues) }
        return ParsedResource(resource: root, warnings: issues)
    }

    /// Runs the reader until the root element is complete (returned) or, when streaming Bundle
    /// entries, until the next entry is complete (left in `streamedEntry`, and nil returned).
    mutating func run() throws(FHIRFormatError) -> Element? {
        var advance = true
        while true {
            if advance {
                let status = xmlTextReaderRead(reader)
                if status == 0 { return nil }
                if status < 0 { throw syntaxError("malformed XML") }
            }
            advance = true
            let nodeType = xmlTextReaderNodeType(reader)
            switch nodeType {
            case 1: // element
                elementsOpened += 1
                let isEmpty = xmlTextReaderIsEmptyElement(reader) == 1
                switch try startElement() {
                case .opened:
                    if isEmpty, let done = try endElement() { return done }
                case .skipped:
                    advance = false
                }
                if streamedEntry != nil { return nil }
            case 15: // end element
                if let done = try endElement() { return done }
                if streamedEntry != nil { return nil }
            case 3, 4: // text, CDATA
                let text = string(xmlTextReaderConstValue(reader))
                if !text.allSatisfy({ $0.isWhitespace }) {
                    report(.structure, "text content is not allowed in FHIR elements (values go in the value attribute): \"\(text.prefix(40))\"")
                }
            case 5: // entity reference
                throw .malformed(ParseIssue(.error, .forbidden, "entity references are not allowed", at: location()))
            case 10: // document type
                throw .malformed(ParseIssue(.error, .forbidden, "document type declarations (DTDs) are not allowed in FHIR XML", at: location()))
            default: // comments, processing instructions, whitespace
                continue
            }
        }
    }

    enum StartResult { case opened, skipped }

    /// Handles a start tag: opens a frame, or reads a whole subtree (xhtml, unknown) and skips it.
    mutating func startElement() throws(FHIRFormatError) -> StartResult {
        if frames.count >= options.maximumDepth {
            throw .limitExceeded(ParseIssue(.error, .limit, "nesting deeper than the limit of \(options.maximumDepth)", at: location()))
        }
        guard let parentIndex = frames.indices.last else {
            // The root: a resource.
            let name = localName
            guard namespaceIs(.fhir) else {
                throw .malformed(ParseIssue(.error, .structure,
                    "the root element <\(name)> is not in the FHIR namespace \(XMLResourceParser.fhirNamespace)", at: location()))
            }
            guard let type = model.resourceType(named: name) else {
                throw .malformed(ParseIssue(.error, .unknownResourceType, "'\(name)' is not an R4 resource type", at: location()))
            }
            frames.append(Frame(element: Element(name: name, typeIndex: type.index, slot: Int16.max), type: type,
                                wrapsResource: false, pathIndex: -1))
            readAttributes(of: frames.count - 1, isResource: true)
            return .opened
        }

        if frames[parentIndex].wrapsResource {
            // The resource inside <contained>, <resource>, <outcome>...
            let name = localName
            guard frames[parentIndex].wrapped == nil else {
                report(.cardinality, "only one resource is allowed in <\(frames[parentIndex].element.name)>")
                return try skip()
            }
            guard namespaceIs(.fhir), let type = model.resourceType(named: name) else {
                report(.unknownResourceType, "'\(name)' is not an R4 resource type")
                return try skip()
            }
            let parent = frames[parentIndex].element
            frames.append(Frame(element: Element(name: parent.name, typeIndex: type.index, slot: parent.slot),
                                type: type, wrapsResource: false, pathIndex: -1))
            readAttributes(of: frames.count - 1, isResource: true)
            return .opened
        }

        guard let parentType = frames[parentIndex].type else { return try skip() }
        var found: (slot: Int16, type: Int32)? = nil
        if let rawName = xmlTextReaderConstLocalName(reader) {
            let nameBytes = UnsafeBufferPointer(start: rawName, count: strlen(rawName))
            if namespaceIs(.fhir) || (namespaceIs(.xhtml) && Lexical.equals(nameBytes, "div")) {
                found = parentType.properties.lookup(nameBytes)
            }
        }
        // A datatype's `id`, and an extension's `url`, are attributes in FHIR XML; as elements
        // they are unknown content (read as the property, two of them could not be written back).
        let isAttributeOnly = found.map { slot, _ in
            let name = parentType.elements[Int(slot)].name
            return (name == "id" && parentType.kind != .resource) || (name == "url" && parentType.name == "Extension")
        } ?? false
        guard let (slot, typeIndex) = found, typeIndex >= 0, !isAttributeOnly else {
            let name = localName
            let raw = try outerXML()
            let reason = isAttributeOnly ? "<\(name)> in \(parentType.name) is an attribute in FHIR XML (\(name)=\"…\"); the element is unknown (kept)"
                : "unknown element <\(name)> in \(parentType.name) (kept)"
            report(.unknownElement, reason, severity: .warning)
            frames[parentIndex].element.children.append(Element(name: name, typeIndex: Element.unknownXML, slot: Int16.max, value: raw))
            // Unknown elements go last, as `Element.append` keeps them: the children are sorted
            // when the parent closes, so a known element after this one still joins its repeats.
            frames[parentIndex].sorted = false
            return try skip()
        }
        let definition = parentType.elements[Int(slot)]
        let type = model.types[Int(typeIndex)]

        // Position, repetition and order checks.
        var pathIndex = -1
        let lastSlot = frames[parentIndex].lastSlot
        if definition.isRepeating {
            pathIndex = lastSlot == slot ? frames[parentIndex].lastChildIndex + 1 : 0
        }
        frames[parentIndex].lastChildIndex = pathIndex
        if slot < lastSlot {
            frames[parentIndex].sorted = false
            report(.structure, "<\(localName)> is out of order in \(parentType.name) (FHIR XML follows definition order)", severity: .warning)
        }
        if frames[parentIndex].seen.insert(slot) == false && !definition.isRepeating {
            report(.cardinality, definition.isChoice ? "\(definition.name)[x] can have only one value" : "<\(localName)> appears twice; at most one is allowed")
        }
        frames[parentIndex].lastSlot = slot

        if type.primitiveKind == .xhtml {
            guard namespaceIs(.xhtml) else {
                report(.structure, "<div> must be in the XHTML namespace \(XMLResourceParser.xhtmlNamespace)")
                return try skip()
            }
            let xhtml = try outerXML()
            frames[parentIndex].element.children.append(Element(name: definition.name, typeIndex: typeIndex, slot: slot, value: xhtml))
            return try skip()
        }

        frames.append(Frame(element: Element(name: definition.name, typeIndex: typeIndex, slot: slot), type: type,
                            wrapsResource: type.kind == .resource, pathIndex: pathIndex))
        if xmlTextReaderHasAttributes(reader) == 1 {
            readAttributes(of: frames.count - 1, isResource: false)
        }
        return .opened
    }

    enum KnownNamespace { case fhir, xhtml }
    private var fhirNamespacePointer: UnsafePointer<xmlChar>?
    private var xhtmlNamespacePointer: UnsafePointer<xmlChar>?
    private static let fhirNamespaceBytes = Array(fhirNamespace.utf8) + [0]
    private static let xhtmlNamespaceBytes = Array(xhtmlNamespace.utf8) + [0]

    /// Whether the current node is in a namespace; libxml2 interns namespace names, so after the
    /// first match a pointer comparison answers.
    @inline(__always)
    mutating func namespaceIs(_ namespace: KnownNamespace) -> Bool {
        guard let uri = xmlTextReaderConstNamespaceUri(reader) else { return false }
        switch namespace {
        case .fhir:
            if uri == fhirNamespacePointer { return true }
            let equal = XMLResourceParser.fhirNamespaceBytes.withUnsafeBufferPointer { strcmp(uri, $0.baseAddress!) == 0 }
            if equal { fhirNamespacePointer = uri }
            return equal
        case .xhtml:
            if uri == xhtmlNamespacePointer { return true }
            let equal = XMLResourceParser.xhtmlNamespaceBytes.withUnsafeBufferPointer { strcmp(uri, $0.baseAddress!) == 0 }
            if equal { xhtmlNamespacePointer = uri }
            return equal
        }
    }

    /// Skips the current element's subtree; the reader is left on the next node. libxml2
    /// stopping there (an error, or a subtree deeper than it reads) is an error, never the end.
    func skip() throws(FHIRFormatError) -> StartResult {
        let status = xmlTextReaderNext(reader)
        if status < 0 || errors.message != nil { throw syntaxError("the XML reader stopped inside <\(localName)>") }
        if status == 0 { return .opened }
        return .skipped
    }

    /// Reads `value`, `id` and `url` attributes of the element just opened.
    mutating func readAttributes(of frameIndex: Int, isResource: Bool) {
        guard xmlTextReaderHasAttributes(reader) == 1 else { return }
        while xmlTextReaderMoveToNextAttribute(reader) == 1 {
            guard let rawName = xmlTextReaderConstLocalName(reader) else { continue }
            let name = UnsafeBufferPointer(start: rawName, count: strlen(rawName))
            if let namespace = xmlTextReaderConstNamespaceUri(reader) {
                let uri = String(cString: namespace)
                if uri == "http://www.w3.org/2000/xmlns/" || uri == "http://www.w3.org/2001/XMLSchema-instance" { continue }
                report(.unknownElement, "unknown attribute '\(localName)' (ignored)", severity: .warning)
                continue
            }
            if Lexical.equals(name, "xmlns") { continue }
            guard let type = frames[frameIndex].type else { continue }
            if Lexical.equals(name, "value") && type.kind == .primitive {
                let value = string(xmlTextReaderConstValue(reader))
                frames[frameIndex].element.value = value
                checkPrimitive(value, kind: type.primitiveKind!, binding: bindingOfCurrent(frameIndex))
                continue
            }
            let isId = !isResource && Lexical.equals(name, "id")
            let isURL = !isId && Lexical.equals(name, "url") && type.name == "Extension"
            if (isId || isURL), let element = type.element(named: isId ? "id" : "url") {
                let value = string(xmlTextReaderConstValue(reader))
                if let kind = element.typeIndices.first.flatMap({ model.types[Int($0)].primitiveKind }) {
                    checkPrimitive(value, kind: kind, binding: nil)
                }
                frames[frameIndex].element.children.append(Element(name: element.name, typeIndex: element.typeIndices[0], slot: element.slot, value: value))
                _ = frames[frameIndex].seen.insert(element.slot)
                // `url` (slot 2 of Extension) precedes child `extension` elements (slot 1) here.
                if element.slot > 0 { frames[frameIndex].sorted = false }
            } else {
                report(.unknownElement, "unknown attribute '\(localName)' on <\(frames[frameIndex].element.name)> (ignored)", severity: .warning)
            }
        }
        xmlTextReaderMoveToElement(reader)
    }

    /// The required binding of the element in frame `index`, found through its parent.
    func bindingOfCurrent(_ index: Int) -> RequiredBinding? {
        guard index > 0, let parentType = frames[index - 1].type else { return nil }
        return parentType.elements[Int(frames[index].element.slot)].binding
    }

    mutating func checkPrimitive(_ text: String, kind: PrimitiveKind, binding: RequiredBinding?) {
        let isResourceId = frames.count >= 2 && frames[frames.count - 2].type?.kind == .resource
            && frames[frames.count - 1].element.name == "id" && frames[frames.count - 1].element.slot == 0
        let kind = isResourceId ? PrimitiveKind.id : kind
        if !kind.isValid(text) {
            report(.invalidValue, "\"\(text)\" is not a valid \(kind.rawValue) (\(kind.ruleDescription))")
            return
        }
        if let binding, !binding.contains(text) {
            let shown = binding.codes.count <= 8 ? binding.codes.joined(separator: "|") : binding.codes.prefix(6).joined(separator: "|") + "|..."
            report(.binding, "expected one of \(shown), found \"\(text)\"")
        }
    }

    /// Closes the innermost element; returns the root when it closes.
    mutating func endElement() throws(FHIRFormatError) -> Element? {
        guard let last = frames.indices.last else { return nil }
        // Checks first, while the frame is still open, so that reports carry its path.
        let kind = frames[last].type?.kind
        if frames[last].wrapsResource {
            if frames[last].wrapped == nil {
                report(.structure, "<\(frames[last].element.name)> must hold a resource")
                frames.removeLast()
                return nil
            }
        } else if kind == .primitive {
            if frames[last].element.value == nil && frames[last].element.children.isEmpty {
                report(.structure, "<\(frames[last].element.name)> has neither a value nor extensions")
                frames.removeLast()
                return nil
            }
        } else if kind != .resource && frames[last].element.children.isEmpty {
            report(.structure, "<\(frames[last].element.name)> is empty (FHIR XML has no empty elements)")
        }
        if !frames[last].sorted {
            frames[last].element.children = frames[last].element.children.enumerated().sorted { a, b in
                a.element.slot != b.element.slot ? a.element.slot < b.element.slot : a.offset < b.offset
            }.map(\.element)
        }
        let closesResource = kind == .resource && !frames[last].wrapsResource
        let finished = frames.removeLast().finished()

        guard let parentIndex = frames.indices.last else { return finished }
        if frames[parentIndex].wrapsResource && closesResource {
            frames[parentIndex].wrapped = finished
            return nil
        }
        if streamEntries && parentIndex == 0 && finished.name == "entry" && frames[0].type?.name == "Bundle" {
            streamedEntry = finished
            return nil
        }
        frames[parentIndex].element.children.append(finished)
        return nil
    }

}
