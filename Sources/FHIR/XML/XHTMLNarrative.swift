internal import CLibXML2

/// Checks a narrative `div` read from JSON: well-formed XML with its root `<div>` in the XHTML
/// namespace, as the XML format carries it. JSON holds the narrative as a string, so without
/// this check a malformed one (an unclosed tag, a duplicate attribute) would be read and then
/// written into XML that no reader takes.
enum XHTMLNarrative {
    static let namespace = "http://www.w3.org/1999/xhtml"

    /// Why the text is not a well-formed XHTML div, or nil when it is. It passes `XMLMarkupScan`
    /// first (no DOCTYPE, a bounded number of attributes per element); libxml2 then reads it as
    /// UTF-8 with no network, no DTD and no entity expansion.
    /// With `checkingContent`, also R4's rules for what a narrative holds (`contentProblem`).
    static func problem(_ text: String, checkingContent: Bool = false) -> String? {
        _ = LibXML2Setup.once
        caregate_silence_generic_errors()
        var scan = XMLMarkupScan()
        var text = text
        if let refusal = text.withUTF8({ scan.scan(UnsafeRawBufferPointer($0)) }) { return refusal.message }
        guard let context = xmlNewParserCtxt() else { return "cannot start the XML parser" }
        defer { xmlFreeParserCtxt(context) }
        let options = Int32(XML_PARSE_NONET.rawValue | XML_PARSE_NOERROR.rawValue | XML_PARSE_NOWARNING.rawValue | XML_PARSE_NOCDATA.rawValue
                            | XML_PARSE_IGNORE_ENC.rawValue)
        let document = text.utf8CString.withUnsafeBufferPointer { bytes in
            xmlCtxtReadMemory(context, bytes.baseAddress, Int32(bytes.count - 1), nil, "UTF-8", options)
        }
        func lastError() -> String {
            guard let error = xmlCtxtGetLastError(context), let message = error.pointee.message else { return "not well-formed XML" }
            var text = String(cString: message)
            while text.last == "\n" || text.last == " " { text.removeLast() }
            return "line \(error.pointee.line) of the div: \(text)"
        }
        guard let document else { return lastError() }
        defer { xmlFreeDoc(document) }
        // libxml2 recovers from namespace errors (a prefix never declared, as in `<b:r/>`) and
        // still returns a document; the XML reader refuses them, so the JSON reader does too.
        if context.pointee.wellFormed == 0 || context.pointee.nsWellFormed == 0 { return lastError() }
        guard let root = xmlDocGetRootElement(document), String(cString: root.pointee.name) == "div",
              root.pointee.ns.map({ String(cString: $0.pointee.href) }) == namespace else {
            return "the root element must be <div xmlns=\"\(namespace)\">"
        }
        return checkingContent ? contentProblem(root) : nil
    }

    /// Elements R4's narrative rules (txt-1) leave out: scripts, forms, frames, embedded objects
    /// and document-level markup.
    static let forbiddenElements: Set<String> = [
        "script", "style", "form", "input", "button", "select", "textarea", "iframe", "frame", "frameset",
        "object", "applet", "embed", "base", "link", "meta", "head", "body", "html", "title",
    ]

    /// Why a well-formed div breaks txt-1 (a forbidden element, an event-handler attribute) or
    /// txt-2 (no non-whitespace content, and no image), or nil.
    static func contentProblem(_ root: xmlNodePtr) -> String? {
        var hasContent = false
        var problem: String?
        func visit(_ node: xmlNodePtr) {
            var child = node.pointee.children
            while let current = child, problem == nil {
                if current.pointee.type == XML_ELEMENT_NODE {
                    let name = String(cString: current.pointee.name).lowercased()
                    if forbiddenElements.contains(name) { problem = "the narrative holds a <\(name)> element, which FHIR narratives may not (txt-1)"; return }
                    if name == "img" { hasContent = true }
                    var attribute = current.pointee.properties
                    while let a = attribute {
                        let attributeName = String(cString: a.pointee.name).lowercased()
                        if attributeName.hasPrefix("on") { problem = "the narrative's <\(name)> has an event handler attribute '\(attributeName)' (txt-1)"; return }
                        attribute = a.pointee.next
                    }
                    visit(current)
                } else if current.pointee.type == XML_TEXT_NODE || current.pointee.type == XML_CDATA_SECTION_NODE,
                          let content = current.pointee.content,
                          String(cString: content).contains(where: { !$0.isWhitespace }) {
                    hasContent = true
                }
                child = current.pointee.next
            }
        }
        visit(root)
        if let problem { return problem }
        return hasContent ? nil : "the narrative has no content: no text and no image (txt-2)"
    }
}

/// FHIR narratives (`Narrative.div`).
public enum Narrative {
    /// Why an XHTML div is not a narrative R4 accepts (not well-formed, not an XHTML div, a
    /// forbidden element or event-handler attribute, no content), or nil: what FHIRPath's
    /// `htmlChecks()` asks (R4's invariants txt-1 and txt-2).
    public static func problem(_ div: String) -> String? {
        XHTMLNarrative.problem(div, checkingContent: true)
    }
}
