import CareStore
import FHIRClient
import Foundation
import Gateway
import JSON
import PostgresStore
import Testing

/// Three `caregate serve` processes over one PostgreSQL database, sekmet-fhir as the EHR behind
/// a proxy that can slow it down: the whole loop with instances killed in the middle of work.
@Suite("Three caregate serve processes over one PostgreSQL", .serialized)
struct ThreeInstanceLoopTests {
    let cli = CommandLineTests()
    static let patient = "Patient/maria-lopez"

    /// A device as the test drives it: what it was sent, what it pushed, and its vector.
    struct Device {
        let token: String
        let process = UUID()
        var clock = 0
        var vector = KnowledgeVector()
        var received: [UUID] = []
        var pushed: Set<UUID> = []
        var walk: CareTask?
    }

    /// Pulls every page through `server` (the `Link` header's pages), keeping what arrived; the
    /// catch-up vector must cover the device's vector (it never goes back).
    func pull(_ device: inout Device, through server: ServeProcess) async throws {
        var path = "/carekit/v1/revisions?since=\(device.vector.base64URL)"
        while true {
            let page = try await server.sendWithHeaders("GET", path, token: device.token)
            try #require(page.status == 200, "pull: \(page.status) \(String(describing: page.body))")
            for record in page.body?["revisions"]?.arrayValue ?? [] {
                for entity in try RevisionRecord(json: record).entities {
                    device.received.append(entity.version.uuid)
                    if case .task(let task) = entity, task.id.hasSuffix("/229065009") { device.walk = task }
                }
            }
            if let link = page.link {
                path = String(link.dropFirst().prefix { $0 != ">" })
                continue
            }
            let catchUp = try KnowledgeVector(json: try #require(page.body?["knowledgeVector"]))
            #expect(device.vector.isCovered(by: device.vector.merged(with: catchUp)))
            device.vector = device.vector.merged(with: catchUp)
            return
        }
    }

    /// The device's record of `count` outcomes of the walk from `first`, as a push body.
    func pushBody(_ device: inout Device, first: Int, count: Int) throws -> (body: String, outcomes: [UUID]) {
        let walk = try #require(device.walk)
        device.clock += 1
        let sent = device.vector.setting(device.process, to: device.clock)
        let outcomes = (0..<count).map { n in
            Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: first + n, values: [OutcomeValue(.integer(n))], effectiveDate: Date())
        }
        let record = RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: sent.processes)
        return (#"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(sent.json)}"#, outcomes.map(\.uuid))
    }

    /// Sends a push body; on 200 the outcomes count as acknowledged and the vector moves on.
    @discardableResult
    func push(_ device: inout Device, _ body: (body: String, outcomes: [UUID]), through server: ServeProcess) async throws -> Bool {
        let answer = try await server.send("POST", "/carekit/v1/revisions", token: device.token, json: body.body)
        guard answer.status == 200, let vector = answer.body?["knowledgeVector"] else { return false }
        let next = try KnowledgeVector(json: vector)
        #expect(device.vector.isCovered(by: device.vector.merged(with: next)))
        device.vector = device.vector.merged(with: next)
        device.pushed.formUnion(body.outcomes)
        return true
    }

