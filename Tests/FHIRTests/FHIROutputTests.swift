import Foundation
import Testing
@testable import FHIR

@Suite("Output files")
struct FHIROutputTests {
    func folder() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-output-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    @Test("a symlink planted where the old predictable partial name was, or at the target, is never written through")
    func plantedSymlinks() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let victim = dir.appendingPathComponent("victim.txt").path
        try "precious".write(toFile: victim, atomically: true, encoding: .utf8)
        let out = dir.appendingPathComponent("out.json").path
        try FileManager.default.createSymbolicLink(atPath: out + ".partial-\(getpid())", withDestinationPath: victim)
        let output = try FHIROutput(path: out)
        try output.write(Array("{}".utf8))
        try output.close()
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "{}")
        // A symlink at the target itself is replaced by the new file, not followed.
        let linked = dir.appendingPathComponent("linked.json").path
        try FileManager.default.createSymbolicLink(atPath: linked, withDestinationPath: victim)
        let second = try FHIROutput(path: linked)
        try second.write(Array("[]".utf8))
        try second.close()
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious")
        #expect((try FileManager.default.attributesOfItem(atPath: linked)[.type] as? FileAttributeType) == .typeRegular)
        #expect(try String(contentsOfFile: linked, encoding: .utf8) == "[]")
    }

    @Test("outputs are readable by their owner only unless asked; two writers of one path do not collide; a discarded output leaves nothing")
    func permissionsAndNames() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let out = dir.appendingPathComponent("patient.ndjson").path
        let a = try FHIROutput(path: out), b = try FHIROutput(path: out)
        try a.write(Array("a".utf8))
        try b.write(Array("b".utf8))
        try a.close()
        b.discard()
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "a")
        #expect((try FileManager.default.attributesOfItem(atPath: out)[.posixPermissions] as? Int) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path) == ["patient.ndjson"])
        let shared = try FHIROutput(path: dir.appendingPathComponent("shared.json").path, permissions: 0o644)
        try shared.close()
        #expect((try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent("shared.json").path)[.posixPermissions] as? Int) == 0o644)
    }
}

@Suite("XML nested deeply")
struct XMLDepthTests {
    func patient(_ inner: String) -> String {
        #"<Patient xmlns="http://hl7.org/fhir"><id value="p1"/>"# + inner + #"<active value="true"/><gender value="female"/></Patient>"#
    }
    let deepUnknown = String(repeating: "<x>", count: 300) + String(repeating: "</x>", count: 300)
    let deepNarrative = #"<text><status value="generated"/><div xmlns="http://www.w3.org/1999/xhtml">"# + String(repeating: "<span>", count: 300)
        + "deep" + String(repeating: "</span>", count: 300) + "</div></text>"

    @Test("an unknown element or a narrative nested 300 deep is kept whole within the depth limit, and nothing after it is lost")
    func keptWhole() throws {
        let unknown = try FHIRXMLReader(options: ParseOptions(maximumDepth: 1000)).read(patient(deepUnknown)).resource
        #expect(unknown.children.last?.value == "<x xmlns=\"http://hl7.org/fhir\">" + String(repeating: "<x>", count: 298) + "<x/>" + String(repeating: "</x>", count: 299))
        let narrative = try FHIRXMLReader(options: ParseOptions(maximumDepth: 1000)).read(patient(deepNarrative)).resource
        #expect(narrative["text"]?.string("div") == #"<div xmlns="http://www.w3.org/1999/xhtml">"# + String(repeating: "<span>", count: 300)
                + "deep" + String(repeating: "</span>", count: 300) + "</div>")
        for resource in [unknown, narrative] {
            #expect(resource.string("active") == "true" && resource.string("gender") == "female")
        }
    }

    @Test("nesting past the depth limit, inside a kept subtree too, is an error with its line")
    func pastTheLimit() throws {
        for inner in [deepUnknown, deepNarrative] {
            let error = #expect(throws: FHIRFormatError.self) { try FHIRXMLReader(options: ParseOptions(maximumDepth: 200)).read(patient(inner)) }
            #expect(error?.issues.first?.message == "nesting deeper than the limit of 200")
            #expect(error?.issues.first?.location.line == 1)
        }
        let shallow = try FHIRXMLReader().read(patient("<x><y/></x>")).resource
        #expect(shallow.string("active") == "true" && shallow.string("gender") == "female")
    }
}

@Suite("XML columns on long lines")
struct XMLColumnTests {
    @Test("issues on one minified line get the columns of their own elements, counted on from the last (not searched from the line's start each time)")
    func manyIssuesOnOneLine() throws {
        let unknown = (0..<20_000).map { "<x\($0) value=\"1\"/>" }.joined()
        let xml = #"<Patient xmlns="http://hl7.org/fhir"><id value="p"/><gender value="nope"/><active value="maybe"/>\#(unknown)</Patient>"#
        let read = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(xml)
        // <gender starts at column 53, its value attribute at 61; <active at 75, its value at 83.
        let gender = try #require(read.warnings.first { $0.location.path.hasSuffix("gender") })
        #expect(gender.location.column == 61, "\(gender)")
        let active = try #require(read.warnings.first { $0.location.path.hasSuffix("active") && $0.message.contains("maybe") })
        #expect(active.location.column == 83, "\(active)")
        #expect(read.warnings.count >= 20_000)
        let last = try #require(read.warnings.last)
        #expect(last.location.column == xml.count - #"<x19999 value="1"/></Patient>"#.count + 1, "\(last)")
    }

    @Test("several issues on each of many same-named elements on one line: each gets its own element's column")
    func repeatedElementsOnOneLine() throws {
        let actives = (0..<20_000).map { #"<active value="maybe" a\#($0)="x"/>"# }.joined()
        let xml = #"<Patient xmlns="http://hl7.org/fhir"><id value="p"/>\#(actives)</Patient>"#
        let read = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(xml)
        let twice = read.warnings.filter { $0.message.contains("appears twice") }
        #expect(twice.count == 19_999)
        // <active> number k (from 0) starts at column 53 + 30k (+1 per digit of k past the first).
        func start(_ k: Int) -> Int { 53 + (0..<k).reduce(0) { $0 + 29 + String($1).count } }
        #expect(twice.first?.location.column == start(1) && twice.last?.location.column == start(19_999), "\(twice.first!) \(twice.last!)")
        let unknown = try #require(read.warnings.last { $0.message.contains("a19999") })
        #expect(unknown.location.column == start(19_999) + #"<active value="maybe" "#.count)
    }
}
