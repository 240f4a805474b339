import FHIR

/// The round trips every resource read must survive: written in its format and read again, it
/// is the same element tree; one that validates and holds nothing unknown converts to the other
/// format and back unchanged.
enum RoundTrip {
    /// Reads what the writers wrote: leniently, since a resource read leniently (invalid codes
    /// kept as warnings) must come back too.
    static let reread = ParseOptions(maximumDocumentSize: 1 << 24, lenient: true)
    /// Reads what the writers wrote from a resource read strictly: it must read strictly too.
    static let strictReread = ParseOptions(maximumDocumentSize: 1 << 24)

    /// Written in `format` (compact and pretty) and read back with `reread`: the same tree, but
    /// for the other format's unknown content, which has no form in this one.
    static func within(_ format: FHIRFormat, _ resource: Element, reread: ParseOptions = reread) throws(PropertyFailure) {
        let foreign = format == .json ? Element.unknownXML : Element.unknownJSON
        for pretty in [false, true] {
            let bytes = FHIRDocument.write(resource, format: format, pretty: pretty)
            let again: Element
            do {
                again = try read(bytes, format, reread).resource
            } catch {
                throw PropertyFailure("the \(format.rawValue.uppercased()) written does not read back (\(error)):\n\(text(bytes))")
            }
            try same(comparable(resource, dropping: foreign), comparable(again, dropping: foreign),
                     "\(format.rawValue.uppercased()) written\(pretty ? " pretty" : "") and read back")
        }
    }

    /// A document in memory, in JSON or XML.
    static func read(_ bytes: [UInt8], _ format: FHIRFormat, _ options: ParseOptions = ParseOptions()) throws(FHIRFormatError) -> ParsedResource {
        format == .xml ? try FHIRXMLReader(options: options).read(bytes) : try FHIRJSONReader(options: options).read(bytes)
    }

    /// A document as an input: read strictly, it survives the round trips in both formats and
    /// across them; read only leniently, the round trip in its own format.
    static func document(_ input: [UInt8], _ format: FHIRFormat) throws(PropertyFailure) {
        if let strict = try? read(input, format) {
            try within(format, strict.resource, reread: strictReread)
            try within(format == .json ? .xml : .json, strict.resource, reread: strictReread)
            try acrossFormats(strict)
        } else if let lenient = try? read(input, format, ParseOptions(lenient: true)) {
            try within(format, lenient.resource)
        }
    }

    /// For a resource read strictly, without warnings, that validates: JSON → XML → JSON (or
    /// XML → JSON → XML) gives the same JSON.
    static func acrossFormats(_ parsed: ParsedResource) throws(PropertyFailure) {
        guard parsed.warnings.isEmpty, ResourceValidator().validate(parsed.resource).isEmpty else { return }
        let resource = parsed.resource
        let xml = FHIRXMLWriter().write(resource)
        let fromXML: Element
        do {
            fromXML = try FHIRXMLReader().read(xml).resource
        } catch {
            throw PropertyFailure("a valid resource written as XML does not read back strictly (\(error)):\n\(text(xml))")
        }
        let before = FHIRJSONWriter().write(comparable(resource, dropping: Element.unknownXML))
        let after = FHIRJSONWriter().write(comparable(fromXML, dropping: Element.unknownXML))
        guard before == after else {
            throw PropertyFailure("JSON → XML → JSON changed the resource:\n\(text(before))\n---\n\(text(after))")
        }
    }

    /// The tree as a round trip through one format must keep it: without the other format's
    /// unknown content (which has no form in this one; conversion says it is left out) and the
    /// elements that held nothing else, and with narrative XHTML as libxml2 serializes it
    /// (`&quot;` in text and `"` are one XHTML).
    static func comparable(_ element: Element, dropping unknown: Int32) -> Element {
        let format: FHIRFormat = unknown == Element.unknownXML ? .json : .xml
        var copy = element
        if copy.typeName == "xhtml", let value = copy.value { copy.value = canonicalXHTML(value) }
        copy.children = copy.children.filter { $0.isUnknown ? $0.typeIndex != unknown : $0.hasContent(in: format) }
            .map { comparable($0, dropping: unknown) }
        return copy
    }

    static func canonicalXHTML(_ div: String) -> String {
        let document = #"<Basic xmlns="http://hl7.org/fhir"><text><status value="generated"/>"# + div + "</text></Basic>"
        return (try? FHIRXMLReader(options: reread).read(document).resource["text"]?["div"]?.value ?? div) ?? div
    }

    static func same(_ a: Element, _ b: Element, _ what: String) throws(PropertyFailure) {
        guard a != b else { return }
        throw PropertyFailure("\(what) differs at \(firstDifference(a, b, path: a.name))")
    }

