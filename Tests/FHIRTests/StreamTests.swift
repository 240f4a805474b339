import Foundation
import Testing
@testable import FHIR

@Suite("Streams: NDJSON and Bundles entry by entry")
struct StreamTests {
    func temporaryFile(_ name: String, _ contents: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(getpid())-\(name)").path
        try contents.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The error streaming `text`'s entries stops with, once a whole read has refused it too
    /// (nil, and an issue recorded, when it streams).
    func refusal(_ name: String, _ text: String, wholeRead: (String) throws -> Void = { _ = try FHIRJSONReader().read(contentsOf: $0) },
                 sourceLocation: SourceLocation = #_sourceLocation) throws -> FHIRFormatError? {
        let path = try temporaryFile(name, text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: FHIRFormatError.self, sourceLocation: sourceLocation) { try wholeRead(path) }
        do {
            let stream = try BundleEntryStream(path: path)
            while try stream.next() != nil {}
        } catch {
            return error
        }
        Issue.record("streamed: \(text)", sourceLocation: sourceLocation)
        return nil
    }

    /// Each entry's kept text read on its own, compacted and as is: the same resource as the whole read's entry.
    func expectEntryTextsMatch(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for compacting in [true, false] { try expectEntryTextsMatch(path, compacting: compacting, sourceLocation: sourceLocation) }
    }

    func expectEntryTextsMatch(_ path: String, compacting: Bool, sourceLocation: SourceLocation) throws {
        let (parsed, texts) = try FHIRDocument.readKeepingEntryText(contentsOf: path, options: ParseOptions(lenient: true), compacting: compacting)
        let entries = parsed.resource.children.filter { $0.name == "entry" }
        guard let texts else { return #expect(parsed.resource.resourceType != "Bundle", "\(path): no entry texts", sourceLocation: sourceLocation) }
        #expect(texts.count == entries.count, sourceLocation: sourceLocation)
        let writer = FHIRJSONWriter(pretty: false)
        for (entry, text) in zip(entries, texts) {
            guard let resource = entry["resource"] else { #expect(text == nil, sourceLocation: sourceLocation); continue }
            let again = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(try #require(text, sourceLocation: sourceLocation)).resource
            #expect(writer.write(again) == writer.write(resource), "\(path): \(resource.resourceType ?? "?")", sourceLocation: sourceLocation)
        }
    }

    @Test("a JSON Bundle's entries kept as text (whitespace between tokens dropped) read back as the entries of a whole read: the samples, the official Bundles, and strings holding braces, quotes and spaces")
    func entryText() throws {
        try expectEntryTextsMatch(SharedData.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path)
        let tricky = try temporaryFile("tricky-bundle.json", """
            \u{FEFF}{ "resourceType" : "Bundle", "type": "collection",
              "entry": [
                { "fullUrl": "urn:uuid:1", "resource": { "resourceType": "Patient", "id": "p1",
                    "name": [ { "text": "Ann \\"the } ] {\\" Lee", "given": [ "a  b", "c\\\\" ] } ] } },
                { "request": { "method": "DELETE", "url": "Patient/gone" } },
                { "resource" :{"resourceType":"Observation","status":"final","code":{"text":"[x]"}}, "fullUrl": "urn:uuid:2" }
              ]
            }
            """)
        defer { try? FileManager.default.removeItem(atPath: tricky) }
        try expectEntryTextsMatch(tricky)
        let (_, texts) = try FHIRDocument.readKeepingEntryText(contentsOf: tricky)
        #expect(texts?.count == 3 && texts?[1] == nil)
        #expect(texts?[0].map { String(decoding: $0, as: UTF8.self) }?.contains(#""text":"Ann \"the } ] {\" Lee","given":["a  b","c\\"]"#) == true)
        guard SharedData.isAvailable else { return SharedData.skipNotice("entry texts of the official Bundles") }
        let bundles = SharedData.files("fhir-r4/examples/json", suffix: ".json").filter { $0.lastPathComponent.lowercased().contains("bundle") }
        #expect(bundles.count > 3)
        for bundle in bundles { try expectEntryTextsMatch(bundle.path) }
    }

    /// The text outside strings without whitespace, a byte at a time: what `CompactJSON` does eight at a time.
    static func compactedByteByByte(_ text: [UInt8]) -> [UInt8] {
        var result: [UInt8] = [], inString = false, escaped = false
        for b in text {
            if inString {
                if escaped { escaped = false } else if b == 0x5C { escaped = true } else if b == 0x22 { inString = false }
                result.append(b)
            } else if ![0x20, 0x0A, 0x0D, 0x09].contains(b) {
                if b == 0x22 { inString = true }
                result.append(b)
            }
        }
        return result
    }

    @Test("a kept entry text is the entry's resource as the file has it without whitespace between tokens, whatever the alignment of escapes in its strings and the length of its indentation; an entry without a resource keeps none")
    func entryTextAtEveryAlignment() throws {
        var resources: [String] = []
        for n in 0..<20 {
            let pad = String(repeating: "a", count: n), indent = String(repeating: " ", count: n)
            resources.append("""
                { "resourceType" :"Patient", "id": "p\(n)",\t
                \(indent)\(indent)"name": [ { "text": "\(pad)\\"\(pad)\\\\\\"}{ ]\(pad)",\r\n "given": ["\(pad) \\\\", "\\u00e9\(pad)\\n"] } ] }
                """)
        }
        var entries = resources.enumerated().map { n, resource in "{\n\(String(repeating: " ", count: n))\"fullUrl\": \"urn:uuid:\(n)\", \"resource\":  \(resource) }" }
        entries.insert(#"{ "request": { "method": "DELETE", "url": "Patient/gone" } }"#, at: 7)
        let path = try temporaryFile("aligned-bundle.json", #"{"resourceType":"Bundle","type":"collection","entry":[ "# + entries.joined(separator: ",\n  ") + "]}")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try expectEntryTextsMatch(path)
        var kept = try #require(try FHIRDocument.readKeepingEntryText(contentsOf: path).entryText)
        #expect(kept.count == 21 && kept[7] == nil)
        kept.remove(at: 7)
        #expect(kept.map { $0 ?? [] } == resources.map { Self.compactedByteByByte(Array($0.utf8)) })
        // Not compacted: each resource exactly as the file has it.
        var asIs = try #require(try FHIRDocument.readKeepingEntryText(contentsOf: path, compacting: false).entryText)
        #expect(asIs.count == 21 && asIs[7] == nil)
        asIs.remove(at: 7)
        #expect(asIs.map { $0 ?? [] } == resources.map { Array($0.utf8) })
    }

    @Test("a skimming read keeps a Bundle entry's id and the kept elements of the types it does not read whole, checks the rest only as JSON, and never skims a root Bundle, a whole type or a contained resource")
    func skim() throws {
        let bundle = """
            {"resourceType":"Bundle","type":"collection","entry":[
              {"fullUrl":"urn:uuid:c1","resource":{"status":"nonsense","resourceType":"Claim","id":"c1","patient":{"reference":"urn:uuid:p1"},
                "made-up":[1,{"a":null}],"contained":[{"resourceType":"Patient","id":"x","gender":"?"}],"total":{"value":"not a number"}}},
              {"fullUrl":"urn:uuid:p1","resource":{"resourceType":"Patient","id":"p1","gender":"female","name":[{"text":"Ann"}]}},
              {"resource":{"resourceType":"Encounter","id":"e1","status":"finished","class":{"code":"AMB"},"subject":{"reference":"Patient/p1"}}}]}
            """
        var options = ParseOptions()
        options.skim = ParseOptions.Skim(wholeTypes: ["Patient"], keptElements: ["patient", "subject"], root: false)
        let skimmed = try FHIRJSONReader(options: options).read(bundle).resource
        let entries = skimmed.children.filter { $0.name == "entry" }.compactMap { $0["resource"] }
        #expect(entries.map { $0.children.map(\.name) } == [["id", "patient"], ["id", "name", "gender"], ["id", "subject"]])
        #expect(entries[0].first("patient.reference")?.value == "urn:uuid:p1" && entries[2].first("subject.reference")?.value == "Patient/p1")
        // Read whole, the Claim's bad code, unknown element and bad decimal are errors.
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader().read(bundle) }
        // What is kept is still validated; what is skipped must still be JSON, with its line.
        let badKept = bundle.replacingOccurrences(of: #""id":"c1""#, with: #""id":"c 1!""#)
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader(options: options).read(badKept) }
        let badJSON = bundle.replacingOccurrences(of: #"[1,{"a":null}]"#, with: #"[1,{"a":nul}]"#)
        do {
            _ = try FHIRJSONReader(options: options).read(badJSON)
            Issue.record("a skimmed entry that is not JSON was read")
        } catch {
            #expect(error.issues.first?.location.line == 3)
        }
        // The root: skimmed only when asked, a Bundle never.
        let claim = #"{"resourceType":"Claim","id":"c2","status":"nonsense","patient":{"reference":"Patient/p1"}}"#
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader(options: options).read(claim) }
        options.skim?.root = true
        #expect(try FHIRJSONReader(options: options).read(claim).resource.children.map(\.name) == ["id", "patient"])
        #expect(try FHIRJSONReader(options: options).read(bundle).resource.children.filter { $0.name == "entry" }.count == 3)
    }

    @Test("NDJSON lines handed out unparsed read as next() reads them, with their line numbers")
    func ndjsonLines() throws {
        let path = try temporaryFile("lines.ndjson", "{\"resourceType\":\"Patient\",\"id\":\"a\"}\n\n  \n{\"resourceType\":\"Patient\",\"id\":\"b\"}\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try NDJSONReader(path: path)
        var lines: [NDJSONReader.Line] = []
        while let line = try reader.nextLine() { lines.append(line) }
        #expect(lines.map(\.number) == [1, 4])
        #expect(try lines.map { try $0.parse(options: reader.readOptions).resource.string("id") } == ["a", "b"])
    }

    @Test("a bad NDJSON line is reported with its line number and the next lines still read")
    func ndjsonBadLine() throws {
        let path = try temporaryFile("bad.ndjson", """
            {"resourceType":"Patient","id":"a"}

            {"resourceType":"Observation","status":"done","code":{"text":"x"}}
            {"resourceType":"Patient","id":"b"
            {"resourceType":"Patient","id":"c"}
            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let reader = try NDJSONReader(path: path)
        var ids: [String] = []
        var errors: [ParseIssue] = []
        while true {
            do {
                guard let parsed = try reader.next() else { break }
                ids.append(parsed.resource.string("id") ?? "?")
            } catch {
                errors += error.issues
            }
        }
        #expect(ids == ["a", "c"])
        #expect(errors.count == 2)
        #expect(errors[0].location.line == 3 && errors[0].location.path == "Observation.status")
        #expect(errors[1].location.line == 4 && errors[1].code == .syntax)
        #expect(errors[1].location.file == path)
    }

    @Test("format detection by extension and by content")
    func detection() throws {
        #expect(FHIRFormat.detect(head: Array(#"{"resourceType":"Patient"}"#.utf8)) == .json)
        #expect(FHIRFormat.detect(head: Array("{\"resourceType\":\"Patient\"}\n{\"resourceType\":\"Patient\"}\n".utf8)) == .ndjson)
        #expect(FHIRFormat.detect(head: Array("{\n  \"resourceType\": \"Patient\"\n}\n".utf8)) == .json)
        #expect(FHIRFormat.detect(head: Array("\u{FEFF}<?xml version=\"1.0\"?><Patient/>".utf8)) == .xml)
        let path = try temporaryFile("noext", "{\"resourceType\":\"Patient\"}\n{\"resourceType\":\"Patient\"}\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(try FHIRFormat.detect(path: path) == .ndjson)
    }

    @Test("an entry that is invalid stops the stream with its entry index and line")
    func invalidEntry() throws {
        let path = try temporaryFile("bundle.json", """
            {"resourceType":"Bundle","type":"collection","entry":[
              {"resource":{"resourceType":"Patient","id":"a"}},
              {"resource":{"resourceType":"Patient","id":"b","gender":"f"}}
            ]}
            """)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let stream = try BundleEntryStream(path: path)
        #expect(try stream.next()?.first("resource.id")?.value == "a")
        do {
            _ = try stream.next()
            Issue.record("accepted an invalid gender")
        } catch {
            #expect(error.issues.first?.location.line == 3)
            #expect(error.issues.first?.location.path == "Bundle.entry[1].resource.gender")
        }
    }

    @Test("content after the Bundle's closing brace, a trailing comma, or an empty entry array is an error when streamed, as when read whole (found by fuzz-fhir-stream)")
    func trailingContent() throws {
        for trailer in [", \"subject\": {}", "}", "x", "{\"resourceType\":\"Patient\"}"] {
            let error = try refusal("trailing.json", #"{"resourceType":"Bundle","type":"collection","entry":[{"fullUrl":"urn:uuid:1"}]}"# + "\n" + trailer)
            #expect(error?.issues.first?.message.hasPrefix("unexpected content after the resource") == true)
            #expect(error?.issues.first?.location.line == 2)
        }
        // A trailing comma among the entries or the Bundle's properties, an empty entry array (found by fuzz-fhir-stream): refused both ways.
        for (text, message) in [("{\"resourceType\":\"Bundle\",\"type\":\"batch\",\"entry\":[{\"fullUrl\":\"urn:uuid:1\"},\n  \n]}", "expected an entry after ','"),
                                ("{\"resourceType\":\"Bundle\",\"type\":\"batch\",\n\n}", "expected a property after ','"),
                                ("{\"resourceType\":\"Bundle\",\"entry\":[{\"fullUrl\":\"urn:uuid:1\"}],\n\n}", "expected a property after ','"),
                                ("{\"resourceType\":\"Bundle\",\"type\":\"batch\",\n\n\"entry\": [ ]}", "Bundle.entry: empty array")] {
            let error = try refusal("comma.json", text)
            #expect(error?.issues.first?.message.hasPrefix(message) == true, "\(String(describing: error))")
            #expect(error?.issues.first?.location.line == 3)
        }
        let empty = try temporaryFile("empty-then.json", #"{} []"#)
        defer { try? FileManager.default.removeItem(atPath: empty) }
        #expect(throws: FHIRFormatError.self) { let stream = try BundleEntryStream(path: empty); while try stream.next() != nil {} }
    }

    @Test("an XML Bundle libxml2 warns about (version 1.5) is refused when streamed, as when read whole (found by fuzz-fhir-stream)")
    func xmlWarningStreamed() throws {
        let bundle = #"<?xml version="1.5"?><Bundle xmlns="http://hl7.org/fhir"><type value="batch"/><entry><request><method value="GET"/><url value="/Patient/example"/></request></entry></Bundle>"#
        let error = try refusal("version.xml", bundle, wholeRead: { _ = try FHIRXMLReader().read(contentsOf: $0) })
        #expect(error?.issues.first?.message == "Unsupported version '1.5'")
        #expect(error?.issues.first?.location.line == 1)
        // Version 1.0 streams.
        let good = try temporaryFile("version-1.0.xml", bundle.replacingOccurrences(of: "1.5", with: "1.0"))
        defer { try? FileManager.default.removeItem(atPath: good) }
        let stream = try BundleEntryStream(path: good)
        var entries = 0
        while try stream.next() != nil { entries += 1 }
        #expect(entries == 1)
    }

    @Test("a JSON narrative that is not well-formed XHTML is an error (a warning when lenient), so it never becomes XML no reader takes (found by fuzz-fhir-json)")
    func narrativeWellFormed() throws {
        func patient(_ div: String) -> String { #"{"resourceType":"Patient","text":{"status":"generated","div":"\#(div)"}}"# }
        let bad = [#"<div xmlns=\"http://www.w3.org/1999/xhtml\" xmlns=\"x\">a</div>"#: "Attribute xmlns redefined",
                   #"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>a</div>"#: "Premature end of data",
                   #"<div>a</div>"#: "the root element must be <div xmlns=\"http://www.w3.org/1999/xhtml\">",
                   #"<div xmlns=\"http://www.w3.org/1999/xhtml\">&nbsp;</div>"#: "nbsp"]
        for (div, problem) in bad {
            do {
                _ = try FHIRJSONReader().read(patient(div))
                Issue.record("accepted \(div)")
            } catch {
                #expect(error.issues.first?.message.hasPrefix("the narrative is not well-formed XHTML") == true, "\(error)")
                #expect(error.issues.first?.message.contains(problem) == true, "\(error)")
                #expect(error.issues.first?.location.path == "Patient.text.div")
            }
            let lenient = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(patient(div))
            #expect(lenient.warnings.contains { $0.message.hasPrefix("the narrative is not well-formed XHTML") })
        }
        let good = try FHIRJSONReader().read(patient(#"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p class=\"x\">a &amp; b &lt; c</p></div>"#))
        #expect(try FHIRXMLReader().read(FHIRXMLWriter().write(good.resource)).resource == good.resource)
    }

    @Test("line numbers stay right past the reader's buffer compactions (an error on line 5,002 of a 1.3 MB Bundle)")
    func linesAcrossCompaction() throws {
        var text = "{\"resourceType\":\"Bundle\",\"type\":\"collection\",\"entry\":[\n"
        let note = String(repeating: "x", count: 220)
        for i in 0..<5000 {
            text += "{\"resource\":{\"resourceType\":\"Patient\",\"id\":\"p\(i)\",\"name\":[{\"text\":\"\(note)\"}]}},\n"
        }
        text += "{\"resource\":{\"resourceType\":\"Patient\",\"id\":\"last\",\"gender\":\"f\"}}\n]}"
        let path = try temporaryFile("compaction.json", text)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(text.utf8.count > 1_300_000)
        let stream = try BundleEntryStream(path: path)
        var read = 0
        do {
            while try stream.next() != nil { read += 1 }
            Issue.record("accepted an invalid gender")
        } catch {
            #expect(read == 5000)
            #expect(error.issues.first?.location.line == 5002)
            #expect(error.issues.first?.location.path == "Bundle.entry[5000].resource.gender")
        }
    }

    @Test("Synthea bundles streamed entry by entry (JSON, and XML written by CareGate) equal the whole read")
    func syntheaStreams() throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("Synthea streaming") }
        for file in SharedData.files("synthea", suffix: ".json").prefix(4) {
            let whole = try FHIRJSONReader().read(contentsOf: file.path).resource
            let entries = whole.children(named: "entry")
            let stream = try BundleEntryStream(path: file.path)
            var count = 0
            while let entry = try stream.next() {
                #expect(entry == entries[count])
                count += 1
            }
            #expect(count == entries.count)
            let xmlPath = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(getpid())-\(file.deletingPathExtension().lastPathComponent).xml").path
            try Data(FHIRXMLWriter().write(whole)).write(to: URL(fileURLWithPath: xmlPath))
            defer { try? FileManager.default.removeItem(atPath: xmlPath) }
            let xmlStream = try BundleEntryStream(path: xmlPath)
            var xmlCount = 0
            while let entry = try xmlStream.next() {
                #expect(entry == entries[xmlCount])
                xmlCount += 1
            }
            #expect(xmlCount == entries.count)
        }
    }
}

@Suite("Synthea bundles (../shared)")
struct SyntheaTests {
    @Test("all 20 Synthea bundles convert JSON → XML → JSON unchanged (trees equal; JSON equal with decimals compared lexically)")
    func jsonXMLJSON() throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("Synthea JSON → XML → JSON") }
        let files = SharedData.files("synthea", suffix: ".json")
        #expect(files.count == 20)
        for file in files {
            let bytes = try Array(Data(contentsOf: file))
            let tree = try FHIRJSONReader().read(bytes).resource
            let xml = FHIRXMLWriter().write(tree)
            let fromXML = try FHIRXMLReader().read(xml).resource
            #expect(fromXML == tree, "\(file.lastPathComponent): \(firstDifference(fromXML, tree))")
            let json = FHIRJSONWriter().write(fromXML)
            #expect(JSONValue.difference(try JSONValue.parse(bytes), try JSONValue.parse(json)) == nil, "\(file.lastPathComponent)")
        }
    }
}
