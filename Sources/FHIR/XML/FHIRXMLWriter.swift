import JSON

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
        withUnsafePointer(to: resource) { emitter.writeResource(at: $0, indent: 0, root: true) }
        if pretty { emitter.out.append(0x0A) }
        return emitter.out.bytes
    }

    /// The resource as an XML string.
    public func string(_ resource: Element) -> String {
        String(decoding: write(resource), as: UTF8.self)
    }
}

/// Writes XML into one plain buffer, reading elements in place through pointers (an element
/// taken out of an array by value is copied first, a reference count for each of its parts), as
/// the JSON writer does.
struct XMLEmitter: ~Copyable {
    var out = JSONBytes(capacity: 8192)
    let pretty: Bool
    unowned(unsafe) let model = ModelInfo.r4

    init(pretty: Bool) {
        self.pretty = pretty
    }

    @inline(__always) mutating func raw(_ s: StaticString) {
        out.append(s)
    }

    @inline(__always) mutating func text(_ s: String) {
        if s.utf8.withContiguousStorageIfAvailable({ out.append(contentsOf: $0) }) == nil {
            var s = s
            s.withUTF8 { out.append(contentsOf: $0) }
        }
    }

    mutating func indent(_ level: Int) {
        guard pretty else { return }
        if out.count > 0 && out.end[-1] != 0x0A { out.append(0x0A) }
        out.reserve(2 * level)
        out.end.initialize(repeating: 0x20, count: 2 * level)
        out.advance(2 * level)
    }

    /// An attribute value, escaped so that it reads back unchanged; runs that need no escape are
    /// found eight bytes at a time and copied whole.
    mutating func attributeValue(_ value: String) {
        var value = value
        value.withUTF8 { bytes in
            guard let p = bytes.baseAddress else { return }
            let n = bytes.count
            var runStart = 0, i = 0
            while i < n {
                if i + 8 <= n {
                    let stops = XMLEmitter.attributeStops(JSONEscaping.word(p + i))
                    if stops == 0 { i += 8; continue }
                    i += stops.trailingZeroBitCount / 8
                }
                guard let escape = XMLEmitter.attributeEscape(p[i]) else { i += 1; continue }
                out.append(contentsOf: UnsafeBufferPointer(start: p + runStart, count: i - runStart))
                out.append(escape)
                i += 1
                runStart = i
            }
            out.append(contentsOf: UnsafeBufferPointer(start: p + runStart, count: n - runStart))
        }
    }

    /// A word with 0x80 in each byte of `w` that an attribute value must escape (a quote, `&`,
    /// `<`, `>` or a control character), exact up to the first such byte.
    @inline(__always)
    static func attributeStops(_ w: UInt64) -> UInt64 {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let quote = w ^ (ones &* 0x22), amp = w ^ (ones &* 0x26), less = w ^ (ones &* 0x3C), greater = w ^ (ones &* 0x3E)
        return ((quote &- ones) & ~quote | (amp &- ones) & ~amp | (less &- ones) & ~less | (greater &- ones) & ~greater
                | (w &- ones &* 0x20) & ~w) & 0x8080_8080_8080_8080
    }

    /// What a byte of an attribute value is written as, or nil when it is written as itself.
    @inline(__always)
    static func attributeEscape(_ byte: UInt8) -> StaticString? {
        switch byte {
        case 0x26: "&amp;"
        case 0x3C: "&lt;"
        case 0x3E: "&gt;"
        case 0x22: "&quot;"
        case 0x0A: "&#10;"
        case 0x0D: "&#13;"
        case 0x09: "&#9;"
        // XML has no form for the other control characters (the readers refuse them).
        case 0x00..<0x20: "\u{FFFD}"
        default: nil
        }
    }

    mutating func attribute(_ name: StaticString, _ value: String) {
        out.append(0x20)
        raw(name)
        raw("=\"")
        attributeValue(value)
        out.append(0x22)
    }

    /// A start or end tag's name: the element's name, and a choice's type suffix.
    @inline(__always) mutating func name(_ element: UnsafePointer<Element>, suffix: String?) {
        text(element.pointee.name)
        if let suffix { text(suffix) }
    }