    @Test("50 devices enroll, pull and post through three instances in turn; one instance SIGKILLed in the middle of a push batch, another in the middle of a device's POST, both restarted: every acknowledged push is stored, the EHR holds one Observation per outcome, no device is sent a version twice or misses one, no vector goes back")
    func threeInstances() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        guard let (location, password) = try TestPostgres.freshLocation(),
              let passwordFile = ProcessInfo.processInfo.environment["CAREGATE_TEST_POSTGRES_PASSWORD_FILE"] else { return }
        let proxy = try FaultProxy(upstream: ehr.port)
        let client = try await seededWithSamples(ehr)
        let url = "postgres://\(location.user)@\(location.host):\(location.port)/\(location.database)?sslmode=disable"
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--tz", "America/New_York",
                                               "--store", url, "--store-password-file", passwordFile])
        #expect(imported.status == 0, "\(imported.stderr)")
        let store = try PostgresCarePlanStore(location, password: password)
        defer { store.database.close() }

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-three-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try """
            listen:
              port: 0
            store: \(url)
            store-password-file: \(passwordFile)
            store-connections: 4
            ehr:
              base: \(proxy.base)
              time-zone: America/New_York
              push-seconds: 1
              push-lease-seconds: 5
              refresh-lease-seconds: 5
              refresh-seconds: 3600
            """.write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        var instances = try (0..<3).map { try ServeProcess(directory: dir, environment: ["CAREGATE_INSTANCE": "gateway-\($0)"]) }
        defer { for instance in instances { instance.kill() } }

        // 50 devices: each enrolls through one instance, pulls through the next, posts two outcomes through the third.
        let enrollment = DeviceEnrollment(store: store)
        var devices: [Device] = []
        for i in 0..<50 {
            let code = try enrollment.issueCode(patientID: Self.patient).code
            let enrolled = try await instances[i % 3].send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
            devices.append(Device(token: try #require(enrolled.body?["token"]?.stringValue, "\(enrolled)")))
        }
        for i in devices.indices {
            try await pull(&devices[i], through: instances[(i + 1) % 3])
            let body = try pushBody(&devices[i], first: 10_000 + 2 * i, count: 2)
            #expect(try await push(&devices[i], body, through: instances[(i + 2) % 3]), "device \(i)'s first push")
        }

        // The EHR slows down (2 s an answer); while batches are in flight, instance 1 is killed.
        try proxy.configure(["delay": 2.0])
        let postsBefore = proxy.counts["posts_received", default: 0]
        for i in 0..<12 {
            try await pull(&devices[i], through: instances[i % 3])
            let body = try pushBody(&devices[i], first: 20_000 + 2 * i, count: 2)
            #expect(try await push(&devices[i], body, through: instances[(i + 1) % 3]), "device \(i)'s second push")
        }
        #expect(try await eventually(20) { proxy.counts["posts_received", default: 0] > postsBefore }, "no batch reached the EHR's door")
        // The instance killed is one holding claimed outcomes that are not pushed yet.
        var claims: [Int: Int] = [:]
        #expect(try await eventually(10) {
            claims = try Self.claims(store, of: instances.map { Int($0.process.processIdentifier) })
            return !claims.isEmpty
        }, "no instance holds a claimed batch")
        let victim = try #require(instances.indices.first { claims[Int(instances[$0].process.processIdentifier)] != nil })
        instances[victim].kill()
        try proxy.configure([:])
        print("three instances: gateway-\(victim) killed holding \(claims.values.reduce(0, +)) claimed outcomes")

        // A device's POST of 300 outcomes to instance 2 (restarted first if it was the one
        // killed), killed halfway through the time a whole one takes there; the device sends it
        // again through instance 0 (or 1).
        if victim == 2 { instances[2] = try ServeProcess(directory: dir, environment: ["CAREGATE_INSTANCE": "gateway-2"]) }
        let retry = victim == 0 ? 1 : 0
        try await pull(&devices[22], through: instances[2])
        let control = try pushBody(&devices[22], first: 40_000, count: 300)
        let started = Date()
        #expect(try await push(&devices[22], control, through: instances[2]), "the timed push")
        let whole = Date().timeIntervalSince(started)
        try await pull(&devices[20], through: instances[retry])
        let big = try pushBody(&devices[20], first: 30_000, count: 300)
        let (address, token, body) = ("http://127.0.0.1:\(instances[2].port)/carekit/v1/revisions", devices[20].token, big.body)
        let inFlight = Task {
            _ = try? await CurlTransport().send(HTTPRequest(method: "POST", url: address, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(token)")],
                                                            body: Array(body.utf8), timeout: 10))
        }
        try await Task.sleep(nanoseconds: UInt64(whole * 0.5 * 1_000_000_000))
        instances[2].kill()
        _ = await inFlight.value
        let landed = try store.fetchOutcomes(EntityQuery(uuids: big.outcomes, patientIDs: [Self.patient])).count
        #expect(landed == 0 || landed == 300, "a killed POST is stored whole or not at all: \(landed) of 300")
        #expect(try await push(&devices[20], big, through: instances[retry]), "the device's second try")
        print("three instances: the POST killed mid-way had \(landed) of 300 outcomes stored; sent again, all 300 are")

        // Both come back.
        for i in Set([victim, 2]) { instances[i] = try ServeProcess(directory: dir, environment: ["CAREGATE_INSTANCE": "gateway-\(i)"]) }

        // Every acknowledged outcome is stored; the outbox drains (the killed instance's claims after their lease).
        let acknowledged = devices.reduce(into: Set<UUID>()) { $0.formUnion($1.pushed) }
        #expect(try store.fetchOutcomes(EntityQuery(uuids: Array(acknowledged), patientIDs: [Self.patient])).count == acknowledged.count)
        #expect(try await eventually(60) { let counts = try store.outboxCounts(); return counts.queued == 0 && counts.pushed >= acknowledged.count },
                "\(String(describing: try? store.outboxCounts()))")
        // The EHR holds one Observation per outcome pushed (its identifiers read in one search:
        // a search per outcome is more than sekmet-fhir answers in time).
        var onEHR: [String: Int] = [:]
        for observation in try await client.search("Observation", [("_count", "500")]) {
            for identifier in observation.children(named: "identifier") {
                onEHR["\(identifier.string("system") ?? "")|\(identifier.string("value") ?? "")", default: 0] += 1
            }
        }
        let pushed = try store.outbox(state: .pushed)
        var counts: [Int: Int] = [:]
        for item in pushed { counts[onEHR[item.idempotencyKey, default: 0], default: 0] += 1 }
        #expect(pushed.count == acknowledged.count && counts == [1: pushed.count], "Observations per outcome: \(counts)")

        // Every device pulls once more: nothing was sent twice, nothing is missing, its own outcomes never came back.
        let everything = try store.patientVersions(Self.patient, notCoveredBy: KnowledgeVector()).versions.map(\.uuid)
        for i in devices.indices {
            try await pull(&devices[i], through: instances[i % 3])
            let received = devices[i].received
            #expect(Set(received).count == received.count, "device \(i) was sent \(received.count - Set(received).count) versions twice")
            #expect(Set(received).isDisjoint(with: devices[i].pushed), "device \(i) was sent its own outcomes")
            let missing = Set(everything).subtracting(received).subtracting(devices[i].pushed)
            #expect(missing.isEmpty, "device \(i) missed \(missing.count) versions")
        }
    }
}

extension ThreeInstanceLoopTests {
    /// Per serve process id: how many outcomes it holds claimed and not yet pushed.
    static func claims(_ store: PostgresCarePlanStore, of pids: [Int]) throws -> [Int: Int] {
        try store.database.withSession { session in
            var found: [Int: Int] = [:]
            for row in try session.query("SELECT claimed_by FROM push_outbox WHERE state = 'queued' AND claimed_by IS NOT NULL") {
                let worker = try row.decode(String.self).split(separator: "/")
                if worker.count == 3, let pid = Int(worker[1]), pids.contains(pid) { found[pid, default: 0] += 1 }
            }
            return found
        }
    }
}
