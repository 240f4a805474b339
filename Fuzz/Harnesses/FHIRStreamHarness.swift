import FHIR

/// NDJSON files and Bundles read entry by entry (JSON and XML). The first byte picks the format.
/// Streaming must agree with reading the whole document: a Bundle that reads whole gives the same
/// entries and the same Bundle shell when streamed, and one that streams reads whole. NDJSON gives
/// a resource or an error for each line that is not blank, and goes on after errors.
public enum FHIRStreamHarness: FuzzHarness {
    public static let name = "fhir-stream"
    /// Entries read before a stream is given up (the inputs are small; this bounds a bug's loop).
    static let mostEntries = 100_000

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (selector, body) = input.selector
        switch selector % 3 {
        case 0: try ndjson(body)
        case 1: try bundle(body, .json)
        default: try bundle(body, .xml)
        }
    }

    static func ndjson(_ body: [UInt8]) throws(PropertyFailure) {
        let file = try ScratchFile(body, name: "input.ndjson")
        defer { file.remove() }
        guard let reader = try? NDJSONReader(path: file.path) else { throw PropertyFailure("cannot open \(file.path)") }
        var read = 0
        var refused = 0
        while read + refused < mostEntries {
            do {
                guard try reader.next() != nil else { break }
                read += 1
            } catch {
                refused += 1
            }
        }
        let lines = body.split(separator: 0x0A, omittingEmptySubsequences: false)
            .filter { !$0.allSatisfy { [0x20, 0x09, 0x0D].contains($0) } }.count
        guard read + refused == lines else {
            throw PropertyFailure("NDJSON of \(lines) non-blank lines gave \(read) resources and \(refused) errors")
        }
    }

    static func bundle(_ body: [UInt8], _ format: FHIRFormat) throws(PropertyFailure) {
        let whole = try? RoundTrip.read(body, format)
        if let whole, whole.resource.resourceType != "Bundle" { return }
        let file = try ScratchFile(body, name: format == .json ? "bundle.json" : "bundle.xml")
        defer { file.remove() }
        var entries: [Element] = []
        var shell: Element?
        var failure: FHIRFormatError?
        do {
            let stream = try BundleEntryStream(path: file.path, format: format)
            while entries.count <= mostEntries, let entry = try stream.next() {
                entries.append(entry)
            }
            shell = stream.bundle
        } catch {
            failure = error
        }
        if entries.count > mostEntries { throw PropertyFailure("a Bundle streamed more than \(mostEntries) entries") }
        switch (whole, shell) {
        case (nil, nil):
            return
        case (.some, nil):
            throw PropertyFailure("a Bundle that reads whole does not stream: \(failure.map { "\($0)" } ?? "no shell")\n\(RoundTrip.text(body))")
        case (nil, _):
            throw PropertyFailure("a Bundle that streams does not read whole\n\(RoundTrip.text(body))")
        case (let whole?, let shell?):
            let wholeEntries = whole.resource.children(named: "entry")
            guard wholeEntries == entries else {
                throw PropertyFailure("streamed entries differ from the whole read: \(entries.count) against \(wholeEntries.count)")
            }
            var rest = whole.resource
            rest.children.removeAll { $0.name == "entry" }
            try RoundTrip.same(rest, shell, "the streamed Bundle shell against the whole read")
            if format == .json { try keptTexts(file.path, entries: wholeEntries) }
        }
    }

    /// A JSON Bundle's entry texts as a staged import keeps them (`readKeepingEntryText`): an
    /// entry with a resource has a text that reads back as that resource, one without has none.
    /// An unknown element keeps its JSON text, and the kept text is compacted: the two are
    /// compared as JSON written without whitespace between tokens.
    static func keptTexts(_ path: String, entries: [Element]) throws(PropertyFailure) {
        let kept: [[UInt8]?]?
        do { kept = try FHIRDocument.readKeepingEntryText(contentsOf: path).entryText } catch {
            throw PropertyFailure("a Bundle that reads whole is refused when its entry texts are kept: \(error)")
        }
        guard let texts = kept else { throw PropertyFailure("a JSON Bundle that reads whole keeps no entry texts") }
        guard texts.count == entries.count else { throw PropertyFailure("\(texts.count) entry texts for \(entries.count) entries") }
        for (entry, text) in zip(entries, texts) {
            switch (entry["resource"], text) {
            case (nil, nil):
                continue
            case (var resource?, let text?):
                guard let again = try? FHIRJSONReader().read(text).resource else {
                    throw PropertyFailure("a kept entry text does not read on its own\n\(RoundTrip.text(text))")
                }
                resource.name = again.name
                let writer = FHIRJSONWriter(pretty: false)
                guard compacted(writer.write(again)) == compacted(writer.write(resource)) else {
                    try RoundTrip.same(again, resource, "a kept entry text against the whole read's entry")
                    throw PropertyFailure("a kept entry text against the whole read's entry differs\n\(RoundTrip.text(text))")
                }
            default:
                throw PropertyFailure("an entry \(text == nil ? "with a resource keeps no text" : "without a resource keeps a text")")
            }
        }
    }

    /// JSON text without whitespace outside strings, a byte at a time.
    static func compacted(_ text: [UInt8]) -> [UInt8] {
        var result: [UInt8] = [], inString = false, escaped = false
        for b in text {
            if inString {
                if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { inString = false }
                result.append(b)
            } else if b != 0x20 && b != 0x0A && b != 0x0D && b != 0x09 {
                if b == 0x22 { inString = true }
                result.append(b)
            }
        }
        return result
    }
}
