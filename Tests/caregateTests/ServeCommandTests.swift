import CareStore
import FHIR
import FHIRClient
import Gateway
import Foundation
import Mapping
import JSON
import Testing

@Suite("caregate serve")
struct ServeCommandTests {
    let cli = CommandLineTests()

    func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-serve-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    @Test("--check-config prints every finding with its line and column, in file order, and exits 1; a good file exits 0")
    func checkConfig() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try """
            listen:
              host: 0.0.0.0
              prot: 8080
            store: care.sqlite
            limits:
              page-size: many
            tls:
              certificate: cert.pem
            """.write(to: dir.appendingPathComponent("bad.yaml"), atomically: true, encoding: .utf8)
        try "not a certificate\n".write(to: dir.appendingPathComponent("cert.pem"), atomically: true, encoding: .utf8)
        try "tls:\n  certificate: cert.pem\n  key: cert.pem\n".write(to: dir.appendingPathComponent("badpem.yaml"), atomically: true, encoding: .utf8)
        let badPEM = try await cli.caregate(["serve", "--config", "badpem.yaml", "--check-config"], directory: dir)
        #expect(badPEM.status == 1 && badPEM.stderr.hasPrefix("badpem.yaml:1:1: error: tls: "), "\(badPEM.stderr)")
        // A device that never ends is not read for ever (FileBytes reads what the file's size says, here nothing).
        try "tls:\n  certificate: /dev/zero\n  key: /dev/zero\n".write(to: dir.appendingPathComponent("zero.yaml"), atomically: true, encoding: .utf8)
        let zero = try await cli.caregate(["serve", "--config", "zero.yaml", "--check-config"], directory: dir)
        #expect(zero.status == 1 && zero.stderr.contains("error: tls: /dev/zero is not a PEM certificate chain"), "\(zero.stderr)")
        let bad = try await cli.caregate(["serve", "--config", "bad.yaml", "--check-config"], directory: dir)
        #expect(bad.status == 1)
        #expect(bad.stderr.split(separator: "\n").map(String.init) == [
            "bad.yaml:2:9: error: listen.host 0.0.0.0 is not loopback: serve it with tls (certificate and key), or plain HTTP with allow-plain-http: true (behind a TLS proxy)",
            "bad.yaml:3:3: error: unknown key 'prot'; did you mean 'port'?",
            "bad.yaml:6:14: error: expected a whole number from 1 to 100000, found 'many'",
            "bad.yaml:7:1: error: tls: needs certificate and key (PEM files)",
        ], "\(bad.stderr)")
        // An empty file is every default (read without Foundation's empty-file leak: found by fuzz-server-config).
        _ = FileManager.default.createFile(atPath: dir.appendingPathComponent("empty.yaml").path, contents: Data())
        let empty = try await cli.caregate(["serve", "--config", "empty.yaml", "--check-config"], directory: dir)
        #expect(empty.status == 0 && empty.stderr.contains("fine (listen 127.0.0.1:8080"), "\(empty.stderr)")
        _ = FileManager.default.createFile(atPath: dir.appendingPathComponent("latin1.yaml").path, contents: Data([0x73, 0x74, 0x6F, 0x72, 0x65, 0x3A, 0x20, 0xE9]))
        let latin1 = try await cli.caregate(["serve", "--config", "latin1.yaml", "--check-config"], directory: dir)
        #expect(latin1.status == 1 && latin1.stderr.contains("latin1.yaml:1:1: error: not UTF-8 text"), "\(latin1.stderr)")
        // Profiles need their package, and the packages must be there.
        try """
            ehr:
              base: http://127.0.0.1:9/fhir
              profiles: us-core-6.1.0
            """.write(to: dir.appendingPathComponent("profiles.yaml"), atomically: true, encoding: .utf8)
        let profiles = try await cli.caregate(["serve", "--config", "profiles.yaml", "--check-config"], directory: dir)
        try """
            ehr:
              base: http://127.0.0.1:9/fhir
              organization: Organization/good health
            """.write(to: dir.appendingPathComponent("organization.yaml"), atomically: true, encoding: .utf8)
        let organization = try await cli.caregate(["serve", "--config", "organization.yaml", "--check-config"], directory: dir)
        #expect(organization.status == 1 && organization.stderr.contains("organization.yaml:3:17: error: ehr.organization: Organization/good health is not a reference to an Organization"), "\(organization.stderr)")
        #expect(profiles.status == 1 && profiles.stderr.contains("profiles.yaml:3:13: error: ehr.profiles: us-core-6.1.0 needs its package: name it in ehr.packages"), "\(profiles.stderr)")
        try """
            ehr:
              base: http://127.0.0.1:9/fhir
              profiles: us-core-6.1.0
              packages: [us-core.tgz]
            """.write(to: dir.appendingPathComponent("packages.yaml"), atomically: true, encoding: .utf8)
        let packages = try await cli.caregate(["serve", "--config", "packages.yaml", "--check-config"], directory: dir)
        #expect(packages.status == 1 && packages.stderr.contains("packages.yaml:4:13: error: ehr.packages: \(dir.path)/us-core.tgz does not exist"), "\(packages.stderr)")
        try "listen:\n  port: 0\nstore: care.sqlite\n".write(to: dir.appendingPathComponent("good.yaml"), atomically: true, encoding: .utf8)
        let good = try await cli.caregate(["serve", "--config", "good.yaml", "--check-config"], directory: dir)
        #expect(good.status == 0 && good.stderr.contains("good.yaml: fine (listen 127.0.0.1:0, store \(dir.path)/care.sqlite)"), "\(good.stderr)")
    }

    @Test("the ehr section's findings: no base, two ways to authenticate, a missing token file, an unknown zone, a misspelt key")
    func ehrFindings() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try """
            ehr:
              token-file: missing.token
              token-env: EHR_TOKEN
              time-zone: Mars/Olympus
              push-second: 5
              notify:
                endpoint: http://127.0.0.1:8080/fhir/notify
            """.write(to: dir.appendingPathComponent("ehr.yaml"), atomically: true, encoding: .utf8)
        let bad = try await cli.caregate(["serve", "--config", "ehr.yaml", "--check-config"], directory: dir)
        #expect(bad.status == 1)
        #expect(bad.stderr.split(separator: "\n").map(String.init) == [
            "ehr.yaml:1:1: error: ehr: needs base (the EHR's FHIR base URL)",
            "ehr.yaml:1:1: error: ehr: choose one way to authenticate (token-file, token-env)",
            "ehr.yaml:3:14: error: ehr.token-env: no token in $EHR_TOKEN (missing, unreadable, empty, or not one word)",
            "ehr.yaml:4:14: error: ehr.time-zone: unknown time zone 'Mars/Olympus' (use an IANA name such as America/New_York)",
            "ehr.yaml:5:3: error: unknown key 'push-second'; did you mean 'push-seconds'?",
            "ehr.yaml:7:5: error: ehr.notify: needs token-file or token-env (the token the EHR sends with each notification)",
        ], "\(bad.stderr)")
        try "ehr:\n  base: http://127.0.0.1:9/fhir\n  token-file: missing.token\n".write(to: dir.appendingPathComponent("missing.yaml"), atomically: true, encoding: .utf8)
        let missing = try await cli.caregate(["serve", "--config", "missing.yaml", "--check-config"], directory: dir)
        #expect(missing.status == 1 && missing.stderr.contains("missing.yaml:3:15: error: ehr.token-file: no token in \(dir.path)/missing.token"), "\(missing.stderr)")
    }

    @Test("the dashboard section's findings: no way to name the token, two ways, a token file that is missing")
    func dashboardFindings() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, text) in [("none.yaml", "dashboard:\n  admin-token: x\n"), ("two.yaml", "dashboard:\n  admin-token-file: a.token\n  admin-token-env: ADMIN\n"),
                             ("missing.yaml", "store: care.sqlite\ndashboard:\n  admin-token-file: missing.token\n")] {
            try text.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        let none = try await cli.caregate(["serve", "--config", "none.yaml", "--check-config"], directory: dir)
        #expect(none.stderr.split(separator: "\n").map(String.init) == [
            "none.yaml:1:1: error: dashboard: needs one of admin-token-file or admin-token-env (the token operators sign in with)",
            "none.yaml:2:3: error: unknown key 'admin-token' (expected: admin-token-file, admin-token-env)",
        ], "\(none.stderr)")
        let two = try await cli.caregate(["serve", "--config", "two.yaml", "--check-config"], directory: dir)
        #expect(two.status == 1 && two.stderr.contains("two.yaml:1:1: error: dashboard: needs one of admin-token-file or admin-token-env"), "\(two.stderr)")
        let missing = try await cli.caregate(["serve", "--config", "missing.yaml", "--check-config"], directory: dir)
        #expect(missing.status == 1 && missing.stderr.contains("missing.yaml:2:1: error: dashboard: admin token: none in \(dir.path)/missing.token"), "\(missing.stderr)")
    }

    @Test("the store's findings: a password file for an SQLite store, a password in a postgres:// URL, a password file readable by others; a good PostgreSQL store passes without connecting")
    func storeFindings() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        for (name, text) in [("sqlite.yaml", "store: care.sqlite\nstore-password-file: db.password\n"),
                             ("inline.yaml", "store: postgres://caregate:hunter2@db.internal/care\n"),
                             ("open.yaml", "store: postgres://caregate@db.internal/care\nstore-password-file: open.password\n"),
                             ("good.yaml", "store: postgres://caregate@db.internal:6432/care\nstore-password-file: db.password\nstore-connections: 16\n")] {
            try text.write(to: dir.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        for (file, mode) in [("db.password", 0o600), ("open.password", 0o644)] {
            try "s3cret-password".write(to: dir.appendingPathComponent(file), atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: dir.appendingPathComponent(file).path)
        }
        let sqlite = try await cli.caregate(["serve", "--config", "sqlite.yaml", "--check-config"], directory: dir)
        #expect(sqlite.status == 1 && sqlite.stderr.contains("sqlite.yaml:2:22: error: store-password-file is for a postgres:// store"), "\(sqlite.stderr)")
        let inline = try await cli.caregate(["serve", "--config", "inline.yaml", "--check-config"], directory: dir)
        #expect(inline.status == 1 && inline.stderr.contains("inline.yaml:1:8: error: store: the URL holds a password") && !inline.stderr.contains("hunter2"),
                "\(inline.stderr)")
        let open = try await cli.caregate(["serve", "--config", "open.yaml", "--check-config"], directory: dir)
        #expect(open.status != 0 && open.stderr.contains("is readable by others") && !open.stderr.contains("s3cret"), "\(open.stderr)")
        let good = try await cli.caregate(["serve", "--config", "good.yaml", "--check-config"], directory: dir)
        #expect(good.status == 0 && good.stderr.contains("store postgres://caregate@db.internal:6432/care"), "\(good.stderr)")
    }

    @Test("docker/gateway-postgres.yaml, which compose's two instances serve, passes --check-config; the image holds it and compose runs both instances over the PostgreSQL service")
    func composeInstances() async throws {
        let docker = CommandLineTests.projectRoot.appendingPathComponent("docker")
        let checked = try await cli.caregate(["serve", "--config", docker.appendingPathComponent("gateway-postgres.yaml").path, "--check-config"],
                                             environment: ["CAREGATE_STORE_PASSWORD": "from-compose"])
        #expect(checked.status == 0 && checked.stderr.contains("store postgres://caregate@postgres:5432/care"), "\(checked.stderr)")
        let dockerfile = try String(contentsOf: docker.appendingPathComponent("Dockerfile"), encoding: .utf8)
        #expect(dockerfile.contains("COPY docker/gateway-postgres.yaml /opt/caregate/gateway-postgres.yaml"))
        let compose = try String(contentsOf: docker.appendingPathComponent("compose.yaml"), encoding: .utf8)
        for instance in ["gateway-a", "gateway-b"] { #expect(compose.contains("CAREGATE_INSTANCE: \(instance)"), "\(instance)") }
        #expect(compose.contains(#"command: ["serve", "--config", "/opt/caregate/gateway-postgres.yaml"]"#) && compose.contains("image: postgres:"))
    }

    @Test("docs/postgresql.md's gateway.yaml lines pass --check-config with the password file where they name it")
    func postgresGuideExample() async throws {
        let guide = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("docs/postgresql.md"), encoding: .utf8)
        let yaml = try #require(guide.components(separatedBy: "```yaml\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(yaml.contains("store: postgres://") && yaml.contains("store-password-file:"))
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("secrets"), withIntermediateDirectories: true)
        _ = FileManager.default.createFile(atPath: dir.appendingPathComponent("secrets/db.password").path, contents: Data("s3cret-password".utf8),
                                           attributes: [.posixPermissions: 0o600])
        try yaml.write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let checked = try await cli.caregate(["serve", "--config", "gateway.yaml", "--check-config"], directory: dir)
        #expect(checked.status == 0 && checked.stderr.contains("store postgres://caregate@db.internal:5432/care"), "\(checked.stderr)")
    }

    @Test("tokens that guard the gateway are long and owner-only; loopback is decided from the address; plain HTTP to a remote EHR needs saying so; trusted proxies are addresses")
    func guards() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        func write(_ name: String, _ text: String, mode: Int = 0o600) {
            _ = FileManager.default.createFile(atPath: dir.appendingPathComponent(name).path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        }
        write("short.token", "x\n", mode: 0o644)
        write("good.token", "0123456789abcdef0123\n")
        write("weak.yaml", "dashboard:\n  admin-token-file: short.token\nehr:\n  base: https://ehr.example.org/fhir\n  notify:\n    token-file: short.token\n")
        let weak = try await cli.caregate(["serve", "--config", "weak.yaml", "--check-config"], directory: dir)
        #expect(weak.status == 1)
        #expect(weak.stderr.contains("weak.yaml:1:1: error: dashboard: admin token in \(dir.path)/short.token is 1 characters; one that guards the gateway has at least 16"), "\(weak.stderr)")
        #expect(weak.stderr.contains("dashboard: admin token in \(dir.path)/short.token can be read by other users (mode 644): chmod 600 it"))
        #expect(weak.stderr.contains("weak.yaml:6:17: error: ehr.notify.token-file: notification token in \(dir.path)/short.token is 1 characters"))
        write("evil.yaml", "listen:\n  host: 127.evil.example\ndashboard:\n  admin-token-file: good.token\n")
        let evil = try await cli.caregate(["serve", "--config", "evil.yaml", "--check-config"], directory: dir)
        #expect(evil.status == 1 && evil.stderr.contains("evil.yaml:2:9: error: listen.host 127.evil.example is not loopback"), "\(evil.stderr)")
        write("plain.yaml", "ehr:\n  base: http://ehr.example.org/fhir\n")
        let plain = try await cli.caregate(["serve", "--config", "plain.yaml", "--check-config"], directory: dir)
        #expect(plain.status == 1 && plain.stderr.contains("plain.yaml:2:9: error: ehr.base http://ehr.example.org/fhir is plain HTTP to another machine"), "\(plain.stderr)")
        write("allowed.yaml", "ehr:\n  base: http://ehr.example.org/fhir\n  allow-plain-http: true\nlisten:\n  host: ::1\n  trusted-proxies: [127.0.0.1, 10.0.0.0/8]\n")
        let allowed = try await cli.caregate(["serve", "--config", "allowed.yaml", "--check-config"], directory: dir)
        #expect(allowed.status == 0, "\(allowed.stderr)")
        write("proxies.yaml", "listen:\n  trusted-proxies: [10.0.0.0/8, proxy.example]\n")
        let proxies = try await cli.caregate(["serve", "--config", "proxies.yaml", "--check-config"], directory: dir)
        #expect(proxies.status == 1 && proxies.stderr.contains("proxies.yaml:2:20: error: listen.trusted proxy \"proxy.example\" is not an IP address or prefix"), "\(proxies.stderr)")
    }

    @Test("docs/serving.md's gateway.yaml and the commented docs/gateway.yaml pass --check-config", arguments: ["serving.md", "gateway.yaml"])
    func guideConfiguration(_ file: String) async throws {
        let text = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("docs/\(file)"), encoding: .utf8)
        let block = file == "gateway.yaml" ? text : try #require(text.components(separatedBy: "```yaml\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(block.hasPrefix("# gateway.yaml"))
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try block.write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        // The secrets it names, owner-only.
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("secrets"), withIntermediateDirectories: true)
        for name in ["ehr.token", "notify.token", "admin.token"] {
            let path = dir.appendingPathComponent("secrets/\(name)").path
            _ = FileManager.default.createFile(atPath: path, contents: Data("secret-\(name)\n".utf8), attributes: [.posixPermissions: 0o600])
        }
        let check = try await cli.caregate(["serve", "--config", "gateway.yaml", "--check-config"], directory: dir)
        #expect(check.status == 0 && check.stderr.contains("fine (listen 127.0.0.1:8080"), "\(check.stderr)")
    }

    @Test("docs/security.md's TLS example passes --check-config with a certificate and key where it names them")
    func guideTLSConfiguration() async throws {
        let guide = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("docs/security.md"), encoding: .utf8)
        let block = try #require(guide.components(separatedBy: "```yaml\n").dropFirst().first?.components(separatedBy: "```").first)
        #expect(block.contains("tls:"))
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let tls = dir.appendingPathComponent("tls")
        try FileManager.default.createDirectory(at: tls, withIntermediateDirectories: true)
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=caregate.example",
                             "-keyout", tls.appendingPathComponent("key.pem").path, "-out", tls.appendingPathComponent("chain.pem").path]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        guard (try? openssl.run()) != nil else { print("SKIPPED docs/security.md's TLS example: no openssl command"); return }
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0)
        let config = block.replacingOccurrences(of: "/etc/caregate/tls/", with: tls.path + "/")
        try config.write(to: dir.appendingPathComponent("tls.yaml"), atomically: true, encoding: .utf8)
        let check = try await cli.caregate(["serve", "--config", "tls.yaml", "--check-config"], directory: dir)
        #expect(check.status == 0 && check.stderr.contains("fine (listen 0.0.0.0:8443"), "\(check.stderr)")
    }

    @Test("serve answers /healthz on the port it prints, archives and drops audit entries past audit.keep-days as it starts, and SIGTERM stops it with exit status 0")
    func serveAndStop() async throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try "audit:\n  keep-days: 30\n".write(to: dir.appendingPathComponent("noarchive.yaml"), atomically: true, encoding: .utf8)
        let noArchive = try await cli.caregate(["serve", "--config", "noarchive.yaml", "--check-config"], directory: dir)
        #expect(noArchive.status == 1 && noArchive.stderr.hasPrefix("noarchive.yaml:1:1: error: audit: needs keep-days and archive"), "\(noArchive.stderr)")
        let old = AuditEntry(recorded: Date().addingTimeInterval(-90 * 86_400), actor: .osUser, action: .read, event: "command.report",
                             patientID: "Patient/maria-lopez", outcome: .success)
        try SQLiteCarePlanStore(path: dir.appendingPathComponent("care.sqlite").path).record([old])
        try "listen:\n  port: 0\nstore: care.sqlite\naudit:\n  keep-days: 30\n  archive: audit-archive\n"
            .write(to: dir.appendingPathComponent("gateway.yaml"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
        process.arguments = ["serve", "--config", "gateway.yaml"]
        process.currentDirectoryURL = dir
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        // A line says where it listens; the server's own logs are JSON lines.
        var seen = ""
        while !seen.contains("caregate serve: listening on") || !seen.hasSuffix("\n") {
            let chunk = errors.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            seen += String(decoding: chunk, as: UTF8.self)
        }
        let lines = seen.split(separator: "\n").map(String.init)
        let listening = try #require(lines.first { $0.hasPrefix("caregate serve: listening on http://127.0.0.1:") }, "\(seen)")
        let port = try #require(Int(listening.dropFirst("caregate serve: listening on http://127.0.0.1:".count).prefix { $0.isNumber }))
        for log in lines where log != listening {
            #expect((try? JSONValue.parse(log))?["level"] != nil, "not a JSON log line: \(log)")
        }
        let health = try await CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(port)/healthz"))
        #expect(health.status == 200 && String(decoding: health.body, as: UTF8.self) == #"{"status":"ok"}"#)
        process.terminate()
        process.waitUntilExit()
        #expect(process.terminationReason == .exit && process.terminationStatus == 0)
        let rest = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(rest.contains("caregate serve: stopped"), "\(rest)")
        let archived = String(decoding: try FileBytes.read(dir.appendingPathComponent("audit-archive/audit-events-from-1.ndjson").path), as: UTF8.self)
        #expect(archived.split(separator: "\n").count == 1 && archived.contains("\"reference\":\"Patient/maria-lopez\""), "\(archived)")
        let store = try SQLiteCarePlanStore(path: dir.appendingPathComponent("care.sqlite").path)
        #expect(try store.auditEntries(AuditQuery()).isEmpty && store.auditAnchor()?.sequence == 1)
    }
}

