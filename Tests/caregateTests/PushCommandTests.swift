import CareStore
import Foundation
import Testing

@Suite("caregate push and status")
struct PushCommandTests {
    let cli = CommandLineTests()

    @Test("a dry run queues and shows what would be sent; an unreachable server leaves the outcome queued and exits 1; status shows the outbox")
    func pushWithoutServer() async throws {
        let path = cli.temporaryPath("push.sqlite")
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", path, "--tz", "America/New_York"])
        // The app records a walk.
        let store = try SQLiteCarePlanStore(path: path)
        let walk = try #require(store.fetchTasks(EntityQuery(ids: ["CarePlan/maria-lopez-home-care/229065009"])).first)
        let outcome = Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.boolean(true))])
        try store.add([.outcome(outcome)])
        let dry = try await cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--store", path, "--dry-run"])
        #expect(dry.status == 0)
        #expect(dry.stdout.contains("would create (unless an Observation with its identifier exists): Observation urn:caregate:outcome|Patient%2Fmaria-lopez/\(outcome.id)"))
        #expect(dry.stdout.contains("dry run: 1 newly queued"))
        let status = try await cli.caregate(["status", "--store", path])
        #expect(status.stdout == "outbox: 1 queued, 0 pushed, 0 failed\n")
        let down = try await cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--store", path, "--retry-attempts", "2"])
        #expect(down.status == 1)
        #expect(down.stdout.contains("0 newly queued, 0 pushed, 0 refused, 0 deferred") == false)
        #expect(down.stdout.contains("deferred") || down.stderr.contains("error"))
        let after = try await cli.caregate(["status", "--store", path])
        #expect(after.stdout.hasPrefix("outbox: 1 queued, 0 pushed, 0 failed\n"))
        // The failed run is in the audit trail, by the OS user, after the import's entry.
        let trail = try SQLiteCarePlanStore(path: path).auditEntries(AuditQuery()).map(\.entry)
        #expect(trail.map { "\($0.actor.kind) \($0.event) \($0.outcome)" } == ["command command.import success", "command command.push failed"], "\(trail)")
    }
}

@Suite("caregate push in the audit trail", .serialized)
struct PushTrailTests {
    let cli = CommandLineTests()