    mutating func writeResource(at resource: UnsafePointer<Element>, indent level: Int, root: Bool) {
        indent(level)
        let name = model.type(at: resource)?.name ?? resource.pointee.name
        out.append(0x3C)
        text(name)
        if root { raw(" xmlns=\"http://hl7.org/fhir\"") }
        if resource.pointee.children.isEmpty {
            raw("/>")
            return
        }
        out.append(0x3E)
        writeChildren(of: resource, indent: level + 1, attributes: Attributes())
        indent(level)
        raw("</")
        text(name)
        out.append(0x3E)
    }

    /// Which children of an element were written as its attributes.
    struct Attributes {
        var id = false
        var url = false

        func contains(_ child: UnsafePointer<Element>) -> Bool {
            (id && child.pointee.name == "id") || (url && child.pointee.name == "url")
        }
    }

    /// Writes the children of `element` that are elements (not attributes).
    mutating func writeChildren(of element: UnsafePointer<Element>, indent level: Int, attributes: Attributes) {
        unowned(unsafe) let parentType = model.type(at: element)
        element.pointee.children.withUnsafeBufferPointer { children in
            for i in children.indices {
                let child = children.baseAddress! + i
                if child.pointee.isUnknown {
                    if child.pointee.typeIndex == Element.unknownXML, let rawXML = child.pointee.value {
                        indent(level)
                        text(rawXML)
                    }
                    continue
                }
                if attributes.contains(child) || !Element.hasContent(at: child, in: .xml) { continue }
                let isChoice = parentType?.traits(of: child).isChoice ?? false
                writeElement(at: child, suffix: isChoice ? model.type(at: child)?.choiceSuffix : nil, indent: level)
            }
        }
    }

    mutating func writeElement(at element: UnsafePointer<Element>, suffix: String?, indent level: Int) {
        guard let type = model.type(at: element) else { return }
        switch type.kind {
        case .resource:
            indent(level)
            out.append(0x3C); name(element, suffix: suffix); out.append(0x3E)
            writeResource(at: element, indent: level + 1, root: false)
            indent(level)
            raw("</"); name(element, suffix: suffix); out.append(0x3E)
        case .primitive where type.primitiveKind == .xhtml:
            indent(level)
            writeXHTML(element.pointee.value ?? "")
        case .primitive, .complex, .backbone:
            indent(level)
            out.append(0x3C)
            name(element, suffix: suffix)
            let attributes = writeAttributes(of: element, isExtension: type.index == ModelInfo.extensionTypeIndex)
            if !hasElements(element, besides: attributes) {
                raw("/>")
                return
            }
            out.append(0x3E)
            writeChildren(of: element, indent: level + 1, attributes: attributes)
            indent(level)
            raw("</"); name(element, suffix: suffix); out.append(0x3E)
        }
    }

    /// Writes an element's id, an extension's url and a primitive's value as attributes.
    mutating func writeAttributes(of element: UnsafePointer<Element>, isExtension: Bool) -> Attributes {
        var attributes = Attributes()
        if let id = first(named: "id", in: element), let value = id.pointee.value {
            attribute("id", value)
            attributes.id = true
        }
        if isExtension, let url = first(named: "url", in: element), let value = url.pointee.value {
            attribute("url", value)
            attributes.url = true
        }
        if let value = element.pointee.value {
            attribute("value", value)
        }
        return attributes
    }

    /// The first known child of this name, read in place.
    func first(named name: String, in element: UnsafePointer<Element>) -> UnsafePointer<Element>? {
        element.pointee.children.withUnsafeBufferPointer { children in
            for i in children.indices {
                let child = children.baseAddress! + i
                if !child.pointee.isUnknown && child.pointee.name == name { return child }
            }
            return nil
        }
    }

    /// Whether any child is written as an element rather than an attribute.
    func hasElements(_ element: UnsafePointer<Element>, besides attributes: Attributes) -> Bool {
        element.pointee.children.withUnsafeBufferPointer { children in
            for i in children.indices {
                let child = children.baseAddress! + i
                if child.pointee.isUnknown ? child.pointee.typeIndex == Element.unknownXML
                    : !attributes.contains(child) && Element.hasContent(at: child, in: .xml) { return true }
            }
            return false
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
