internal import CLibXML2
import Diagnostics

#if canImport(Glibc)
import Glibc
#endif

/// Builds `Element` trees from libxml2's SAX2 events, checking each element against the R4
/// definitions as it opens and closes: names, order, repeats, primitive values and required
/// bindings. Problems become issues with the element's line and path; the few that make the
/// rest unreadable stop the parser.
struct XMLTreeBuilder: ~Copyable {
    static let fhirNamespace = "http://hl7.org/fhir"
    static let xhtmlNamespace = "http://www.w3.org/1999/xhtml"

    let options: ParseOptions
    unowned(unsafe) let model = ModelInfo.r4
    /// The parser feeding this builder: its line, and stopping it.
    var context: xmlParserCtxtPtr?
    var log = XMLIssueLog()
    /// The first error libxml2 reported.
    var libxmlError: (message: String, line: Int, column: Int)?
    /// An error that ends the read.
    private(set) var fatal: FHIRFormatError?
    /// The resource, once its end tag is read.
    private(set) var root: Element?
    /// When set, entries of the root Bundle are queued with their issues instead of kept.
    var streamEntries = false
    private var entries: [(entry: Element, log: XMLIssueLog)] = []
    private var entriesTaken = 0
    /// Elements opened so far, outside kept subtrees.
    private var elementsOpened = 0
    /// The line of the event in hand.
    private var line = 0

    /// One open element.
    struct Frame {
        var element: Element
        unowned(unsafe) var type: TypeDefinition
        /// For elements whose content is a resource (`contained`, `entry.resource`): the resource read.
        var wrapsResource: Bool
        var wrapped: Element?
        var seen = SlotSet()
        var lastSlot: Int16 = -1
        var sorted = true
        var lastChildIndex = -1
        var pathIndex: Int
        /// The line of its start tag, where issues found at its end are placed.
        var line: Int
        /// Where its children start on `children`.
        var childrenStart: Int

        /// The element this frame built (for a resource wrapper, the resource it holds), moved
        /// out: the frame is left an empty element, so closing one copies no reference.
        mutating func take() -> Element {
            if wrapsResource { return wrapped.take()! }
            var taken = Element(name: "", typeIndex: -1, slot: 0)
            swap(&taken, &element)
            return taken
        }
    }
    private(set) var frames: [Frame] = []
    /// The children of the open elements, each element's moved out as it closes.
    private var children = ChildStack()

    /// A subtree being written back as text, and what it becomes.
    private enum Kept {
        case skipped
        case unknown(name: String)
        case narrative(name: String, typeIndex: Int32, slot: Int16)
    }
    private var kept: (text: XMLSubtreeText, purpose: Kept)?
    /// Text outside any kept subtree that is not whitespace, until the next tag reports it.
    private var strayText: (bytes: [UInt8], line: Int)?

    private var fhirNamespacePointer: UnsafePointer<xmlChar>?
    private var xhtmlNamespacePointer: UnsafePointer<xmlChar>?

    init(options: ParseOptions) {
        self.options = options
    }

    // MARK: Events

    mutating func start(_ tag: XMLStartTag) {
        if kept == nil {
            reportStrayText()
            guard fatal == nil else { return }
        }
        line = currentLine()
        // Nesting inside a kept or skipped subtree counts as well.
        if frames.count + (kept?.text.depth ?? 0) >= options.maximumDepth {
            return stop(.limitExceeded(ParseIssue(.error, .limit, "nesting deeper than the limit of \(options.maximumDepth)", at: location())))
        }
        if kept != nil { return kept!.text.start(tag) }
        elementsOpened += 1
        guard let parentIndex = frames.indices.last else { return openRoot(tag) }
        if frames[parentIndex].wrapsResource { return openWrapped(tag, in: parentIndex) }
        openProperty(tag, in: parentIndex)
    }

    mutating func end(localName: UnsafePointer<xmlChar>, prefix: UnsafePointer<xmlChar>?) {
        if kept != nil {
            if kept!.text.end(prefix: prefix, localName: localName) { finishKept() }
            return
        }
        reportStrayText()
        guard fatal == nil, !frames.isEmpty else { return }
        closeElement(localName: localName)
    }

    mutating func text(_ characters: UnsafeBufferPointer<UInt8>) {
        if kept != nil { return kept!.text.text(characters) }
        if strayText == nil {
            if Lexical.isAllWhitespace(characters) { return }
            strayText = ([], currentLine())
        }
        strayText!.bytes.append(contentsOf: characters)
    }

