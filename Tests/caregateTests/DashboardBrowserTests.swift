import CareStore
import FHIR
import Foundation
import JSON
import Testing

/// The dashboard as an operator sees it: `caregate serve` over the demo patient with a week of
/// outcomes, every page opened in headless Chromium (`scripts/browser.py`) at phone and desktop
/// widths.
@Suite("The dashboard in a real browser")
struct DashboardBrowserTests {
    let cli = CommandLineTests()
    static let zone = TimeZone(identifier: "America/New_York")!

    /// The demo patient imported, then every event of the last 7 days done but one in five
    /// (weights and blood pressures with their numbers), and a patient whose name is markup.
    func store(in dir: URL) async throws -> String {
        let path = dir.appendingPathComponent("care.sqlite").path
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", path, "--tz", "America/New_York"])
        try #require(imported.status == 0, "\(imported.stderr)")
        let store = try SQLiteCarePlanStore(path: path)
        let now = Date()
        var outcomes: [CareEntity] = []
        for (i, event) in try store.events(from: now.addingTimeInterval(-7 * 86_400), to: now, tasks: EntityQuery()).enumerated() {
            let title = event.task.title ?? ""
            // Every fifth event left undone, but never the week's one weight: once the EHR's weight
            // (2 November) is past the page's 30 days, it is the weight chart's only point.
            if i % 5 == 4 && !title.contains("Weight") { continue }
            var values: [OutcomeValue] = []
            if title.contains("Weight") {
                values = [OutcomeValue(.double(70 - 0.1 * Double(i)), kind: "weight", units: "kg")]
            } else if title.contains("Blood pressure") {
                values = [OutcomeValue(.integer(130 - i % 7), kind: "systolic", units: "mmHg"), OutcomeValue(.integer(85 - i % 5), kind: "diastolic", units: "mmHg")]
            }
            outcomes.append(.outcome(Outcome(taskUUID: event.task.uuid, taskOccurrenceIndex: event.occurrence, values: values,
                                             effectiveDate: event.scheduleEvent.start, timezone: Self.zone)))
        }
        let stored = try store.add(outcomes).compactMap { entity -> Outcome? in if case .outcome(let o) = entity { o } else { nil } }
        // One outcome the EHR refused for good, one it took; and a device enrolled for Maria.
        try store.enqueue(stored.prefix(2).map { OutboxItem(versionUUID: $0.uuid, entityID: $0.id, idempotencyKey: "urn:caregate:outcome|\($0.id)", payload: []) })
        try store.markAttempt(stored[0].uuid, error: "422 Unprocessable Entity: <issue>Observation.subject is required</issue>", dead: true)
        try store.markPushed(stored[1].uuid, location: "http://ehr.example.org/fhir/Observation/77/_history/1")
        try store.addEnrollment(codeHash: "code", patientID: "Patient/maria-lopez", expires: now.addingTimeInterval(600))
        _ = try store.redeemEnrollment(codeHash: "code", device: Device(id: "d1a2b3c4", patientID: "Patient/maria-lopez", tokenHash: "token", enrolledAt: now), now: now)
        try store.add([.patient(Patient(id: "x1", name: PersonName(givenName: "<script>alert(1)</script>"), timezone: Self.zone))])
        return path
    }

    /// The days of the page's 30 with an event that counts toward adherence.
    func daysWithSomethingDue(store path: String) throws -> Int {
        let (calendar, range) = Self.pageRange()
        let events = try SQLiteCarePlanStore(path: path).events(from: range.start, to: range.end, tasks: EntityQuery())
        return Adherence.daily(events: events, from: range.start, to: range.end, calendar: calendar).filter { $0.adherence.value != nil }.count
    }

