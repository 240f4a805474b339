import CareStore
import FHIRClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Gateway
@testable import GatewayServer
import HummingbirdTLS
import JSON
import Logging
import ServiceLifecycle
import Testing

/// `GatewayServer` running on 127.0.0.1 (any free port) over a store in a temporary folder,
/// with libcurl as the client.
final class RunningServer: @unchecked Sendable {
    let store: Backend.Store
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let port: Int
    let client = CurlTransport()
    let gateway: GatewayServer

    /// Connections the server counts per address now.
    func connectionCount() -> Int { gateway.connections.count }

    init(store: Backend.Store, limits: GatewayServer.Limits = .init(), ehr: EHRLink? = nil, tls: TLSConfiguration? = nil,
         dashboard: DashboardAccess? = nil, auditToEHR: Bool = false, auditRepeatWindow: TimeInterval? = nil, logger: Logger = Logger(label: "caregate-test")) async throws {
        self.store = store
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var gateway = GatewayServer(store: store, limits: limits, ehr: ehr, dashboard: dashboard)
        // As `ehr.audit: true` sets it up.
        if auditToEHR { gateway.audit = AuditRecorder(trail: store, queueing: AuditEventResource(observer: "test-gateway").outboxItem) }
        // A test counting repeats sets a window its slowest run (a loaded CI machine) cannot outlast.
        if let auditRepeatWindow { gateway.audit = AuditRecorder(trail: store, repeatWindow: auditRepeatWindow) }
        self.gateway = gateway
        let app = try gateway.application(host: "127.0.0.1", port: 0, tls: tls, logger: logger) { port in
            continuation.yield(port)
        }
        group = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger)
        let group = self.group
        task = Task { try await group.run() }
        var iterator = ports.makeAsyncIterator()
        port = await iterator.next() ?? 0
    }

    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// `/metrics` as series → value.
    func metrics() async throws -> [String: Double] {
        let text = String(decoding: try await client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/metrics")).body, as: UTF8.self)
        var values: [String: Double] = [:]
        let label = #"instance="\#(GatewayMetrics.instance)""#
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            // Every series names this instance; the label is taken out to look series up.
            let series = String(line[..<space])
            #expect(series.contains(label), "\(series) does not name the instance")
            let bare = series.replacingOccurrences(of: "{" + label + "}", with: "").replacingOccurrences(of: "," + label, with: "")
            values[bare] = value
        }
        return values
    }

    func send(_ method: String, _ path: String, token: String? = nil, json: String? = nil) async throws -> (status: Int, headers: [String: String], body: JSONValue?) {
        var headers: [(String, String)] = []
        if let token { headers.append(("Authorization", "Bearer \(token)")) }
        if json != nil { headers.append(("Content-Type", "application/json")) }
        let response = try await client.send(HTTPRequest(method: method, url: "http://127.0.0.1:\(port)\(path)", headers: headers, body: json.map { Array($0.utf8) }))
        return (response.status, response.headers, try? JSONValue.parse(response.body))
    }
}

/// A store with two patients' plans (as an import writes them).
func twoPatientStore() throws -> (SQLiteCarePlanStore, [String: CareTask]) {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-server-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let store = try SQLiteCarePlanStore(path: directory.appendingPathComponent("care.sqlite").path)
    return (store, try addTwoPatients(store))
}

/// `twoPatientStore()` on a new store of `backend`; nil (after a SKIPPED line) without PostgreSQL.
func twoPatientStore(_ backend: Backend, test: String = #function) throws -> (Backend.Store, [String: CareTask])? {
    guard let store = try backend.freshStore(test) else { return nil }
    return (store, try addTwoPatients(store))
}