    mutating func cdata(_ characters: UnsafeBufferPointer<UInt8>) {
        if kept != nil { return kept!.text.markup(open: "<![CDATA[", characters, close: "]]>") }
        reportStrayText()
        text(characters)
        reportStrayText()
    }

    mutating func markup(open: String, _ value: UnsafePointer<xmlChar>?, close: String) {
        guard kept != nil else { return reportStrayText() }
        kept!.text.markup(open: open, UnsafeBufferPointer(start: value, count: value.map { strlen($0) } ?? 0), close: close)
    }

    mutating func instruction(target: UnsafePointer<xmlChar>, data: UnsafePointer<xmlChar>?) {
        guard kept != nil else { return reportStrayText() }
        guard kept!.text.writes else { return }
        let content = XMLSubtreeText.cBytes(target) + (data.map { [0x20] + XMLSubtreeText.cBytes($0) } ?? [])
        content.withUnsafeBufferPointer { kept!.text.markup(open: "<?", $0, close: "?>") }
    }

    mutating func noteLibXMLError(_ error: xmlError) {
        guard libxmlError == nil else { return }
        var message = error.message.map { String(cString: $0) } ?? "XML error"
        while message.last == "\n" || message.last == " " { message.removeLast() }
        if message.hasPrefix("Input is not proper UTF-8") {
            // libxml2 asks to "indicate encoding", which FHIR does not allow: say what is wrong.
            let bytes = message.split(separator: "\n").dropFirst().joined(separator: " ")
            message = "a byte sequence that is not UTF-8 (FHIR XML is always UTF-8, whatever its declaration says)"
                + (bytes.isEmpty ? "" : "; " + (bytes.hasPrefix("Bytes:") ? "bytes" + bytes.dropFirst(6) : bytes))
        }
        libxmlError = (message, Int(error.line), Int(error.int2))
    }

    /// Ends the read with this error.
    mutating func stop(_ error: FHIRFormatError) {
        guard fatal == nil else { return }
        fatal = error
        if let context { xmlStopParser(context) }
    }

    /// The next queued Bundle entry, with the issues found since the one before it.
    mutating func takeEntry() -> (entry: Element, log: XMLIssueLog)? {
        guard entriesTaken < entries.count else {
            if !entries.isEmpty { entries.removeAll(keepingCapacity: true); entriesTaken = 0 }
            return nil
        }
        entriesTaken += 1
        return entries[entriesTaken - 1]
    }

    // MARK: Opening elements

    private mutating func openRoot(_ tag: XMLStartTag) {
        let name = String(cString: tag.localName)
        guard namespaceIs(.fhir, tag.uri) else {
            return stop(.malformed(ParseIssue(.error, .structure,
                "the root element <\(name)> is not in the FHIR namespace \(XMLTreeBuilder.fhirNamespace)", at: location())))
        }
        guard let type = model.resourceType(named: name) else {
            return stop(.malformed(ParseIssue(.error, .unknownResourceType, "'\(name)' is not an R4 resource type", at: location())))
        }
        frames.append(Frame(element: Element(name: name, typeIndex: type.index, slot: Int16.max), type: type,
                            wrapsResource: false, pathIndex: -1, line: line, childrenStart: children.count))
        readAttributes(tag, isResource: true)
    }

    /// The resource inside `<contained>`, `<resource>`, `<outcome>`...
    private mutating func openWrapped(_ tag: XMLStartTag, in parentIndex: Int) {
        let name = String(cString: tag.localName)
        guard frames[parentIndex].wrapped == nil else {
            report(.cardinality, "only one resource is allowed in <\(frames[parentIndex].element.name)>", tag: name)
            return keep(.skipped, tag)
        }
        guard namespaceIs(.fhir, tag.uri), let type = model.resourceType(named: name) else {
            report(.unknownResourceType, "'\(name)' is not an R4 resource type", tag: name)
            return keep(.skipped, tag)
        }
        let parent = frames[parentIndex].element
        frames.append(Frame(element: Element(name: parent.name, typeIndex: type.index, slot: parent.slot),
                            type: type, wrapsResource: false, pathIndex: -1, line: line, childrenStart: children.count))
        readAttributes(tag, isResource: true)
    }