    /// The path of the first node where two trees differ, with both nodes' values.
    static func firstDifference(_ a: Element, _ b: Element, path: String) -> String {
        if a.name != b.name || a.value != b.value || a.typeName != b.typeName || a.isUnknown != b.isUnknown || a.children.count != b.children.count {
            return "\(path): \(describe(a)) ≠ \(describe(b))"
        }
        for (x, y) in zip(a.children, b.children) where x != y {
            return firstDifference(x, y, path: "\(path).\(x.name)")
        }
        return "\(path): same names, values and children, different positions in the definitions"
    }

    static func describe(_ e: Element) -> String {
        "\(e.name) [\(e.typeName ?? "unknown")] value \(e.value.map { "\"\($0)\"" } ?? "nil"), \(e.children.count) children"
    }

    static func text(_ bytes: [UInt8]) -> String {
        String(decoding: bytes.prefix(4000), as: UTF8.self)
    }
}

/// FHIR JSON documents: read strictly, else leniently; every resource read survives the round trips.
public enum FHIRJSONHarness: FuzzHarness {
    public static let name = "fhir-json"
    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        try RoundTrip.document(input, .json)
        try skim(input)
        try shifted(input)
    }

    /// The reader passes indentation and plain string text eight bytes at a time: where those
    /// words fall must not matter. After 1, 3 or 7 more spaces a document reads to the same tree,
    /// or fails with the same issues at the same places (on the first line, that many columns on).
    static func shifted(_ input: [UInt8]) throws(PropertyFailure) {
        // A byte order mark counts only at the very start.
        guard input.first != 0xEF else { return }
        let before = outcome(input, shift: 0)
        for k in [1, 3, 7] {
            let after = outcome(Array(repeating: 0x20, count: k) + input, shift: k)
            guard after == before else {
                throw PropertyFailure("read after \(k) spaces:\n\(after)\n--- where it read before:\n\(before)\n\(RoundTrip.text(input))")
            }
        }
    }

    /// A strict read's tree (as compact JSON) and warnings, or its issues; columns on the first
    /// line are taken back by `shift`.
    static func outcome(_ input: [UInt8], shift: Int) -> String {
        func render(_ issues: [ParseIssue]) -> String {
            issues.map { issue in
                var location = issue.location
                if location.line == 1 { location.column -= shift }
                return "\(issue.severity) \(issue.code) \(location.line):\(location.column) \(location.path): \(issue.message)"
            }.joined(separator: "\n")
        }
        do {
            let read = try FHIRJSONReader().read(input)
            return String(decoding: FHIRJSONWriter(pretty: false).write(read.resource), as: UTF8.self) + "\n" + render(read.warnings)
        } catch {
            return "refused\n" + render(error.issues)
        }
    }

    /// A skimming read (the import's staging) checks less, never more: a document that reads
    /// whole reads skimmed too, with each skimmed entry the whole entry's id and kept elements.
    static func skim(_ input: [UInt8]) throws(PropertyFailure) {
        var options = ParseOptions()
        let whole: Set<String> = ["Patient", "CarePlan"], kept: Set<String> = ["subject", "patient"]
        options.skim = ParseOptions.Skim(wholeTypes: whole, keptElements: kept, root: true)
        let skimmed = try? RoundTrip.read(input, .json, options)
        guard let read = try? RoundTrip.read(input, .json) else { return }
        guard let skimmed else { throw PropertyFailure("a document that reads whole does not read skimmed\n\(RoundTrip.text(input))") }
        func projected(_ resource: Element) -> Element {
            guard let type = resource.resourceType, type != "Bundle", !whole.contains(type) else { return resource }
            // By definition, not by JSON name: a kept choice (`subject[x]`) is read in any of its types.
            guard let definition = ModelInfo.r4.type(named: type) else { return resource }
            var names: Set<String> = []
            for element in definition.elements where element.name == "id" || kept.contains(element.name) {
                if element.isChoice {
                    for type in element.typeNames { names.insert(element.name + type.prefix(1).uppercased() + type.dropFirst()) }
                } else {
                    names.insert(element.name)
                }
            }
            var kept = resource
            kept.children.removeAll { !names.contains($0.name) }
            return kept
        }
        var expected = projected(read.resource)
        for i in expected.children.indices where expected.children[i].name == "entry" {
            for j in expected.children[i].children.indices where expected.children[i].children[j].name == "resource" {
                expected.children[i].children[j] = projected(expected.children[i].children[j])
            }
        }
        try RoundTrip.same(expected, skimmed.resource, "the skimmed read against the whole read's kept elements")
    }
}

/// FHIR XML documents (through libxml2): read strictly, else leniently; every resource read
/// survives the round trips.
public enum FHIRXMLHarness: FuzzHarness {
    public static let name = "fhir-xml"
    public static func run(_ input: [UInt8]) throws(PropertyFailure) { try RoundTrip.document(input, .xml) }
}
