import FHIR
import Foundation
import Testing

@Suite("caregate report")
struct ReportCommandTests {
    let cli = CommandLineTests()

    @Test("writes the demo patient's report as one owner-only HTML file; an unknown patient or a backwards range writes nothing")
    func report() async throws {
        let store = cli.temporaryPath("report.sqlite")
        let output = cli.temporaryPath("report.html")
        defer { for path in [store, output] { try? FileManager.default.removeItem(atPath: path) } }
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let written = try await cli.caregate(["report", "--store", store, "--patient", "Patient/maria-lopez", "--from", "2026-11-16", "--to", "2026-11-23",
                                              "--tz", "America/New_York", "-o", output])
        #expect(written.status == 0, "\(written.stderr)")
        #expect(written.stderr.contains("over 7 days to \(output)"))
        let html = String(decoding: try FileBytes.read(output), as: UTF8.self)
        #expect(html.hasPrefix("<!doctype html>"))
        #expect(html.contains("Nov 16, 2026 to Nov 22, 2026"))
        #expect(html.contains(#"id="adherence-title""#))
        #expect((try FileManager.default.attributesOfItem(atPath: output)[.posixPermissions] as? Int) == 0o600)
        try FileManager.default.removeItem(atPath: output)
        let unknown = try await cli.caregate(["report", "--store", store, "--patient", "nobody", "--from", "2026-11-16", "--to", "2026-11-23", "-o", output])
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("no patient nobody in the store; no report was written"))
        let backwards = try await cli.caregate(["report", "--store", store, "--patient", "Patient/maria-lopez", "--from", "2026-11-23", "--to", "2026-11-16", "-o", output])
        #expect(backwards.status != 0)
        #expect(backwards.stderr.contains("--from must be before --to"))
        #expect(!FileManager.default.fileExists(atPath: output))
    }
}