    private mutating func openProperty(_ tag: XMLStartTag, in parentIndex: Int) {
        let parentType = frames[parentIndex].type
        let nameBytes = UnsafeBufferPointer(start: tag.localName, count: strlen(tag.localName))
        var found: (slot: Int16, type: Int32)? = nil
        if namespaceIs(.fhir, tag.uri) || (namespaceIs(.xhtml, tag.uri) && Lexical.equals(nameBytes, "div")) {
            found = parentType.properties.lookup(nameBytes)
        }
        // A datatype's `id`, and an extension's `url`, are attributes in FHIR XML; as elements
        // they are unknown content (read as the property, two of them could not be written back).
        let isAttributeOnly = found.map { slot, _ in
            slot == 0 ? parentType.kind != .resource && parentType.elements[0].name == "id"
                : parentType.index == ModelInfo.extensionTypeIndex && parentType.elements[Int(slot)].name == "url"
        } ?? false
        guard let (slot, typeIndex) = found, typeIndex >= 0, !isAttributeOnly else {
            let name = String(decoding: nameBytes, as: UTF8.self)
            let reason = isAttributeOnly ? "<\(name)> in \(parentType.name) is an attribute in FHIR XML (\(name)=\"…\"); the element is unknown (kept)"
                : "unknown element <\(name)> in \(parentType.name) (kept)"
            report(.unknownElement, reason, severity: .warning, tag: name)
            // Unknown elements go last, as `Element.append` keeps them: the children are sorted
            // when the parent closes, so a known element after this one still joins its repeats.
            frames[parentIndex].sorted = false
            return keep(.unknown(name: name), tag)
        }
        let definition = parentType.elements[Int(slot)]
        let type = model.types[Int(typeIndex)]
        let pathIndex = checkPosition(slot, definition, in: parentIndex, tag: tag)

        if type.primitiveKind == .xhtml {
            guard namespaceIs(.xhtml, tag.uri) else {
                report(.structure, "<div> must be in the XHTML namespace \(XMLTreeBuilder.xhtmlNamespace)", tag: "div")
                return keep(.skipped, tag)
            }
            return keep(.narrative(name: definition.name, typeIndex: typeIndex, slot: slot), tag)
        }
        frames.append(Frame(element: Element(name: definition.name, typeIndex: typeIndex, slot: slot), type: type,
                            wrapsResource: type.kind == .resource, pathIndex: pathIndex, line: line, childrenStart: children.count))
        if tag.attributeCount > 0 { readAttributes(tag, isResource: false) }
    }

    /// Position, repetition and order checks of a child about to open; returns its index among
    /// its repeats (-1 when it does not repeat).
    private mutating func checkPosition(_ slot: Int16, _ definition: ElementDefinition, in parentIndex: Int, tag: XMLStartTag) -> Int {
        var pathIndex = -1
        let lastSlot = frames[parentIndex].lastSlot
        if definition.isRepeating {
            pathIndex = lastSlot == slot ? frames[parentIndex].lastChildIndex + 1 : 0
        }
        frames[parentIndex].lastChildIndex = pathIndex
        if slot < lastSlot {
            frames[parentIndex].sorted = false
            let name = String(cString: tag.localName)
            report(.structure, "<\(name)> is out of order in \(frames[parentIndex].type.name) (FHIR XML follows definition order)",
                   severity: .warning, tag: name)
        }
        if frames[parentIndex].seen.insert(slot) == false && !definition.isRepeating {
            let name = String(cString: tag.localName)
            report(.cardinality, definition.isChoice ? "\(definition.name)[x] can have only one value" : "<\(name)> appears twice; at most one is allowed",
                   tag: name)
        }
        frames[parentIndex].lastSlot = slot
        return pathIndex
    }

    /// Starts keeping (or skipping) the subtree this start tag opens.
    private mutating func keep(_ purpose: Kept, _ tag: XMLStartTag) {
        let skipped = if case .skipped = purpose { true } else { false }
        var text = XMLSubtreeText(writes: !skipped)
        text.start(tag)
        kept = (text, purpose)
    }

    private mutating func finishKept() {
        guard let (text, purpose) = kept else { return }
        kept = nil
        switch purpose {
        case .skipped:
            break
        case .unknown(let name):
            children.push(Element(name: name, typeIndex: Element.unknownXML, slot: Int16.max, value: text.finished()))
        case .narrative(let name, let typeIndex, let slot):
            children.push(Element(name: name, typeIndex: typeIndex, slot: slot, value: text.finished()))
        }
    }

    private enum KnownNamespace { case fhir, xhtml }
    private static let fhirNamespaceBytes = Array(fhirNamespace.utf8) + [0]
    private static let xhtmlNamespaceBytes = Array(xhtmlNamespace.utf8) + [0]

