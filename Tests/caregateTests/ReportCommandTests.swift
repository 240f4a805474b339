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

    @Test("--format pdf renders the same report through WeasyPrint, owner-only; without WeasyPrint it says how to get it and writes nothing")
    func pdf() async throws {
        let store = cli.temporaryPath("report-pdf.sqlite")
        let output = cli.temporaryPath("report.pdf")
        defer { for path in [store, output] { try? FileManager.default.removeItem(atPath: path) } }
        #expect(try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"]).status == 0)
        let arguments = ["report", "--store", store, "--patient", "Patient/maria-lopez", "--from", "2026-10-20", "--to", "2026-11-23",
                         "--tz", "America/New_York", "--format", "pdf", "-o", output]
        let missing = try await cli.caregate(arguments, environment: ["PATH": "/nonexistent"])
        #expect(missing.status == 1 && missing.stderr.contains("--format pdf needs WeasyPrint (Debian: apt-get install weasyprint)"), "\(missing.stderr)")
        #expect(!FileManager.default.fileExists(atPath: output))
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/weasyprint") else {
            print("SKIPPED caregate report --format pdf: no weasyprint (apt-get install weasyprint)")
            return
        }
        let written = try await cli.caregate(arguments)
        #expect(written.status == 0, "\(written.stderr)")
        let pdf = try FileBytes.read(output)
        #expect(pdf.starts(with: Array("%PDF-".utf8)) && pdf.count > 10_000)
        #expect(String(decoding: pdf.suffix(32), as: UTF8.self).contains("%%EOF"))
        #expect((try FileManager.default.attributesOfItem(atPath: output)[.posixPermissions] as? Int) == 0o600)
    }
}
