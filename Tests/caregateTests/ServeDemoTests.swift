import FHIR
import Foundation
import JSON
import Testing

/// `scripts/serve-demo.sh`, as the README has a newcomer run it: the gateway up with a device's
/// week of outcomes, the README's curl call as that device, and the dashboard in headless Chromium.
@Suite("The gateway demo")
struct ServeDemoTests {
    let cli = CommandLineTests()

    /// The script running with the built binary, on a free port, until `stop()`.
    final class Demo: @unchecked Sendable {
        let process = Process()
        let out: URL
        let printed: URL
        var address = ""
        var signIn = ""

        init() throws {
            out = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-serve-demo-\(UUID().uuidString)")
            printed = URL(fileURLWithPath: out.path + ".out")
            // Foundation starts the script as a process group of its own, as a terminal's shell
            // does: Ctrl-C signals the whole group.
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["scripts/serve-demo.sh"]
            process.currentDirectoryURL = CommandLineTests.projectRoot
            process.environment = ProcessInfo.processInfo.environment.merging(
                ["CAREGATE": CommandLineTests.binary, "SERVE_DEMO_OUT": out.path, "SERVE_DEMO_PORT": "0"]) { $1 }
            _ = FileManager.default.createFile(atPath: printed.path, contents: nil)
            process.standardOutput = try FileHandle(forWritingTo: printed)
            process.standardError = process.standardOutput
            try process.run()
        }

        /// Waits for the script's last lines: the dashboard's address and the sign-in token.
        func started() throws -> Bool {
            let deadline = Date().addingTimeInterval(120)
            while Date() < deadline, process.isRunning {
                let text = text()
                if let dashboard = line(text, "dashboard: "), let token = line(text, "sign in with: "), text.contains("Ctrl-C stops") {
                    address = String(dashboard.dropLast("/ui".count))
                    signIn = token
                    return true
                }
                Thread.sleep(forTimeInterval: 0.1)
            }
            return false
        }

        func text() -> String { String(decoding: (try? FileBytes.read(printed.path)) ?? [], as: UTF8.self) }

        func line(_ text: String, _ prefix: String) -> String? {
            text.split(separator: "\n").first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
        }

        func stop() {
            if process.isRunning { kill(-process.processIdentifier, SIGTERM) }
            process.waitUntilExit()
            try? FileManager.default.removeItem(at: out)
            try? FileManager.default.removeItem(at: printed)
        }
    }

    @Test("serve-demo.sh imports, enrolls, records a week through the sync API and serves it; the README's curl call pulls as the device; the dashboard shows the week in Chromium; Ctrl-C stops the gateway")
    func demo() async throws {
        let demo = try Demo()
        defer { demo.stop() }
        try #require(try demo.started(), "the demo did not start:\n\(demo.text())")
        let printed = demo.text()
        #expect(printed.contains("1 file, 15 resources, 1 patient: 15 created"))
        let recorded = try #require(printed.split(separator: "\n").first { $0.hasPrefix("recorded ") }, "\(printed)")
        let merged = recorded.split(separator: " ").last.flatMap { Int($0) } ?? 0
        #expect(merged >= 30 && recorded.hasPrefix("recorded \(merged) outcomes over 7 days"), "\(recorded)")
        // The tokens are owner-only.
        for file in ["device.token", "secrets/admin.token"] {
            let mode = try FileManager.default.attributesOfItem(atPath: demo.out.appendingPathComponent(file).path)[.posixPermissions] as? Int
            #expect(mode == 0o600, "\(file)")
        }
        try await readmeCurl(demo)
        try await dashboard(demo, merged: merged)
        // Ctrl-C (SIGINT to the script's process group, as a terminal sends it) stops the gateway it started.
        kill(-demo.process.processIdentifier, SIGINT)
        demo.process.waitUntilExit()
        #expect(demo.process.terminationStatus == 0)
        let health = try await cli.run(["/usr/bin/env", "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", demo.address + "/healthz"])
        #expect(health.stdout == "000", "the gateway still answers after Ctrl-C")
    }

    /// The README's "be the app" block, pointed at the demo's folder and port.
    func readmeCurl(_ demo: Demo) async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else { print("SKIPPED the README's curl call: no curl command"); return }
        let readme = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let block = try #require(readme.components(separatedBy: "```sh\n").first { $0.hasPrefix("cd out/serve-demo") }?.components(separatedBy: "```").first)
        let script = block.replacingOccurrences(of: "cd out/serve-demo", with: "cd \(demo.out.path)")
            .replacingOccurrences(of: "http://127.0.0.1:8080", with: demo.address)
        let run = try await cli.run(["/bin/bash", "-euo", "pipefail", "-c", script])
        #expect(run.stdout.hasPrefix("{\"revisions\":[{\"entities\":[") && run.stdout.contains("\"type\":\"patient\""), "\(run.stdout) \(run.stderr)")
    }

    /// The dashboard's patient and devices pages in a real browser, signed in with the printed token.
    func dashboard(_ demo: Demo, merged: Int) async throws {
        guard ["/usr/bin/chromium", "/usr/bin/chromium-browser"].contains(where: FileManager.default.isExecutableFile(atPath:)) else {
            print("SKIPPED the demo's dashboard in a real browser: no chromium (apt-get install chromium)")
            return
        }
        #expect(try String(contentsOf: demo.out.appendingPathComponent("secrets/admin.token"), encoding: .utf8).hasPrefix(demo.signIn))
        let run = try await cli.run(["/usr/bin/env", "python3", "scripts/browser.py", "--base", demo.address,
                                     "--token-file", demo.out.appendingPathComponent("secrets/admin.token").path,
                                     "/ui/patients/Patient%2Fmaria-lopez", "/ui/devices"])
        try #require(run.status == 0, "\(run.stderr)")
        let report = try #require(try JSONValue.parse(Array(run.stdout.utf8)).arrayValue)
        for page in report {
            #expect(page["status"]?.int == 200 && page["errors"]?.arrayValue?.isEmpty == true, "\(page["path"]!): \(page["errors"]!)")
        }
        let patient = try #require(report.first { $0["path"]?.stringValue == "/ui/patients/Patient%2Fmaria-lopez" })
        #expect(patient["rings"]?.int == 7)
        let charts = patient["charts"]?.arrayValue ?? []
        // The week the device recorded: blood pressures twice a day (a point a day and kind), the
        // weekly weight beside the EHR's while that (2026-11-02) is within the page's 30 days,
        // adherence by day.
        let ehrWeight = ISO8601DateFormatter().date(from: "2026-11-02T07:34:00-05:00")!
        let ehrWeightShown = Date().timeIntervalSince(ehrWeight) < 30 * 86_400
        for (title, least) in [("Weight check", ehrWeightShown ? 2 : 1), ("Blood pressure", 14)] {
            let chart = try #require(charts.first { $0["title"]?.stringValue == title }, "\(charts)")
            #expect((chart["points"]?.int ?? 0) >= least, "\(chart)")
        }
        #expect((charts.first { $0["title"]?.stringValue == "Adherence" }?["bars"]?.int ?? 0) >= 7)
        let devices = try #require(report.first { $0["path"]?.stringValue == "/ui/devices" })
        #expect(devices["text"]?.stringValue?.contains("María Elena López") == true || devices["text"]?.stringValue?.contains("Patient/maria-lopez") == true)
        #expect(merged > 0)
    }
}