    /// Maria's demo bundle as John's: every `maria-lopez` id renamed, the medication requests left out.
    func johnsBundle() throws -> String {
        let demo = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json")
        let text = try String(contentsOf: demo, encoding: .utf8).replacingOccurrences(of: "maria-lopez", with: "john-doe")
        var bundle = try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        bundle["entry"] = (bundle["entry"] as? [[String: Any]] ?? []).filter { ($0["resource"] as? [String: Any])?["resourceType"] as? String != "MedicationRequest" }
        let path = cli.temporaryPath("john-doe-bundle.json")
        try JSONSerialization.data(withJSONObject: bundle).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Walks recorded for occurrences `occurrences` of the patient's walking task.
    func walks(_ store: SQLiteCarePlanStore, _ patient: String, _ occurrences: ClosedRange<Int>) throws {
        let walk = try #require(store.fetchTasks(EntityQuery(ids: ["CarePlan/\(patient)-home-care/229065009"])).first)
        try store.add(occurrences.map { .outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: $0, values: [OutcomeValue(.boolean(true))])) })
    }

    /// The trail's push entries: `actor-kind event outcome patient entities`.
    func pushEntries(_ path: String) throws -> [String] {
        try SQLiteCarePlanStore(path: path).auditEntries(AuditQuery()).map(\.entry).filter { $0.event == "ehr.push" || $0.event == "command.push" }
            .map { "\($0.actor.kind) \($0.event) \($0.outcome) \($0.patientID ?? "-") \($0.entities.count)" }
    }

    @Test("a push run enters, per patient, the outcomes it sent; a run stopped partway (a later outcome of a type the EHR does not list) enters what it had sent before the failed run")
    func perPatient() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        let proxy = try FaultProxy(upstream: ehr.port)
        let path = cli.temporaryPath("push-trail.sqlite")
        for bundle in ["FHIRSamples/bundle/maria-lopez-demo-bundle.json", try johnsBundle()] {
            let imported = try await cli.caregate(["import", bundle, "--store", path, "--tz", "America/New_York"])
            #expect(imported.status == 0, "\(imported.stderr)")
        }
        let store = try SQLiteCarePlanStore(path: path)
        try walks(store, "maria-lopez", 1...6)
        try walks(store, "john-doe", 1...6)
        let pushed = try await cli.caregate(["push", "--to", proxy.base, "--store", path])
        #expect(pushed.status == 0, "\(pushed.stdout) \(pushed.stderr)")
        #expect(try pushEntries(path) == ["command ehr.push success Patient/john-doe 6", "command ehr.push success Patient/maria-lopez 6"])

        // Twelve more walks queued, then a dose, which the EHR's statement no longer lists: the
        // run sends the ten walks it claims first and stops at the claim holding the dose.
        try walks(store, "maria-lopez", 7...12)
        try walks(store, "john-doe", 7...12)
        #expect(try await cli.caregate(["push", "--to", proxy.base, "--store", path, "--dry-run"]).status == 0)
        let metformin = try #require(store.fetchTasks(EntityQuery(ids: ["MedicationRequest/metformin/dosage-1"])).first)
        try store.add([.outcome(Outcome(taskUUID: metformin.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.double(500), kind: "dose", units: "mg")]))])
        try proxy.configure(["drop_types": ["MedicationAdministration"]])
        // The site sends doses as MedicationAdministrations.
        let site = cli.temporaryPath("medicationrequest.yaml")
        try """
            caregate-mapping: 1
            resource: MedicationRequest
            extends: builtin:medicationrequest.yaml
            export-as:
              resource: MedicationAdministration
              medication-system: http://www.nlm.nih.gov/research/umls/rxnorm
            """.write(toFile: site, atomically: true, encoding: .utf8)
        let stopped = try await cli.caregate(["push", "--to", proxy.base, "--store", path, "--batch-size", "1", "--mappings", site])
        #expect(stopped.status != 0)
        #expect(stopped.stderr.contains("MedicationAdministration"), "\(stopped.stderr)")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 3, pushed: 22, failed: 0))
        let entries = try pushEntries(path).dropFirst(2)
        #expect(entries.last == "command command.push failed - 0", "\(entries)")
        let sent = entries.dropLast()
        #expect(sent.allSatisfy { $0.hasPrefix("command ehr.push success Patient/") } && sent.count >= 1 && sent.count <= 2, "\(entries)")
        #expect(sent.map { Int($0.split(separator: " ").last!)! }.reduce(0, +) == 10, "\(entries)")
        // Each entry names only its own patient's outcomes.
        for row in try store.auditEntries(AuditQuery()).map(\.entry).suffix(sent.count + 1).dropLast() {
            let patient = try #require(row.patientID).replacingOccurrences(of: "/", with: "%2F")
            #expect(row.entities.allSatisfy { $0.contains("|\(patient)/") }, "\(row.entities)")
        }
    }
}

@Suite("caregate import --from and the authentication options")
struct ServerOptionTests {
    let cli = CommandLineTests()

