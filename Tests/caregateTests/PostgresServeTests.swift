import CareStore
import Foundation
import JSON
import PostgresNIO
import PostgresStore
import Testing

/// `caregate` on a PostgreSQL store: the commands take `--store postgres://…`, and several
/// `caregate serve` processes share one database.
@Suite("caregate on PostgreSQL")
struct PostgresServeTests {
    let cli = CommandLineTests()

    @Test("import and enroll with --store postgres://; two serve processes over the database: a device enrolled on one pulls and pushes through the other; /metrics names each instance; /readyz is 503 once the database is gone")
    func twoInstances() async throws {
        guard let (location, _) = try TestPostgres.freshLocation(), let passwordFile = ProcessInfo.processInfo.environment["CAREGATE_TEST_POSTGRES_PASSWORD_FILE"] else { return }
        let url = "postgres://\(location.user)@\(location.host):\(location.port)/\(location.database)?sslmode=disable"
        let store = ["--store", url, "--store-password-file", passwordFile]
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--tz", "America/New_York"] + store)
        #expect(imported.status == 0, "\(imported.stderr)")
        let code = try await cli.caregate(["enroll", "--patient", "Patient/maria-lopez"] + store)
        #expect(code.status == 0, "\(code.stderr)")
        // A password in the URL is refused, naming where it belongs.
        let inline = try await cli.caregate(["devices", "list", "--store", "postgres://u:secret@127.0.0.1:1/db"])
        #expect(inline.status != 0 && inline.stderr.contains("store-password-file") && !inline.stderr.contains("secret"), "\(inline.stderr)")

        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-pg-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "listen:\n  port: 0\nstore: \(url)\nstore-password-file: \(passwordFile)\nstore-connections: 4\n"
            .write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let a = try ServeProcess(directory: dir, environment: ["CAREGATE_INSTANCE": "gateway-a"])
        let b = try ServeProcess(directory: dir, environment: ["CAREGATE_INSTANCE": "gateway-b"])
        defer { a.kill(); b.kill() }

        let enrolled = try await a.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code.stdout.trimmingCharacters(in: .whitespacesAndNewlines))"}"#)
        let token = try #require(enrolled.body?["token"]?.stringValue, "\(enrolled)")
        let pulled = try await b.send("GET", "/carekit/v1/revisions", token: token)
        #expect(pulled.status == 200)
        let revisions = try #require(pulled.body?["revisions"]?.arrayValue)
        let entities = revisions.flatMap { $0["entities"]?.arrayValue ?? [] }
        #expect(entities.count >= 5, "the plan imported through the CLI reaches the device through the other instance")
        let vector = try #require(revisions.last?["knowledgeVector"])
        // The device records the walk's first occurrence, through a.
        let walk = try #require(entities.first { $0["type"]?.stringValue == "task" && ($0["object"]?["id"]?.stringValue ?? "").hasSuffix("/229065009") })
        let taskUUID = try #require(walk["object"]?["uuid"]?.stringValue)
        let device = UUID()
        let recorded = Date(timeIntervalSinceReferenceDate: 815_400_000)
        let outcome = Outcome(taskUUID: try #require(UUID(uuidString: taskUUID)), taskOccurrenceIndex: 0,
                              values: [OutcomeValue(.boolean(true), createdDate: recorded)], effectiveDate: recorded)
        let deviceVector = try KnowledgeVector(json: vector).setting(device, to: 1)
        let record = RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: deviceVector.processes)
        let push = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(deviceVector.json)}"#
        let pushed = try await a.send("POST", "/carekit/v1/revisions", token: token, json: push)
        #expect(pushed.status == 200 && pushed.body?["merged"]?.numberValue == 1, "\(pushed)")
        // It is in the database both serve from, and b's next pull starts from a knowledge that counts it.
        let opened = try PostgresCarePlanStore(location, password: TestPostgres.cluster?.password)
        #expect(try opened.fetchOutcomes(EntityQuery(uuids: [outcome.uuid], patientIDs: ["Patient/maria-lopez"])).map(\.taskUUID) == [outcome.taskUUID])
        let readBack = try await b.send("GET", "/carekit/v1/revisions?since=\(deviceVector.base64URL)", token: token)
        #expect(readBack.status == 200, "\(readBack)")
        #expect(readBack.body?["revisions"]?.arrayValue?.flatMap { $0["entities"]?.arrayValue ?? [] }.isEmpty == true,
                "the device's own outcome does not come back to it from the other instance: \(String(describing: readBack.body))")
        opened.database.close()

        for (server, name) in [(a, "gateway-a"), (b, "gateway-b")] {
            #expect(try await server.send("GET", "/readyz").status == 200)
            let metrics = try await cli.run(["/usr/bin/curl", "-s", "http://127.0.0.1:\(server.port)/metrics"])
            let series = metrics.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }
            #expect(!series.isEmpty && series.allSatisfy { $0.contains(#"instance="\#(name)""#) }, "\(series.prefix(3))")
        }
        // The database goes away: neither instance is ready.
        let (admin, password) = try #require(TestPostgres.cluster)
        try PostgresDatabase(admin, password: password, maximumConnections: 1).withSession { try $0.execute("DROP DATABASE \(location.database) WITH (FORCE)") }
        for server in [a, b] {
            let ready = try await server.send("GET", "/readyz")
            #expect(ready.status == 503, "\(ready)")
        }
    }
}