    /// The patient page's range: 30 days up to the end of today, in New York.
    static func pageRange() -> (Calendar, DateInterval) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let tomorrow = calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: Date()))!
        return (calendar, DateInterval(start: calendar.date(byAdding: .day, value: -30, to: tomorrow)!, end: tomorrow))
    }

    /// The points a task's chart should have over the page's 30 days: one per day and kind of
    /// numeric value (the demo's imported Observations included).
    func points(of title: String, store path: String) throws -> Int {
        let (calendar, range) = Self.pageRange()
        let events = try SQLiteCarePlanStore(path: path).events(from: range.start, to: range.end, tasks: EntityQuery())
        var points = Set<String>()
        for event in events where event.task.title == title {
            for value in event.outcome?.values ?? [] where value.value.numericValue != nil {
                points.insert("\(value.kind ?? title) \(calendar.startOfDay(for: event.scheduleEvent.start))")
            }
        }
        return points.count
    }

    @Test("every page at 375 and 1280 px: status 200, no console error, no request beyond 127.0.0.1, no script, the charts' bars, points and rings, forms with the CSRF token, PHI shown as text")
    func pages() async throws {
        guard ["/usr/bin/chromium", "/usr/bin/chromium-browser"].contains(where: FileManager.default.isExecutableFile(atPath:)) else {
            print("SKIPPED the dashboard in a real browser: no chromium (apt-get install chromium)")
            return
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-browser-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let storePath = try await store(in: dir)
        let token = dir.appendingPathComponent("admin.token").path
        _ = FileManager.default.createFile(atPath: token, contents: Data("browser-admin-token\n".utf8), attributes: [.posixPermissions: 0o600])
        try "listen:\n  port: 0\nstore: \(storePath)\ndashboard:\n  admin-token-file: admin.token\n"
            .write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let server = try ServedGateway(config: dir.appendingPathComponent("gateway.yaml"), environment: ["TZ": "America/New_York"])
        defer { server.stop() }

        let paths = ["/ui", "/ui/patients/Patient%2Fmaria-lopez", "/ui/outbox", "/ui/imports", "/ui/imports/1", "/ui/devices"]
        // CAREGATE_SCREENSHOTS=folder keeps a PNG of each page and width (docs/operating.md's come from here).
        let screenshots = ProcessInfo.processInfo.environment["CAREGATE_SCREENSHOTS"].map { ["--screenshots", $0] } ?? []
        let run = try await cli.run(["/usr/bin/env", "python3", "scripts/browser.py", "--base", "http://127.0.0.1:\(server.port)", "--token-file", token]
                                    + screenshots + paths)
        try #require(run.status == 0, "\(run.stderr)")
        let report = try #require(try JSONValue.parse(Array(run.stdout.utf8)).arrayValue)
        #expect(report.count == 12)
        for page in report {
            let label = "\(page["path"]?.stringValue ?? "?") at \(page["width"]?.int ?? 0) px"
            #expect(page["status"]?.int == 200, "\(label)")
            #expect(page["errors"]?.arrayValue?.isEmpty == true, "\(label): \(page["errors"]!)")
            let requests = page["requests"]?.arrayValue?.compactMap(\.stringValue) ?? []
            #expect(!requests.isEmpty && requests.allSatisfy { $0.hasPrefix("http://127.0.0.1:\(server.port)/") }, "\(label): \(requests)")
            #expect(page["scripts"]?.int == 0, "\(label)")
            #expect(page["sideways"] == .bool(false), "\(label) scrolls sideways")
            for form in page["forms"]?.arrayValue ?? [] { #expect(form["csrf"] == .bool(true), "\(label): \(form)") }
        }
        // The outbox's Retry and the devices' Revoke are forms carrying the session's token (checked above).
        #expect(report.first { $0["path"]?.stringValue == "/ui/outbox" }?["forms"]?.arrayValue?.contains { $0["action"]?.stringValue == "/ui/outbox/retry" } == true)
        #expect(report.first { $0["path"]?.stringValue == "/ui/outbox" }?["text"]?.stringValue?.contains("María Elena López") == true)  // each item's patient
        #expect(report.first { $0["path"]?.stringValue == "/ui/devices" }?["forms"]?.arrayValue?.contains { $0["action"]?.stringValue == "/ui/devices/revoke" } == true)
        let patients = try #require(report.first { $0["path"]?.stringValue == "/ui" })
        #expect(patients["text"]?.stringValue?.contains("<script>alert(1)</script>") == true)  // shown as text, never run
        // The demo's import is in the log, its loss report one click away.
        #expect(report.first { $0["path"]?.stringValue == "/ui/imports" }?["text"]?.stringValue?.contains("FHIRSamples/bundle/maria-lopez-demo-bundle.json") == true)
        #expect(report.first { $0["path"]?.stringValue == "/ui/imports/1" }?["text"]?.stringValue?.contains("Loss report") == true)
        let patient = try #require(report.first { $0["path"]?.stringValue == "/ui/patients/Patient%2Fmaria-lopez" })
        #expect(patient["rings"]?.int == 7)
        let charts = patient["charts"]?.arrayValue ?? []
        let adherence = try #require(charts.first { $0["title"]?.stringValue == "Adherence" })
        // A bar per day with something due (a 0% day is a bar of no height, a day with nothing due none).
        let due = try daysWithSomethingDue(store: storePath)
        #expect(adherence["bars"]?.int == due && due >= 7, "\(adherence): \(due) expected")
        // A point per day and kind measured (a day's values are averaged): weights; systolic and diastolic on one scale.
        for title in ["Weight check", "Blood pressure"] {
            let chart = try #require(charts.first { $0["title"]?.stringValue == title }, "\(charts)")
            let expected = try points(of: title, store: storePath)
            #expect(chart["points"]?.int == expected && expected > 0, "\(chart): \(expected) expected")
        }
    }
}

extension JSONValue {
    /// A whole number (the browser report's counts and statuses).
    var int: Int? { numberValue.map { Int($0) } }
}

/// `caregate serve` as a child process, on the port it prints.
final class ServedGateway: @unchecked Sendable {
    let process = Process()
    let port: Int

    init(config: URL, environment: [String: String]) throws {
        process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
        process.arguments = ["serve", "--config", config.lastPathComponent]
        process.currentDirectoryURL = config.deletingLastPathComponent()
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        // Standard error goes to a file (a pipe nobody reads would fill with log lines and stall it).
        let log = config.deletingLastPathComponent().appendingPathComponent("serve.log")
        _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        process.standardError = try FileHandle(forWritingTo: log)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var seen = ""
        let deadline = Date().addingTimeInterval(60)
        while !seen.contains("caregate serve: listening on"), process.isRunning, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.05)
            seen = String(decoding: (try? FileBytes.read(log.path)) ?? [], as: UTF8.self)
        }
        let prefix = "caregate serve: listening on http://127.0.0.1:"
        let line = seen.split(separator: "\n").first { $0.hasPrefix(prefix) }
        guard let port = line.flatMap({ Int($0.dropFirst(prefix.count).prefix { $0.isNumber }) }) else {
            process.terminate()
            throw CommandError(description: "caregate serve did not start: \(seen)")
        }
        self.port = port
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }

    struct CommandError: Error, CustomStringConvertible { var description: String }
}
