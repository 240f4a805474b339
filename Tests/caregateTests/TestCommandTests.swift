import Foundation
import Testing

@Suite("caregate test")
struct TestCommandTests {
    let cli = CommandLineTests()

    @Test("the shipped mappings' golden tests pass; a changed expectation fails with the differing lines")
    func goldenTests() async throws {
        let run = try await cli.caregate(["test", "Mappings"])
        #expect(run.status == 0, "\(run.stdout)")
        #expect(run.stdout.hasSuffix("6 golden tests: 6 passed, 0 failed\n"))
        // A copy of the mappings whose expected snapshot says another title.
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-golden-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: copy, withIntermediateDirectories: true)
        for item in ["Mappings", "FHIRSamples"] {
            try FileManager.default.copyItem(at: CommandLineTests.projectRoot.appendingPathComponent(item), to: copy.appendingPathComponent(item))
        }
        let expected = copy.appendingPathComponent("Mappings/tests/hba1c-standalone.expected.json")
        let text = try String(contentsOf: expected, encoding: .utf8).replacingOccurrences(of: "HbA1c blood test", with: "HbA1c test")
        try text.write(to: expected, atomically: true, encoding: .utf8)
        let root = ["--mapping-root", copy.path]
        let failing = try await cli.caregate(["test", copy.appendingPathComponent("Mappings").path] + root)
        #expect(failing.status == 1)
        #expect(failing.stdout.contains("FAIL"))
        let lines = failing.stdout.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("  - ") && $0.hasSuffix("\"title\": \"HbA1c test\"") })
        #expect(lines.contains { $0.hasPrefix("  + ") && $0.hasSuffix("\"title\": \"HbA1c blood test\"") })
        #expect(failing.stdout.hasSuffix("6 golden tests: 5 passed, 1 failed\n"))
        let update = try await cli.caregate(["test", copy.appendingPathComponent("Mappings").path, "--update"] + root)
        #expect(update.status == 0)
        #expect(try await cli.caregate(["test", copy.appendingPathComponent("Mappings").path] + root).status == 0)
    }
}