    /// Whether a namespace URI is FHIR's (or XHTML's); libxml2 interns namespace names, so after
    /// the first match a pointer comparison answers.
    @inline(__always)
    private mutating func namespaceIs(_ namespace: KnownNamespace, _ uri: UnsafePointer<xmlChar>?) -> Bool {
        guard let uri else { return false }
        switch namespace {
        case .fhir:
            if uri == fhirNamespacePointer { return true }
            let equal = XMLTreeBuilder.fhirNamespaceBytes.withUnsafeBufferPointer { strcmp(uri, $0.baseAddress!) == 0 }
            if equal { fhirNamespacePointer = uri }
            return equal
        case .xhtml:
            if uri == xhtmlNamespacePointer { return true }
            let equal = XMLTreeBuilder.xhtmlNamespaceBytes.withUnsafeBufferPointer { strcmp(uri, $0.baseAddress!) == 0 }
            if equal { xhtmlNamespacePointer = uri }
            return equal
        }
    }

    /// Reads the `value`, `id` and `url` attributes of the element just opened.
    private mutating func readAttributes(_ tag: XMLStartTag, isResource: Bool) {
        let frameIndex = frames.count - 1
        let type = frames[frameIndex].type
        for i in 0..<tag.attributeCount {
            let attribute = tag.attribute(i)
            let name = UnsafeBufferPointer(start: attribute.localName, count: strlen(attribute.localName))
            // Names for reports only, made when one is.
            var at: (tag: String, attribute: String) { XMLTreeBuilder.names(tag, name) }
            if let uri = attribute.uri {
                if strcmp(uri, "http://www.w3.org/2001/XMLSchema-instance") == 0 { continue }
                report(.unknownElement, "unknown attribute '\(at.attribute)' (ignored)", severity: .warning, tag: at.tag, attribute: at.attribute)
                continue
            }
            if Lexical.equals(name, "value") && type.kind == .primitive {
                let value = attribute.string
                frames[frameIndex].element.value = value
                checkPrimitive(value, kind: type.primitiveKind!, binding: bindingOfCurrent(frameIndex), tag: tag, attribute: name)
                continue
            }
            let isId = !isResource && Lexical.equals(name, "id")
            let isURL = !isId && Lexical.equals(name, "url") && type.index == ModelInfo.extensionTypeIndex
            if (isId || isURL), let element = type.element(named: isId ? "id" : "url") {
                let value = attribute.string
                if let kind = element.typeIndices.first.flatMap({ model.types[Int($0)].primitiveKind }) {
                    checkPrimitive(value, kind: kind, binding: nil, tag: tag, attribute: name)
                }
                children.push(Element(name: element.name, typeIndex: element.typeIndices[0], slot: element.slot, value: value))
                _ = frames[frameIndex].seen.insert(element.slot)
                // `url` (slot 2 of Extension) precedes child `extension` elements (slot 1) here.
                if element.slot > 0 { frames[frameIndex].sorted = false }
            } else {
                report(.unknownElement, "unknown attribute '\(at.attribute)' on <\(frames[frameIndex].element.name)> (ignored)",
                       severity: .warning, tag: at.tag, attribute: at.attribute)
            }
        }
    }

    /// The required binding of the element in frame `index`, found through its parent.
    private func bindingOfCurrent(_ index: Int) -> RequiredBinding? {
        guard index > 0 else { return nil }
        return frames[index - 1].type.elements[Int(frames[index].element.slot)].binding
    }

    /// An attribute's element and attribute names, for reports.
    private static func names(_ tag: XMLStartTag, _ attribute: UnsafeBufferPointer<UInt8>) -> (tag: String, attribute: String) {
        (String(cString: tag.localName), String(decoding: attribute, as: UTF8.self))
    }

    /// Checks an attribute's value against its primitive kind and required binding; the names for
    /// a report are made only when there is one.
    private mutating func checkPrimitive(_ text: String, kind: PrimitiveKind, binding: RequiredBinding?,
                                         tag: XMLStartTag, attribute: UnsafeBufferPointer<UInt8>) {
        let isResourceId = frames.count >= 2 && frames[frames.count - 2].type.kind == .resource
            && frames[frames.count - 1].element.name == "id" && frames[frames.count - 1].element.slot == 0
        let kind = isResourceId ? PrimitiveKind.id : kind
        if !kind.isValid(text) {
            let at = XMLTreeBuilder.names(tag, attribute)
            report(.invalidValue, "\"\(text)\" is not a valid \(kind.rawValue) (\(kind.ruleDescription))", tag: at.tag, attribute: at.attribute)
            return
        }
        if let binding, !binding.contains(text) {
            let at = XMLTreeBuilder.names(tag, attribute)
            let shown = binding.codes.count <= 8 ? binding.codes.joined(separator: "|") : binding.codes.prefix(6).joined(separator: "|") + "|..."
            report(.binding, "expected one of \(shown), found \"\(text)\"", tag: at.tag, attribute: at.attribute)
        }
    }

