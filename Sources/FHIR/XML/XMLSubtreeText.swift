internal import CLibXML2

#if canImport(Glibc)
import Glibc
#endif

/// Writes one XML subtree back as text from libxml2's SAX2 events: a narrative `div`, or an
/// element the definitions do not describe (kept whole). The text is what libxml2 itself writes
/// for the subtree copied out of its document (`xmlTextReaderReadOuterXml`), so that narratives
/// read the same whichever way they are read: empty elements as `<br/>`; text escaping `<`, `>`,
/// `&` and carriage returns; attribute values escaping those, quotes, tabs, line feeds and every
/// non-ASCII character (as `&#xE9;`); and a namespace the subtree uses but declares outside
/// itself declared on its root, after the root's own declarations.
/// A subtree that is skipped, not kept, only has its depth counted.
struct XMLSubtreeText {
    /// Whether the subtree is written (kept) or only followed to its end (skipped).
    let writes: Bool
    private(set) var bytes: [UInt8] = []
    /// Open elements inside the subtree; the subtree ends when this falls back to zero.
    private(set) var depth = 0
    /// The last start tag still waits for `>` or `/>`.
    private var startTagOpen = false
    /// Where, in the root's start tag, namespaces declared outside the subtree are inserted.
    private var rootDeclarationsEnd = 0
    /// Prefixes declared inside the subtree, one entry per open element (nil: the default).
    private var declared: [[[UInt8]?]] = []
    /// Namespaces used inside the subtree but declared outside it, in order of first use.
    private var outside: [(prefix: [UInt8]?, uri: [UInt8])] = []

    /// A subtree written as text, or (`writes: false`) only followed to its end.
    init(writes: Bool) {
        self.writes = writes
    }

    /// Opens an element: its name, its own namespace declarations, then its attributes.
    mutating func start(_ event: XMLStartTag) {
        depth += 1
        guard writes else { return }
        closeStartTag()
        bytes.append(UInt8(ascii: "<"))
        appendName(event.prefix, event.localName)
        var prefixes: [[UInt8]?] = []
        for i in 0..<event.namespaceCount {
            let prefix = event.namespaces?[2 * i]
            let uri = event.namespaces?[2 * i + 1]
            prefixes.append(prefix.map(XMLSubtreeText.cBytes))
            bytes.append(contentsOf: Array(" xmlns".utf8))
            if let prefix { bytes.append(UInt8(ascii: ":")); bytes.append(contentsOf: XMLSubtreeText.cBytes(prefix)) }
            appendQuotedURI(uri.map(XMLSubtreeText.cBytes) ?? [])
        }
        declared.append(prefixes)
        if depth == 1 { rootDeclarationsEnd = bytes.count }
        noteNamespace(prefix: event.prefix, uri: event.uri)
        for i in 0..<event.attributeCount {
            let attribute = event.attribute(i)
            if attribute.uri != nil { noteNamespace(prefix: attribute.prefix, uri: attribute.uri) }
            bytes.append(UInt8(ascii: " "))
            appendName(attribute.prefix, attribute.localName)
            bytes.append(contentsOf: Array("=\"".utf8))
            appendAttributeValue(attribute.value)
            bytes.append(UInt8(ascii: "\""))
        }
        startTagOpen = true
    }

    /// Closes the innermost element; returns true when that closes the subtree.
    mutating func end(prefix: UnsafePointer<xmlChar>?, localName: UnsafePointer<xmlChar>) -> Bool {
        depth -= 1
        guard writes else { return depth == 0 }
        if startTagOpen {
            bytes.append(contentsOf: Array("/>".utf8))
            startTagOpen = false
        } else {
            bytes.append(contentsOf: Array("</".utf8))
            appendName(prefix, localName)
            bytes.append(UInt8(ascii: ">"))
        }
        declared.removeLast()
        return depth == 0
    }

    /// Character data, escaped as element content.
    mutating func text(_ characters: UnsafeBufferPointer<UInt8>) {
        guard writes, !characters.isEmpty else { return }
        closeStartTag()
        for byte in characters {
            switch byte {
            case UInt8(ascii: "<"): bytes.append(contentsOf: Array("&lt;".utf8))
            case UInt8(ascii: ">"): bytes.append(contentsOf: Array("&gt;".utf8))
            case UInt8(ascii: "&"): bytes.append(contentsOf: Array("&amp;".utf8))
            case 0x0D: bytes.append(contentsOf: Array("&#13;".utf8))
            default: bytes.append(byte)
            }
        }
    }

    /// A CDATA section, a comment or a processing instruction, written as it came.
    mutating func markup(open: String, _ content: UnsafeBufferPointer<UInt8>, close: String) {
        guard writes else { return }
        closeStartTag()
        bytes.append(contentsOf: Array(open.utf8))
        bytes.append(contentsOf: content)
        bytes.append(contentsOf: Array(close.utf8))
    }

    /// The subtree's text, with the namespaces it declares outside itself declared on its root.
    func finished() -> String {
        guard !outside.isEmpty else { return String(decoding: bytes, as: UTF8.self) }
        var declarations: [UInt8] = []
        for (prefix, uri) in outside {
            declarations.append(contentsOf: Array(" xmlns".utf8))
            if let prefix { declarations.append(UInt8(ascii: ":")); declarations.append(contentsOf: prefix) }
            declarations.append(contentsOf: XMLSubtreeText.quotedURI(uri))
        }
        var whole = bytes
        whole.insert(contentsOf: declarations, at: rootDeclarationsEnd)
        return String(decoding: whole, as: UTF8.self)
    }

    // MARK: Pieces

    private mutating func closeStartTag() {
        if startTagOpen {
            bytes.append(UInt8(ascii: ">"))
            startTagOpen = false
        }
    }

