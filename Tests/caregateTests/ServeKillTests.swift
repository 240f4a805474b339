import CareStore
import FHIRClient
import Foundation
import JSON
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `caregate serve` as a child process in `directory`, with the port it printed.
final class ServeProcess {
    let process = Process()
    let errors = Pipe()
    let port: Int

    init(directory: URL, config: String = "gateway.yaml", environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
        process.arguments = ["serve", "--config", config]
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.currentDirectoryURL = directory
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var seen = ""
        let prefix = "caregate serve: listening on http://127.0.0.1:"
        while !(seen.contains(prefix) && seen.hasSuffix("\n")) {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let line = try #require(seen.split(separator: "\n").first { $0.hasPrefix(prefix) }, "\(seen)")
        port = try #require(Int(line.dropFirst(prefix.count).prefix { $0.isNumber }))
    }

    func send(_ method: String, _ path: String, token: String? = nil, json: String? = nil) async throws -> (status: Int, body: JSONValue?) {
        var headers: [(String, String)] = [("Content-Type", "application/json")]
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        let answer = try await CurlTransport().send(HTTPRequest(method: method, url: "http://127.0.0.1:\(port)\(path)", headers: headers,
                                                                body: json.map { Array($0.utf8) }, timeout: 10))
        return (answer.status, try? JSONValue.parse(answer.body))
    }

    /// A GET with its `Link` header (a paged pull's next page).
    func sendWithHeaders(_ method: String, _ path: String, token: String) async throws -> (status: Int, body: JSONValue?, link: String?) {
        let answer = try await CurlTransport().send(HTTPRequest(method: method, url: "http://127.0.0.1:\(port)\(path)",
                                                                headers: [("Authorization", "Bearer \(token)")], timeout: 10))
        let link = answer.headers.first { $0.key.lowercased() == "link" }?.value
        return (answer.status, try? JSONValue.parse(answer.body), link)
    }

    /// `gateway.yaml` in `directory` for a serve test: loopback on any free port, `care.sqlite`,
    /// the EHR at `base` in New York time, pushed every second and refreshed hourly; `ehrLines`
    /// go into `ehr:`, `more` (whole sections) after it.
    static func writeConfig(in directory: URL, ehr base: String, ehrLines: [String] = [], more: String = "") throws {
        let ehr = (["base: \(base)", "time-zone: America/New_York", "push-seconds: 1", "refresh-seconds: 3600"] + ehrLines)
            .map { "  " + $0 }.joined(separator: "\n")
        try "listen:\n  port: 0\nstore: care.sqlite\nehr:\n\(ehr)\n\(more)"
            .write(to: directory.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
    }

    func kill() {
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    deinit {
        if process.isRunning { kill() }
    }
}

@Suite("caregate serve killed")
struct ServeKillTests {
    let cli = CommandLineTests()

    @Test("SIGKILL at points spread over a device's push of 300 outcomes: after a restart each push is there whole or not at all, and what was stored before stays")
    func killDuringPush() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "listen:\n  port: 0\nstore: care.sqlite\n".write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let store = dir.appendingPathComponent("care.sqlite").path
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        let code = try await cli.caregate(["enroll", "--patient", "Patient/maria-lopez", "--store", store]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        var server = try ServeProcess(directory: dir)
        let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
        let pulled = try await server.send("GET", "/carekit/v1/revisions", token: token).body
        let vector = try KnowledgeVector(json: try #require(pulled?["knowledgeVector"]))
        let tasks = try (pulled?["revisions"]?.arrayValue ?? []).flatMap { try RevisionRecord(json: $0).entities }
            .compactMap { if case .task(let task) = $0 { task } else { nil } }
        let task = try #require(tasks.first { $0.id.hasSuffix("/229065009") } ?? tasks.first)
        let process = UUID()
        var stored = try SQLiteCarePlanStore(path: store).fetchOutcomes().count  // the import's own
        // The same push left to finish is stored whole; its time spreads the kills below over it.
        let control = (0..<300).map { n in Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 9_000 + n, values: [OutcomeValue(.integer(n))], effectiveDate: Date()) }
        let controlVector = vector.setting(process, to: 1)
        let controlRecord = RevisionRecord(entities: control.map { .outcome($0) }, knowledgeVector: controlVector.processes)
        let started = Date()
        let answer = try await server.send("POST", "/carekit/v1/revisions", token: token,
                                           json: #"{"revisions": [\#(String(decoding: controlRecord.bytes(), as: UTF8.self))], "knowledgeVector": \#(controlVector.json)}"#)
        let merge = Date().timeIntervalSince(started)
        #expect(answer.status == 200 && answer.body?["merged"]?.numberValue == 300, "\(String(describing: answer.body))")
        #expect(try SQLiteCarePlanStore(path: store).fetchOutcomes().count == stored + 300)
        stored += 300
        var whole = 0, none = 0
        for (round, fraction) in [0.2, 0.5, 0.8, 1.0, 1.3, 1.6, 2.0, 3.0, 5.0, 8.0].enumerated() {
            let delay = Int(merge * fraction * 1_000)
            let outcomes = (0..<300).map { n in
                Outcome(taskUUID: task.uuid, taskOccurrenceIndex: round * 300 + n, values: [OutcomeValue(.integer(n))], effectiveDate: Date())
            }
            let sent = vector.setting(process, to: round + 2)
            let record = RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: sent.processes)
            let body = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(sent.json)}"#
            let url = "http://127.0.0.1:\(server.port)/carekit/v1/revisions"
            let push = Task {
                _ = try? await CurlTransport().send(HTTPRequest(method: "POST", url: url, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(token)")],
                                                                body: Array(body.utf8), timeout: 10))
            }
            try await Task.sleep(nanoseconds: UInt64(delay) * 1_000_000)
            server.kill()
            _ = await push.value
            let count = try SQLiteCarePlanStore(path: store).fetchOutcomes().count
            #expect(count == stored || count == stored + 300, "round \(round): \(count - stored) of 300 outcomes stored")
            if count == stored { none += 1 } else { whole += 1 }
            stored = count
            server = try ServeProcess(directory: dir)
            _ = try await server.send("GET", "/carekit/v1/revisions?limit=1", token: token)  // warm, as for the timed push
        }
        print("caregate serve killed during 10 pushes (a whole one took \(Int(merge * 1_000)) ms): \(whole) stored whole, \(none) not at all")
        server.kill()
    }
}

@Suite("The serving guide's curl calls")
struct ReadmeCurlTests {
    let cli = CommandLineTests()

    @Test("docs/serving.md's curl block runs against caregate serve: enrollment, paged pull with Link, a vector in the query, 409 for a stale push, notify, health, metrics")
    func curlBlock() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") else {
            print("SKIPPED the serving guide's curl test: no curl command (apt-get install curl)")
            return
        }
        let section = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("docs/serving.md"), encoding: .utf8)
        let block = try #require(section.components(separatedBy: "```sh\n").first { $0.hasPrefix("GATEWAY=") }?.components(separatedBy: "```").first)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-curl-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "listen:\n  port: 0\nstore: caregate.sqlite\n".write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", dir.appendingPathComponent("caregate.sqlite").path,
                                    "--tz", "America/New_York"])
        let server = try ServeProcess(directory: dir)
        defer { server.kill() }
        let script = block.replacingOccurrences(of: "GATEWAY=http://127.0.0.1:8080", with: "GATEWAY=http://127.0.0.1:\(server.port)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-euo", "pipefail", "-c", script]
        process.currentDirectoryURL = dir
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = URL(fileURLWithPath: CommandLineTests.binary).deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["NOTIFY_TOKEN"] = "not-configured"
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(text)")
        let lines = text.split(whereSeparator: \.isNewline).map(String.init)
        #expect(lines.contains { $0.lowercased().hasPrefix("link: </carekit/v1/revisions?") && $0.contains(#"rel="next""#) }, "\(text)")
        #expect(lines.contains("409") && lines.contains("404"), "\(lines)")
        #expect(text.contains(#"{"status":"ok"}"#) && text.contains(#"{"status":"ready"}"#) && text.contains("caregate_pulls_total"), "\(text)")
        let page = try JSONValue.parse(Array(try Data(contentsOf: dir.appendingPathComponent("page1.json"))))
        #expect(page["revisions"]?.arrayValue?.first?["entities"]?.arrayValue?.count == 5)
    }
}