    // MARK: Closing elements

    /// Closes the innermost element: the root is kept, a Bundle entry queued when streaming.
    private mutating func closeElement(localName: UnsafePointer<xmlChar>) {
        let last = frames.count - 1
        line = frames[last].line
        let hasChildren = children.count > frames[last].childrenStart
        frames[last].element.children = children.pop(from: frames[last].childrenStart, inSlotOrder: !frames[last].sorted)
        // Checks first, while the frame is still open, so that reports carry its path.
        let kind = frames[last].type.kind
        if frames[last].wrapsResource {
            if frames[last].wrapped == nil {
                report(.structure, "<\(frames[last].element.name)> must hold a resource", tag: String(cString: localName))
                frames.removeLast()
                return
            }
        } else if kind == .primitive {
            if frames[last].element.value == nil && !hasChildren {
                report(.structure, "<\(frames[last].element.name)> has neither a value nor extensions", tag: String(cString: localName))
                frames.removeLast()
                return
            }
        } else if kind != .resource && !hasChildren {
            report(.structure, "<\(frames[last].element.name)> is empty (FHIR XML has no empty elements)", tag: String(cString: localName))
        }
        let closesResource = kind == .resource && !frames[last].wrapsResource
        let finished = frames[last].take()
        frames.removeLast()

        guard let parentIndex = frames.indices.last else {
            root = finished
            return
        }
        if frames[parentIndex].wrapsResource && closesResource {
            frames[parentIndex].wrapped = finished
            return
        }
        if streamEntries && parentIndex == 0 && finished.name == "entry" && frames[0].type.name == "Bundle" {
            entries.append((finished, log))
            log = XMLIssueLog()
            return
        }
        children.push(finished)
    }

    // MARK: Issues

    private func currentLine() -> Int {
        guard let context, let input = context.pointee.input else { return 0 }
        return Int(input.pointee.line)
    }

    /// The source, the line of the event in hand and the element path; the column is filled in
    /// later by `XMLIssueLog.resolveColumns` (libxml2 reports lines, not columns, of tags).
    func location() -> SourceLocation {
        SourceLocation(file: options.sourceName, line: line, column: 0, path: pathString())
    }

    /// The element path of the open elements: `valueQuantity` for choices, `ofType(Patient)` for
    /// the resource inside `contained` or `entry.resource`, indexes on repeated elements.
    func pathString() -> String {
        var parts: [String] = []
        for (i, frame) in frames.enumerated() {
            var name = frame.element.name
            if i == 0 {
                name = frame.type.name
            } else if frames[i - 1].wrapsResource {
                name = "ofType(\(frame.type.name))"
            } else if let definition = frames[i - 1].type.element(named: name), definition.isChoice {
                name = definition.name + ElementDefinition.choiceSuffix(for: frame.type.name)
            }
            parts.append(frame.pathIndex >= 0 ? "\(name)[\(frame.pathIndex)]" : name)
        }
        return parts.joined(separator: ".")
    }

    private mutating func report(_ code: ParseIssue.Code, _ message: String, severity: ParseIssue.Severity = .error,
                                 tag: String, attribute: String? = nil) {
        let demoted = severity == .error && options.lenient && code != .syntax
        log.append(ParseIssue(demoted ? .warning : severity, code, message, at: location()),
                   tag: tag, attribute: attribute, element: elementsOpened)
    }

    /// Text between tags is not allowed in FHIR XML (values go in `value` attributes).
    private mutating func reportStrayText() {
        guard let (bytes, textLine) = strayText else { return }
        strayText = nil
        let text = String(decoding: bytes, as: UTF8.self)
        guard !text.allSatisfy({ $0.isWhitespace }) else { return }
        let saved = line
        line = textLine
        report(.structure, "text content is not allowed in FHIR elements (values go in the value attribute): \"\(text.prefix(40))\"", tag: "#text")
        line = saved
    }
}
