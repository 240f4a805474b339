import Foundation
import Testing
@testable import FHIR

/// The official R4 XML examples in ../shared read to the same trees as their JSON twins, and
/// the XML CareGate writes is valid against the R4 schemas.
@Suite("XML conformance (../shared R4 examples)")
struct XMLConformanceTests {
    static func key(_ resource: Element) -> String {
        "\(resource.resourceType ?? "?")/\(resource.string("id") ?? "?")"
    }

    /// The XML distribution of the examples tags every resource with `meta.security` HTEST
    /// (v3-ActReason "test health data"), which the JSON distribution lacks; remove just that tag.
    static func withoutTestTag(_ element: Element) -> Element {
        var copy = element
        copy.children = element.children.compactMap { child in
            if child.name == "meta" && child.typeName == "Meta" {
                var meta = child
                meta.children.removeAll { $0.name == "security" && $0.string("code") == "HTEST" }
                return meta.children.isEmpty ? nil : meta
            }
            return withoutTestTag(child)
        }
        return copy
    }

    /// Values that differ between the two distributions of the examples (checked by hand against
    /// the files): the XML value, and the JSON example's value for the same element.
    static let knownSourceDifferences: [String: [String: String]] = [
        "document-example-dischargesummary.xml": ["image/jpeg": "image/jpg"],
        "medicationrequest0301.xml": ["Organization/f001": "Practitioner/f001"],
        "observation-decimal.xml": [
            "1.0e0": "1.0", "0.0000000000000000000001": "1E-22",
            "1.000000000000000000e-245": "1.000000000000000000E-245", "-1.000000000000000000e245": "-1.000000000000000000E+245",
        ],
        "observation-example-clinical-gender.xml": ["Organization/example": "Encounter/example"],
    ]

    /// XML examples whose JSON twin holds different resources; they get the XML round trip only.
    /// The cypress template's entry 71 is a Patient in XML and an Endpoint in JSON.
    static let notComparableWithJSON: Set<String> = ["patient-examples-cypress-template.xml"]

    static func replacingValues(_ element: Element, _ replacements: [String: String]) -> Element {
        var copy = element
        if let value = copy.value, let replacement = replacements[value] { copy.value = replacement }
        copy.children = copy.children.map { replacingValues($0, replacements) }
        return copy
    }

    @Test("all R4 XML examples: same tree as the JSON example (without narrative), and XML round trip")
    func xmlMatchesJSON() throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("XML examples vs JSON") }
        var jsonByKey: [String: Element] = [:]
        for file in SharedData.files("fhir-r4/examples/json", suffix: ".json") {
            let resource = try FHIRJSONReader().read(contentsOf: file.path).resource
            jsonByKey[Self.key(resource)] = Self.withoutTestTag(resource.removingNarrative())
        }
        let files = SharedData.files("fhir-r4/examples/xml", suffix: ".xml")
        #expect(files.count == 226)
        var failures: [String] = []
        var compared = 0
        for file in files {
            do {
                let parsed = try FHIRXMLReader().read(contentsOf: file.path).resource
                guard let json = jsonByKey[Self.key(parsed)] else {
                    failures.append("\(file.lastPathComponent): no JSON example \(Self.key(parsed))")
                    continue
                }
                let fromXML = Self.replacingValues(Self.withoutTestTag(parsed.removingNarrative()),
                                                   Self.knownSourceDifferences[file.lastPathComponent] ?? [:])
                if fromXML != json && !Self.notComparableWithJSON.contains(file.lastPathComponent) {
                    failures.append("\(file.lastPathComponent): differs from JSON: \(firstDifference(fromXML, json))")
                    continue
                }
                if !Self.notComparableWithJSON.contains(file.lastPathComponent) { compared += 1 }
                let written = FHIRXMLWriter().write(parsed)
                let reparsed = try FHIRXMLReader().read(written).resource
                if reparsed != parsed {
                    failures.append("\(file.lastPathComponent): XML round trip differs: \(firstDifference(reparsed, parsed))")
                }
            } catch {
                failures.append("\(file.lastPathComponent): \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(files.count) failed:\n\(failures.joined(separator: "\n"))")
        #expect(compared == 226 - Self.notComparableWithJSON.count)
    }

    @Test("XML written from every example validates against fhir-single.xsd")
    func writtenXMLValidatesAgainstSchema() throws {
        guard let shared = SharedData.root else { return SharedData.skipNotice("XSD validation") }
        guard let xmllint = ExternalTool.find("xmllint") else {
            Issue.record("xmllint is not installed (Debian package libxml2-utils); the test command installs it")
            return
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-xsd-\(getpid())")
        try? FileManager.default.removeItem(at: dir)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        var paths: [String] = []
        for file in SharedData.files("fhir-r4/examples/json", suffix: ".json") {
            let resource = try FHIRJSONReader().read(contentsOf: file.path).resource
            let out = dir.appendingPathComponent(file.deletingPathExtension().lastPathComponent + ".xml")
            try Data(FHIRXMLWriter().write(resource)).write(to: out)
            paths.append(out.path)
        }
        let schema = shared.appendingPathComponent("fhir-r4/xsd/fhir-single.xsd").path
        let result = try ExternalTool.run(xmllint, ["--noout", "--schema", schema] + paths)
        let invalid = result.stderr.split(separator: "\n").filter { !$0.hasSuffix(" validates") }
        #expect(result.status == 0 && invalid.isEmpty, "xmllint rejected:\n\(invalid.prefix(40).joined(separator: "\n"))")
        let validated = result.stderr.split(separator: "\n").filter { $0.hasSuffix(" validates") }.count
        #expect(validated == 226)
    }
}

/// The first place two trees differ, for failure messages.
func firstDifference(_ a: Element, _ b: Element, path: String = "") -> String {
    let here = path.isEmpty ? a.name : path + "." + a.name
    if a.name != b.name { return "\(here): name \(a.name) vs \(b.name)" }
    if a.typeIndex != b.typeIndex { return "\(here): type \(a.typeName ?? "?") vs \(b.typeName ?? "?")" }
    if a.value != b.value { return "\(here): value \(a.value ?? "nil") vs \(b.value ?? "nil")" }
    for (x, y) in zip(a.children, b.children) where x != y {
        return firstDifference(x, y, path: here)
    }
    if a.children.count != b.children.count {
        let extra = a.children.count > b.children.count ? a.children[b.children.count] : b.children[a.children.count]
        return "\(here): \(a.children.count) children vs \(b.children.count) (first extra: \(extra.name))"
    }
    return "\(here): equal"
}

/// Runs command-line tools the tests compare against (xmllint).
enum ExternalTool {
    static func find(_ name: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    static func run(_ executable: String, _ arguments: [String], input: Data? = nil) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let inPipe = Pipe()
        process.standardInput = input == nil ? FileHandle.nullDevice : inPipe
        try process.run()
        if let input { inPipe.fileHandleForWriting.write(input); try? inPipe.fileHandleForWriting.close() }
        // Drain both pipes concurrently so neither fills up.
        nonisolated(unsafe) var errData = Data()
        let group = DispatchGroup()
        group.enter()
        DispatchQueue.global().async { errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave() }
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        group.wait()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
    }
}