    @Test("files and --from exclude each other; --from needs --patient; the SMART options need a client id and one key")
    func usage() async throws {
        let cases: [([String], String)] = [
            (["import"], "give FHIR files or directories, --from URL --patient ID, or --bulk-from URL"),
            (["import", "--from", "http://127.0.0.1:9/fhir"], "--from needs --patient ID"),
            (["import", "x.json", "--from", "http://127.0.0.1:9/fhir", "--patient", "p"], "give either files or --from, not both"),
            (["import", "x.json", "--patient", "p"], "--patient needs --from URL"),
            (["push", "--to", "http://127.0.0.1:9/fhir", "--smart-client-id", "c"], "--smart-client-id needs the private key"),
            (["push", "--to", "http://127.0.0.1:9/fhir", "--smart-key", "k.pem"], "the --smart-* options and --token-endpoint need --smart-client-id"),
            (["push", "--to", "http://127.0.0.1:9/fhir", "--smart-client-id", "c", "--smart-key", "k.pem", "--token-file", "t"], "choose one way to authenticate"),
        ]
        for (arguments, message) in cases {
            let run = try await cli.caregate(arguments)
            #expect(run.status == 64, "\(arguments)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
    }

    @Test("an unreadable key and an unreachable server are errors that name them, and nothing is imported")
    func failures() async throws {
        let store = cli.temporaryPath("from.sqlite")
        let key = cli.temporaryPath("not-a-key.pem")
        try "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWJ1dC1ub3QtYS1rZXk=\n-----END PRIVATE KEY-----\n".write(toFile: key, atomically: true, encoding: .utf8)
        let badKey = try await cli.caregate(["import", "--from", "http://127.0.0.1:9/fhir", "--patient", "p", "--store", store,
                                       "--smart-client-id", "c", "--smart-key", key])
        #expect(badKey.status == 1)
        #expect(badKey.stderr.contains("\(key): not a PEM RSA or P-384 private key"), "\(badKey.stderr)")
        #expect(!badKey.stderr.contains("c2VjcmV0"), "the key's contents must not be echoed")
        let down = try await cli.caregate(["import", "--from", "http://127.0.0.1:9/fhir", "--patient", "maria-lopez", "--store", store, "--retry-attempts", "2"])
        #expect(down.status == 1)
        #expect(down.stderr.contains("http://127.0.0.1:9/fhir: Patient/maria-lopez: "), "\(down.stderr)")
        #expect(down.stderr.contains("nothing was imported"))
        let after = try SQLiteCarePlanStore(path: store)
        #expect(try after.fetchPatients().isEmpty)
    }

    @Test("proxies come from the environment: with http_proxy set, requests to the EHR go through the proxy, as absolute URLs")
    func proxyFromEnvironment() async throws {
        // scripted_server.py (the client tests' fixture) plays the proxy and logs what it is asked.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-proxy-env-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let rules = directory.appendingPathComponent("rules.json"), log = directory.appendingPathComponent("log.jsonl")
        try Data(#"[{"path": "http://ehr.invalid/fhir/metadata", "responses": [{"status": 200, "body": {"resourceType": "CapabilityStatement", "status": "active", "kind": "instance", "fhirVersion": "4.0.1", "format": ["json"], "date": "2026-11-21", "rest": [{"mode": "server"}]}}]}]"#.utf8).write(to: rules)
        try Data().write(to: log)
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        proxy.arguments = ["python3", CommandLineTests.projectRoot.appendingPathComponent("Tests/FHIRClientTests/Fixtures/scripted_server.py").path, rules.path, log.path]
        let pipe = Pipe()
        proxy.standardOutput = pipe
        proxy.standardError = FileHandle.nullDevice
        try proxy.run()
        defer { kill(proxy.processIdentifier, SIGKILL); proxy.waitUntilExit() }
        let port = String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let run = try await cli.caregate(["import", "--from", "http://ehr.invalid/fhir", "--patient", "p", "--store", cli.temporaryPath("proxy.sqlite"), "--retry-attempts", "1"],
                                   environment: ["http_proxy": "http://127.0.0.1:\(port)", "no_proxy": ""])
        let requests = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
        #expect(requests.first?.contains(#""path": "http://ehr.invalid/fhir/metadata""#) == true, "\(requests)")
        // The CapabilityStatement says nothing of CarePlans: refused clearly, nothing imported.
        #expect(run.status == 1)
        #expect(run.stderr.contains("http://ehr.invalid/fhir: Patient/p: the server cannot search CarePlans"), "\(run.stderr)")
    }
}
