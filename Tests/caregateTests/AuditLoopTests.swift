import CareStore
import FHIRClient
import Foundation
import JSON
import Testing

/// The whole loop as an auditor reads it: `caregate serve` over SQLite with sekmet-fhir as the
/// EHR and the dashboard on, driven by a device over HTTP, an operator's browser session and the
/// commands on the host.
@Suite("The whole loop in the audit trail", .serialized)
struct AuditLoopTests {
    let cli = CommandLineTests()
    static let maria = "Patient/maria-lopez"

    @Test("import, enrollment code, enroll, pull, push, the EHR push, a dashboard view and a report leave that trail, in order, each naming Maria; the chain verifies")
    func wholeLoop() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        _ = try await seededWithSamples(ehr)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-audit-loop-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("care.sqlite").path
        #expect(try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"]).status == 0)
        FileManager.default.createFile(atPath: dir.appendingPathComponent("admin.token").path, contents: Data("loop-admin-token-31-0123".utf8), attributes: [.posixPermissions: 0o600])
        try ServeProcess.writeConfig(in: dir, ehr: ehr.base, more: "dashboard:\n  admin-token-file: admin.token\n")
        let serve = try ServeProcess(directory: dir)
        defer { serve.kill() }

        // The device: a code on the host, enrolled, a pull, a push of two walks.
        let code = try await cli.caregate(["enroll", "--patient", Self.maria, "--store", store]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        let enrolled = try await serve.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
        let loop = ThreeInstanceLoopTests()
        var device = ThreeInstanceLoopTests.Device(token: try #require(enrolled.body?["token"]?.stringValue, "\(enrolled)"))
        try await loop.pull(&device, through: serve)
        #expect(try await loop.push(&device, try loop.pushBody(&device, first: 1, count: 2), through: serve))
        #expect(try await eventually(20) { try SQLiteCarePlanStore(path: store).outboxCounts().pushed == 2 }, "the worker did not push")

        // The operator signs in and opens Maria's page; then a report on the host.
        let base = "http://127.0.0.1:\(serve.port)"
        let login = try await CurlTransport().send(HTTPRequest(method: "POST", url: "\(base)/ui/login", headers: [("Content-Type", "application/x-www-form-urlencoded")],
                                                               body: Array("token=loop-admin-token-31-0123".utf8), timeout: 10))
        let cookie = try #require(login.headers["set-cookie"], "\(login.status)").prefix { $0 != ";" }
        let page = try await CurlTransport().send(HTTPRequest(method: "GET", url: "\(base)/ui/patients/Patient%2Fmaria-lopez", headers: [("Cookie", String(cookie))], timeout: 10))
        #expect(page.status == 200)
        // The server writes what it noted every quarter second: the view is kept before the report is run.
        #expect(try await eventually(5) { try SQLiteCarePlanStore(path: store).auditEntries(AuditQuery(patientID: Self.maria)).contains { $0.entry.event == "dashboard.patient" } })
        let report = try await cli.caregate(["report", "--store", store, "--patient", Self.maria, "--from", "2026-11-16", "--to", "2026-11-23",
                                             "-o", dir.appendingPathComponent("report.html").path])
        #expect(report.status == 0, "\(report.stderr)")
        serve.process.terminate()  // graceful: the last entries are written as it stops
        serve.process.waitUntilExit()

        let trail = try SQLiteCarePlanStore(path: store).auditEntries(AuditQuery()).map(\.entry)
        let steps = trail.map { "\($0.actor.kind) \($0.event) \($0.outcome)" }
        let expected = ["command command.import success", "command command.enroll success", "device carekit.enroll success", "device carekit.pull success",
                        "device carekit.push success", "worker ehr.push success", "operator dashboard.patient success", "command command.report success"]
        var rest = expected[...]
        for step in steps where step == rest.first { rest = rest.dropFirst() }
        #expect(rest.isEmpty, "missing from \(rest.first ?? "") on: \(steps)")
        #expect(trail.allSatisfy { $0.patientID == Self.maria }, "\(trail.map { "\($0.event) \($0.patientID ?? "-")" })")
        #expect(trail.first { $0.event == "carekit.push" }?.entities.count == 2 && trail.first { $0.event == "ehr.push" }?.entities.count == 2)
        let verify = try await cli.caregate(["audit", "verify", "--store", store])
        #expect(verify.status == 0, "\(verify.stdout) \(verify.stderr)")
    }
}