/// Maria's and John's plans, each with a daily walk at 08:00 from 2026-11-01.
func addTwoPatients(_ store: any CarePlanStore) throws -> [String: CareTask] {
    let zone = TimeZone(identifier: "America/New_York")!
    let start = Date(timeIntervalSinceReferenceDate: 815_202_000)  // 2026-11-01 00:00 in New York
    var tasks: [String: CareTask] = [:]
    for id in ["maria", "john"] {
        let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: zone)
        let plan = CarePlan(id: "plan-\(id)", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        var task = CareTask(id: "walk-\(id)", title: "Walk", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
        task.effectiveDate = start
        try store.add([.patient(patient), .carePlan(plan), .task(task)])
        tasks[id] = task
    }
    return tasks
}


/// The server's suites, one at a time: swift-metrics has one registry per process, and each
/// suite counts what it did in /metrics.
@Suite("Gateway server", .serialized)
struct GatewayServerSuites {}

extension GatewayServerSuites {
@Suite("CareKit sync over HTTP")
struct SyncRouteTests {
    @Test("enroll with a code, pull in pages following Link, push outcomes once, and the refusals a device meets: 401, 409, 400 naming the field, 413", arguments: Backend.allCases)
    func syncOverLoopback(backend: Backend) async throws {
        guard let (store, tasks) = try twoPatientStore(backend) else { return }
        var limits = GatewayServer.Limits()
        limits.syncBody = 64 << 10
        let server = try await RunningServer(store: store, limits: limits)
        defer { Task { try? await server.stop() } }

        let before = try await server.metrics()
        #expect(try await server.send("GET", "/healthz").status == 200)
        #expect(try await server.send("GET", "/readyz").status == 200)

        // Enrollment: a wrong code is 401, the right one gives a token for Maria.
        let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
        #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "AAAAA-AAAAA"}"#).status == 401)
        let enrolled = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
        #expect(enrolled.status == 200)
        let token = try #require(enrolled.body?["token"]?.stringValue)
        #expect(enrolled.body?["patientID"]?.stringValue == "maria")
        #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).status == 401)

        // Pull without a token: 401 with a challenge. With it: Maria's versions in pages of one.
        let anonymous = try await server.send("GET", "/carekit/v1/revisions")
        #expect(anonymous.status == 401 && anonymous.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        var path = "/carekit/v1/revisions?limit=1"
        var ids: [String] = []
        var catchUp: JSONValue?
        while true {
            let page = try await server.send("GET", path, token: token)
            #expect(page.status == 200)
            let entities = page.body?["revisions"]?.arrayValue?.first?["entities"]?.arrayValue ?? []
            ids += entities.compactMap { $0["object"]?["id"]?.stringValue }
            guard let link = page.headers["link"] else { catchUp = page.body?["knowledgeVector"]; break }
            #expect(page.body?["knowledgeVector"] == .null)
            path = String(link.dropFirst().prefix { $0 != ">" })
        }
        #expect(ids == ["maria", "plan-maria", "walk-maria"])
        let vector = try KnowledgeVector(json: try #require(catchUp))
        #expect(try await server.send("GET", "/carekit/v1/revisions?since=\(vector.base64URL)", token: token).body?["revisions"]?.arrayValue?.first?["entities"]?.arrayValue?.isEmpty == true)
        // Push an outcome: merged once, however often it is sent.
        let device = vector.setting(UUID(), to: 1)
        let outcome = Outcome(taskUUID: tasks["maria"]!.uuid, taskOccurrenceIndex: 1,
                              values: [OutcomeValue(.integer(4200), kind: "steps", createdDate: Date(timeIntervalSinceReferenceDate: 815_320_000))],
                              effectiveDate: Date(timeIntervalSinceReferenceDate: 815_320_000))
        let record = RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: device.processes)
        let push = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(device.json)}"#
        let first = try await server.send("POST", "/carekit/v1/revisions", token: token, json: push)
        #expect(first.status == 200 && first.body?["merged"]?.numberValue == 1, "\(String(describing: first.body))")
        let again = try await server.send("POST", "/carekit/v1/revisions", token: token, json: push)
        #expect(again.status == 200 && again.body?["merged"]?.numberValue == 0)
        #expect(try store.fetchOutcomes().count == 1)

        // A stale vector: 409 with the gateway's vector.
        let stale = #"{"revisions": [], "knowledgeVector": \#(KnowledgeVector().json)}"#
        let conflict = try await server.send("POST", "/carekit/v1/revisions", token: token, json: stale)
        #expect(conflict.status == 409 && conflict.body?["error"]?["knowledgeVector"] != nil)

        // John's task named by Maria's device: 400 naming record, entity and field; nothing stored.
        let current = try KnowledgeVector(json: try #require(again.body?["knowledgeVector"]))
        let next = current.setting(device.clocks.keys.first { $0 != vector.clocks.keys.first }!, to: 2)
        var foreign = outcome
        foreign.version.uuid = UUID()
        foreign.version.id = "foreign"
        foreign.taskUUID = tasks["john"]!.uuid
        let foreignRecord = RevisionRecord(entities: [.outcome(foreign)], knowledgeVector: next.processes)
        let refused = try await server.send("POST", "/carekit/v1/revisions", token: token,
                                            json: #"{"revisions": [\#(String(decoding: foreignRecord.bytes(), as: UTF8.self))], "knowledgeVector": \#(next.json)}"#)
        #expect(refused.status == 400 && refused.body?["error"]?["field"]?.stringValue == "taskUUID" && refused.body?["error"]?["record"]?.numberValue == 0)
        #expect(refused.body?["error"]?["entity"]?.stringValue == "outcome \"foreign\"")
        // A record that is not CareKit JSON: 400 naming where.
        let malformed = try await server.send("POST", "/carekit/v1/revisions", token: token,
                                              json: #"{"revisions": [{"entities": [{"object": {}}], "knowledgeVector": {"processes": []}}], "knowledgeVector": \#(next.json)}"#)
        #expect(malformed.status == 400 && malformed.body?["error"]?["message"]?.stringValue == "revisions[0] entities[0].type: missing (required)",
                "\(String(describing: malformed.body))")
        #expect(malformed.body?["error"]?["field"]?.stringValue == "entities[0].type" && malformed.body?["error"]?["record"]?.numberValue == 0)
        // Too large: 413 before it is read.
        let huge = #"{"revisions": [], "knowledgeVector": {"processes": []}, "padding": "\#(String(repeating: "x", count: 100_000))"}"#
        #expect(try await server.send("POST", "/carekit/v1/revisions", token: token, json: huge).status == 413)
        #expect(try store.fetchOutcomes().count == 1)

        // /metrics: requests by route and status, latency, device syncs, the outbox.
        // (Counted from before this test: the registry is the process's.)
        let after = try await server.metrics()
        for (series, count) in [(#"http_server_request_duration_count{http_route="/carekit/v1/revisions",http_request_method="GET",http_response_status_code="200"}"#, 4.0),
                                (#"http_server_request_duration_count{http_route="/carekit/v1/revisions",http_request_method="POST",http_response_status_code="409"}"#, 1),
                                (#"http_server_request_duration_count{http_route="/carekit/v1/revisions",http_request_method="POST",http_response_status_code="413"}"#, 1),
                                ("caregate_pulls_total", 4), ("caregate_pushes_total", 2), ("caregate_device_syncs_total", 6)] {
            #expect((after[series] ?? 0) - (before[series] ?? 0) == count, "\(series) in /metrics")
        }
        #expect(after["caregate_outbox_queued"] == 0)
        // John's knowledge, or a vector far ahead of everyone's, sent by Maria's device: Maria's
        // versions and knowledge only (the store reads the token's patient, never the vector's).
        let johns = try store.patientKnowledge("john")
        let ahead = johns.setting(try #require(johns.clocks.keys.first), to: 1_000)
        for since in [johns, ahead] {
            let answer = try await server.send("GET", "/carekit/v1/revisions?since=\(since.base64URL)", token: token)
            let sent = answer.body?["revisions"]?.arrayValue?.flatMap { $0["entities"]?.arrayValue ?? [] } ?? []
            let johnsIDs = ["john", "plan-john", "walk-john"]
            #expect(answer.status == 200 && !sent.contains { johnsIDs.contains($0["object"]?["id"]?.stringValue ?? "") || $0["object"]?["taskUUID"]?.stringValue == tasks["john"]!.uuid.uuidString })
            #expect(try KnowledgeVector(json: try #require(answer.body?["knowledgeVector"])) == store.patientKnowledge("maria"), "\(since)")
        }
        // A later page's link from John's device (its cursor, kept in John's page cache), followed
        // by Maria's device: a page of Maria's own list, nothing of John's.
        let johnsCode = try DeviceEnrollment(store: store).issueCode(patientID: "john").code
        let johnsToken = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(johnsCode)"}"#).body?["token"]?.stringValue)
        let johnsFirst = try await server.send("GET", "/carekit/v1/revisions?limit=1", token: johnsToken)
        let johnsLink = try #require(johnsFirst.headers["link"])
        let followed = try await server.send("GET", String(johnsLink.dropFirst().prefix { $0 != ">" }), token: token)
        let followedIDs = followed.body?["revisions"]?.arrayValue?.flatMap { $0["entities"]?.arrayValue ?? [] }.compactMap { $0["object"]?["id"]?.stringValue } ?? []
        #expect(followed.status == 200 && !followedIDs.isEmpty && followedIDs.allSatisfy { !["john", "plan-john", "walk-john"].contains($0) }, "\(followedIDs)")

        // A revoked token stops at once.
        let deviceID = try #require(enrolled.body?["deviceID"]?.stringValue)
        #expect(try store.revokeDevice(id: deviceID, at: Date()))
        #expect(try await server.send("GET", "/carekit/v1/revisions", token: token).status == 401)
        try await server.stop()
    }

    @Test("a device's last sync time is written in the background, never by the request itself, and what is noted is written at graceful shutdown", arguments: Backend.allCases)
    func lastSyncTimes(backend: Backend) async throws {
        guard let (store, _) = try twoPatientStore(backend) else { return }
        let server = try await RunningServer(store: store)
        let enrollment = DeviceEnrollment(store: store)
        let (device, token) = try enrollment.redeem(code: enrollment.issueCode(patientID: "maria").code)
        #expect(try store.devices(patientID: "maria").first?.lastSyncAt == nil)
        let before = Date()
        #expect(try await server.send("GET", "/carekit/v1/revisions", token: token).status == 200)
        try await server.stop()
        let synced = try #require(try store.devices(patientID: "maria").first { $0.id == device.id }?.lastSyncAt)
        #expect(synced >= before.addingTimeInterval(-1) && synced <= Date())
    }

    @Test("wrong enrollment codes from one address are refused with 429 and Retry-After once past the limit, even a right one", arguments: Backend.allCases)
    func throttle(backend: Backend) async throws {
        guard let (store, _) = try twoPatientStore(backend) else { return }
        var limits = GatewayServer.Limits()
        limits.wrongCodes = 3
        let server = try await RunningServer(store: store, limits: limits)
        for _ in 0..<3 {
            #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "BBBBB-BBBBB"}"#).status == 401)
        }
        let code = try DeviceEnrollment(store: store).issueCode(patientID: "john").code
        let blocked = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
        #expect(blocked.status == 429 && Int(blocked.headers["retry-after"] ?? "") ?? 0 > 0)
        #expect(try store.devices(patientID: nil).isEmpty)
        try await server.stop()
    }
}

@Suite("Server limits")
struct ServerLimitTests {
    @Test("too many header fields are refused, and a connection that sends nothing is closed after the idle limit")
    func limits() async throws {
        let (store, _) = try twoPatientStore()
        var limits = GatewayServer.Limits()
        limits.idleSeconds = 1
        limits.headerCount = 20
        let server = try await RunningServer(store: store, limits: limits)
        let headers = (0..<50).map { ("X-Filler-\($0)", "x") }
        do {
            let response = try await server.client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/healthz", headers: headers))
            #expect(response.status >= 400, "50 header fields were accepted")
        } catch {
            // Closing the connection is a refusal too.
        }
        #expect(try await server.send("GET", "/healthz").status == 200)
        // A client that connects and stays silent (a slow-loris' first step).
        let connection = try RawConnection(port: server.port)
        let fd = connection.fd
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let started = Date()
        var byte: UInt8 = 0
        let read = recv(fd, &byte, 1, 0)
        #expect(read == 0, "the silent connection was not closed (recv gave \(read))")
        #expect(Date().timeIntervalSince(started) < 4)
        try await server.stop()
    }

    @Test("a client that trickles its headers a byte at a time (never idle) is cut off at the head deadline")
    func slowLoris() async throws {
        let (store, _) = try twoPatientStore()
        var limits = GatewayServer.Limits()
        limits.idleSeconds = 30
        limits.requestHeadSeconds = 1
        let server = try await RunningServer(store: store, limits: limits)
        let connection = try RawConnection(port: server.port)
        let fd = connection.fd
        let started = Date()
        var cutOff: TimeInterval?
        for byte in Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: \(String(repeating: "a", count: 40))".utf8) {
            var b = byte
            if send(fd, &b, 1, Int32(MSG_NOSIGNAL)) < 0 { cutOff = Date().timeIntervalSince(started); break }
            try await Task.sleep(for: .milliseconds(100))
        }
        if cutOff == nil {
            // The server may close without the last sends failing yet: a read sees the end.
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            if recv(fd, &byte, 1, 0) == 0 { cutOff = Date().timeIntervalSince(started) }
        }
        let seconds = try #require(cutOff, "the trickling client was never cut off")
        #expect(seconds < 7, "cut off only after \(seconds) s")
        // A client that sends its request promptly is served as before.
        #expect(try await server.send("GET", "/healthz").status == 200)
        try await server.stop()
    }
}
}

@Suite("JSON log lines")
struct JSONLogLineTests {
    @Test("the time of a log line is UTC to the millisecond, and reads back as the moment it names")
    func timestamp() throws {
        let reader = ISO8601DateFormatter()
        reader.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for date in [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_795_660_200.123), Date(timeIntervalSince1970: 951_782_400.5), Date()] {
            let text = JSONLogHandler.timestamp(date)
            #expect(text.count == 24 && text.hasSuffix("Z"), "\(text)")
            let read = try #require(reader.date(from: text), "\(text)")
            #expect(abs(read.timeIntervalSince(date)) < 0.001, "\(text)")
        }
        #expect(JSONLogHandler.timestamp(Date(timeIntervalSince1970: 951_782_400.5)) == "2000-02-29T00:00:00.500Z")
    }
}
