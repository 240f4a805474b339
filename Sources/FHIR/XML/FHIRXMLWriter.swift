/// Writes `Element` trees as FHIR R4 XML.
///
/// Elements come out in definition order (the order the R4 schemas require), primitives carry
/// their value in the `value` attribute, element ids and extension urls are attributes, contained
/// and entry resources are wrapped in their element, and narrative XHTML is written as XHTML.
/// Attribute values escape line breaks and tabs, so strings survive XML attribute normalisation;
/// the other control characters, which FHIR strings may not hold and XML cannot carry, are
/// written as U+FFFD.
public struct FHIRXMLWriter: Sendable {
    /// Indent with two spaces and break lines (the default).
    public var pretty: Bool
    /// Start with `<?xml version="1.0" encoding="UTF-8"?>` (the default).
    public var declaration: Bool

    /// A writer; `pretty` indents, `declaration` starts with `<?xml version="1.0"
    /// encoding="UTF-8"?>`.
    public init(pretty: Bool = true, declaration: Bool = true) {
        self.pretty = pretty
        self.declaration = declaration
    }

    /// The resource as XML bytes (UTF-8).
    public func write(_ resource: Element) -> [UInt8] {
        var emitter = XMLEmitter(pretty: pretty)
        if declaration {
            emitter.raw("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
            if pretty { emitter.out.append(0x0A) }
        }
        emitter.writeResource(resource, indent: 0, root: true)
        if pretty { emitter.out.append(0x0A) }
        return emitter.out
    }

    /// The resource as an XML string.
    public func string(_ resource: Element) -> String {
        String(decoding: write(resource), as: UTF8.self)
    }
}

struct XMLEmitter {
    var out: [UInt8] = []
    let pretty: Bool

    init(pretty: Bool) {
        self.pretty = pretty
        out.reserveCapacity(8192)
    }

    @inline(__always) mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    @inline(__always) mutating func text(_ s: String) {
        out.append(contentsOf: s.utf8)
    }

    mutating func indent(_ level: Int) {
        guard pretty else { return }
        if !out.isEmpty && out.last != 0x0A { out.append(0x0A) }
        for _ in 0..<level { out.append(0x20); out.append(0x20) }
    }

    /// An attribute value, escaped so that it reads back unchanged.
    mutating func attributeValue(_ value: String) {
        var value = value
        value.withUTF8 { bytes in
            var runStart = 0
            for i in 0..<bytes.count {
                let b = bytes[i]
                let escape: StaticString
                switch b {
                case 0x26: escape = "&amp;"
                case 0x3C: escape = "&lt;"
                case 0x3E: escape = "&gt;"
                case 0x22: escape = "&quot;"
                case 0x0A: escape = "&#10;"
                case 0x0D: escape = "&#13;"
                case 0x09: escape = "&#9;"
                // XML has no form for the other control characters (the readers refuse them).
                case 0x00..<0x20: escape = "\u{FFFD}"
                default: continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<i]))
                runStart = i + 1
                escape.withUTF8Buffer { out.append(contentsOf: $0) }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
    }

    mutating func attribute(_ name: StaticString, _ value: String) {
        out.append(0x20)
        raw(name)
        raw("=\"")
        attributeValue(value)
        out.append(0x22)
    }

    mutating func writeResource(_ resource: Element, indent level: Int, root: Bool) {
        indent(level)
        let name = resource.typeName ?? resource.name
        out.append(0x3C)
        text(name)
        if root { raw(" xmlns=\"http://hl7.org/fhir\"") }
        if resource.children.isEmpty {
            raw("/>")
            return
        }
        out.append(0x3E)
        writeChildren(of: resource, indent: level + 1, attributes: [])
        indent(level)
        raw("</")
        text(name)
        out.append(0x3E)
    }