    private mutating func appendName(_ prefix: UnsafePointer<xmlChar>?, _ localName: UnsafePointer<xmlChar>) {
        if let prefix {
            bytes.append(contentsOf: XMLSubtreeText.cBytes(prefix))
            bytes.append(UInt8(ascii: ":"))
        }
        bytes.append(contentsOf: XMLSubtreeText.cBytes(localName))
    }

    /// A name in a namespace declared outside the subtree gets that declaration on the root, once
    /// per prefix; the `xml` prefix is never declared.
    private mutating func noteNamespace(prefix: UnsafePointer<xmlChar>?, uri: UnsafePointer<xmlChar>?) {
        guard let uri else { return }
        let prefixBytes = prefix.map(XMLSubtreeText.cBytes)
        if prefixBytes == Array("xml".utf8) { return }
        if declared.contains(where: { $0.contains(prefixBytes) }) { return }
        if outside.contains(where: { $0.prefix == prefixBytes }) { return }
        outside.append((prefixBytes, XMLSubtreeText.cBytes(uri)))
    }

    private mutating func appendQuotedURI(_ uri: [UInt8]) {
        bytes.append(contentsOf: XMLSubtreeText.quotedURI(uri))
    }

    /// `="uri"`, or `='uri'` when the URI holds a double quote and no single one.
    private static func quotedURI(_ uri: [UInt8]) -> [UInt8] {
        let double = UInt8(ascii: "\""), single = UInt8(ascii: "'")
        if !uri.contains(double) { return [UInt8(ascii: "="), double] + uri + [double] }
        if !uri.contains(single) { return [UInt8(ascii: "="), single] + uri + [single] }
        return [UInt8(ascii: "="), double] + uri.flatMap { $0 == double ? Array("&quot;".utf8) : [$0] } + [double]
    }

    /// An attribute value as libxml2 writes it when the document names no encoding.
    private mutating func appendAttributeValue(_ value: [UInt8]) {
        var i = 0
        while i < value.count {
            let byte = value[i]
            switch byte {
            case UInt8(ascii: "<"): bytes.append(contentsOf: Array("&lt;".utf8))
            case UInt8(ascii: ">"): bytes.append(contentsOf: Array("&gt;".utf8))
            case UInt8(ascii: "&"): bytes.append(contentsOf: Array("&amp;".utf8))
            case UInt8(ascii: "\""): bytes.append(contentsOf: Array("&quot;".utf8))
            case 0x0A: bytes.append(contentsOf: Array("&#10;".utf8))
            case 0x0D: bytes.append(contentsOf: Array("&#13;".utf8))
            case 0x09: bytes.append(contentsOf: Array("&#9;".utf8))
            case 0x80...:
                let length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2
                var scalar = UInt32(byte) & (length == 4 ? 0x07 : length == 3 ? 0x0F : 0x1F)
                for k in 1..<length where i + k < value.count { scalar = scalar << 6 | UInt32(value[i + k] & 0x3F) }
                bytes.append(contentsOf: Array("&#x\(String(scalar, radix: 16, uppercase: true));".utf8))
                i += length
                continue
            default: bytes.append(byte)
            }
            i += 1
        }
    }

    static func cBytes(_ pointer: UnsafePointer<xmlChar>) -> [UInt8] {
        Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer)))
    }
}

/// One start tag as libxml2's SAX2 interface hands it over.
struct XMLStartTag {
    let localName: UnsafePointer<xmlChar>
    let prefix: UnsafePointer<xmlChar>?
    let uri: UnsafePointer<xmlChar>?
    let namespaceCount: Int
    /// Prefix and URI pairs of the namespaces this element declares.
    let namespaces: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?
    let attributeCount: Int
    /// Five pointers per attribute: local name, prefix, URI, value start, value end.
    let attributes: UnsafeMutablePointer<UnsafePointer<xmlChar>?>?

    /// One attribute; its value as the document means it (libxml2 hands `&` over as `&#38;`).
    func attribute(_ index: Int) -> XMLAttribute {
        let base = attributes! + 5 * index
        let start = base[3]!, end = base[4]!
        return XMLAttribute(localName: base[0]!, prefix: base[1], uri: base[2],
                            raw: UnsafeBufferPointer(start: start, count: end - start))
    }
}

/// One attribute of an `XMLStartTag`.
struct XMLAttribute {
    let localName: UnsafePointer<xmlChar>
    let prefix: UnsafePointer<xmlChar>?
    let uri: UnsafePointer<xmlChar>?
    /// The value as the parser passed it, with each `&` written `&#38;`.
    let raw: UnsafeBufferPointer<UInt8>

    /// The value's bytes, with `&#38;` read back as `&`.
    var value: [UInt8] {
        hasAmpersand ? unescaped : Array(raw)
    }

    /// The value as a string.
    var string: String {
        hasAmpersand ? String(decoding: unescaped, as: UTF8.self) : String(decoding: raw, as: UTF8.self)
    }

    /// Whether the value holds an `&` (found with `memchr`: values are read for every element).
    private var hasAmpersand: Bool {
        guard let base = raw.baseAddress, !raw.isEmpty else { return false }
        return memchr(base, 0x26, raw.count) != nil
    }

    /// The value's bytes with each `&#38;` read back as `&`.
    private var unescaped: [UInt8] {
        var result: [UInt8] = []
        result.reserveCapacity(raw.count)
        var i = 0
        let escaped = Array("&#38;".utf8)
        while i < raw.count {
            if raw[i] == UInt8(ascii: "&"), i + 5 <= raw.count, raw[i..<(i + 5)].elementsEqual(escaped) {
                result.append(UInt8(ascii: "&"))
                i += 5
            } else {
                result.append(raw[i])
                i += 1
            }
        }
        return result
    }
}
