import Foundation
import Testing
@testable import FHIR

/// The official R4 examples in ../shared round-trip through the JSON reader and writer.
@Suite("JSON conformance (../shared R4 examples)")
struct JSONConformanceTests {
    @Test("all R4 JSON examples: parse, write, parse again gives the same tree and the same JSON")
    func roundTripExamples() throws {
        guard SharedData.isAvailable else { return SharedData.skipNotice("JSON examples round trip") }
        let files = SharedData.files("fhir-r4/examples/json", suffix: ".json")
        #expect(files.count == 226)
        var failures: [String] = []
        for file in files {
            let bytes = try Array(Data(contentsOf: file))
            do {
                let parsed = try FHIRJSONReader(options: ParseOptions(sourceName: file.lastPathComponent)).read(bytes)
                let written = FHIRJSONWriter().write(parsed.resource)
                let reparsed = try FHIRJSONReader().read(written)
                if reparsed.resource != parsed.resource {
                    failures.append("\(file.lastPathComponent): tree differs after round trip")
                    continue
                }
                if let difference = JSONValue.difference(try JSONValue.parse(bytes), try JSONValue.parse(written)) {
                    failures.append("\(file.lastPathComponent): \(difference)")
                }
            } catch {
                failures.append("\(file.lastPathComponent): \(error)")
            }
        }
        #expect(failures.isEmpty, "\(failures.count) of \(files.count) failed:\n\(failures.joined(separator: "\n"))")
    }
}
