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
    static func problem(_ text: String) -> String? {
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
        return nil
    }
}