@Suite("The CareKit client")
struct CareKitClientTests {
    @Test("Clients/CareKit/CareGateRemote.swift is valid Swift (CareKit is Apple-only, so it is parsed here, not built) and speaks the routes the server serves")
    func clientParses() async throws {
        let file = CommandLineTests.projectRoot.appendingPathComponent("Clients/CareKit/CareGateRemote.swift")
        let run = try await CommandLineTests().run(["/usr/bin/env", "swiftc", "-parse", file.path])
        #expect(run.status == 0, "\(run.stderr)")
        let text = try String(contentsOf: file, encoding: .utf8)
        for route in ["carekit/v1/enroll", "carekit/v1/revisions?since=", "carekit/v1/revisions\")", "rel=\\\"next\\\"", "Bearer "] {
            #expect(text.contains(route), "the client does not use \(route)")
        }
    }

    @Test("Clients/CareKit/CareGateSurveys.swift parses, fetches forms from the route the server serves and records answers in the shapes the export reads")
    func surveysParse() async throws {
        let file = CommandLineTests.projectRoot.appendingPathComponent("Clients/CareKit/CareGateSurveys.swift")
        let run = try await CommandLineTests().run(["/usr/bin/env", "swiftc", "-parse", file.path])
        #expect(run.status == 0, "\(run.stderr)")
        let text = try String(contentsOf: file, encoding: .utf8)
        for used in ["carekit/v1/questionnaires", "\"url\"", "\"hash\"", "\"\(SurveyTask.questionnaireKey)\"", "\"\(SurveyTask.hashKey)\"",
                     "\"\(SurveyAnswers.responseKind)\"", "Bearer "] {
            #expect(text.contains(used), "the survey client does not use \(used)")
        }
    }
}
