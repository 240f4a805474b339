import Foundation
import Testing

@Suite("caregate export")
struct ExportCommandTests {
    let cli = CommandLineTests()

    @Test("exports app outcomes as NDJSON, a transaction Bundle (JSON or XML) or one file per Observation; imported results are not sent back")
    func export() throws {
        let store = cli.temporaryPath("export.sqlite")
        _ = try cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        // Only imported outcomes so far: nothing to export unless asked.
        let none = try cli.caregate(["export", "--store", store])
        #expect(none.status == 0 && none.stdout.isEmpty)
        #expect(none.stderr.contains("exported 0 Observations"))
        let imported = try cli.caregate(["export", "--store", store, "--include-imported", "--tz", "America/New_York"])
        let lines = imported.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{\"resourceType\":\"Observation\"") })
        let bundlePath = cli.temporaryPath("push.xml")
        let bundle = try cli.caregate(["export", "--store", store, "--include-imported", "--format", "bundle", "-o", bundlePath])
        #expect(bundle.status == 0)
        #expect(try String(contentsOfFile: bundlePath, encoding: .utf8).contains("<type value=\"transaction\"/>"))
        let directory = cli.temporaryPath("observations")
        #expect(try cli.caregate(["export", "--store", store, "--include-imported", "--format", "json", "-o", directory]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == 2)
    }
}