    /// Writes the children of `element` that are elements (not attributes).
    mutating func writeChildren(of element: Element, indent level: Int, attributes: Set<String>) {
        let parentType = element.definition
        for child in element.children {
            if child.isUnknown {
                if child.typeIndex == Element.unknownXML, let rawXML = child.value {
                    indent(level)
                    text(rawXML)
                }
                continue
            }
            if attributes.contains(child.name) || !child.hasContent(in: .xml) { continue }
            let definition = parentType?.element(of: child)
            var name = child.name
            if definition?.isChoice == true, let typeName = child.typeName {
                name += ElementDefinition.choiceSuffix(for: typeName)
            }
            writeElement(child, name: name, indent: level)
        }
    }

    mutating func writeElement(_ element: Element, name: String, indent level: Int) {
        guard let type = element.definition else { return }
        switch type.kind {
        case .resource:
            indent(level)
            out.append(0x3C); text(name); out.append(0x3E)
            writeResource(element, indent: level + 1, root: false)
            indent(level)
            raw("</"); text(name); out.append(0x3E)
        case .primitive where type.primitiveKind == .xhtml:
            indent(level)
            writeXHTML(element.value ?? "")
        case .primitive, .complex, .backbone:
            indent(level)
            out.append(0x3C)
            text(name)
            var attributes: Set<String> = []
            if let id = element.children.first(where: { $0.name == "id" && !$0.isUnknown }), let value = id.value {
                attribute("id", value)
                attributes.insert("id")
            }
            if type.name == "Extension", let url = element.children.first(where: { $0.name == "url" && !$0.isUnknown }), let value = url.value {
                attribute("url", value)
                attributes.insert("url")
            }
            if let value = element.value {
                attribute("value", value)
            }
            let hasElements = element.children.contains {
                $0.isUnknown ? $0.typeIndex == Element.unknownXML : !attributes.contains($0.name) && $0.hasContent(in: .xml)
            }
            if !hasElements {
                raw("/>")
                return
            }
            out.append(0x3E)
            writeChildren(of: element, indent: level + 1, attributes: attributes)
            indent(level)
            raw("</"); text(name); out.append(0x3E)
        }
    }

    /// Narrative XHTML, with the XHTML namespace declared on the div when it is missing (and
    /// control characters XML cannot carry as U+FFFD).
    mutating func writeXHTML(_ xhtml: String) {
        let xhtml = Lexical.replacingControlCharacters(xhtml)
        let bytes = Array(xhtml.utf8.prefix(64 << 10))
        if bytes.count > 4, bytes.starts(with: Array("<div".utf8)), [0x20, 0x09, 0x0A, 0x0D, 0x3E, 0x2F].contains(bytes[4]),
           !Self.declaresNamespace(bytes) {
            raw("<div xmlns=\"http://www.w3.org/1999/xhtml\"")
            text(String(xhtml.dropFirst(4)))
        } else {
            text(xhtml)
        }
    }

    /// Whether the start tag of `<div …>` has an `xmlns` attribute, however it is spaced
    /// (`xmlns =\n"…"` is one: a second would make the XML unreadable).
    static func declaresNamespace(_ bytes: [UInt8]) -> Bool {
        var i = 4
        func skipSpace() { while i < bytes.count, Lexical.isWhitespace(bytes[i]) { i += 1 } }
        while i < bytes.count {
            skipSpace()
            guard i < bytes.count, bytes[i] != 0x3E, bytes[i] != 0x2F else { return false }
            let start = i
            while i < bytes.count, !Lexical.isWhitespace(bytes[i]), ![0x3D, 0x3E, 0x2F].contains(bytes[i]) { i += 1 }
            if bytes[start..<i].elementsEqual("xmlns".utf8) { return true }
            skipSpace()
            guard i < bytes.count, bytes[i] == 0x3D else { continue }
            i += 1
            skipSpace()
            guard i < bytes.count else { return false }
            if bytes[i] == 0x22 || bytes[i] == 0x27 {
                let quote = bytes[i]
                i += 1
                while i < bytes.count, bytes[i] != quote { i += 1 }
                i += 1
            } else {
                while i < bytes.count, !Lexical.isWhitespace(bytes[i]), bytes[i] != 0x3E { i += 1 }
            }
        }
        return false
    }
}
