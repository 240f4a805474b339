import CareStore
import FHIR
import Gateway
import JSON
import Foundation
import GRDB
import Testing

/// `caregate audit list` and `caregate audit verify` over a store's trail, as an auditor runs them.
@Suite("caregate audit")
struct AuditCommandTests {
    let cli = CommandLineTests()
    static let start = Date(timeIntervalSinceReferenceDate: 817_000_000)

    func store() throws -> (SQLiteCarePlanStore, String) {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-audit-\(UUID().uuidString).sqlite").path
        let store = try SQLiteCarePlanStore(path: path)
        try store.record([
            AuditEntry(recorded: Self.start, actor: .init(kind: .device, id: "device-7f3a"), action: .read, event: "carekit.pull", patientID: "Patient/maria-lopez",
                       source: "203.0.113.9", outcome: .success, detail: "41 versions"),
            AuditEntry(recorded: Self.start.addingTimeInterval(60), actor: .init(kind: .device, id: "device-0b1c"), action: .update, event: "carekit.push",
                       patientID: "Patient/sam-rivera", entities: ["Outcome/1"], source: "198.51.100.2", outcome: .refused, detail: "another patient's task\u{1B}[2J"),
            AuditEntry(recorded: Self.start.addingTimeInterval(120), actor: .init(kind: .command, id: "nurse"), action: .read, event: "command.report",
                       patientID: "Patient/maria-lopez", outcome: .success),
        ])
        return (store, path)
    }

    @Test("list filters by patient, actor and time, as text (control characters escaped) or JSON lines")
    func list() async throws {
        let (_, path) = try store()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let maria = try await cli.caregate(["audit", "list", "--store", path, "--patient", "Patient/maria-lopez"])
        #expect(maria.status == 0)
        #expect(maria.stdout.split(separator: "\n").map { $0.split(separator: " ").prefix(5).joined(separator: " ") }
                == ["#1 2026-11-22T00:26:40Z device device-7f3a R", "#3 2026-11-22T00:28:40Z command nurse R"], "\(maria.stdout)")
        #expect(maria.stdout.contains("carekit.pull Patient/maria-lopez from 203.0.113.9: success (41 versions)"))
        let sam = try await cli.caregate(["audit", "--store", path, "--actor", "device-0b1c"])
        #expect(sam.stdout.contains("Patient/sam-rivera [Outcome/1] from 198.51.100.2: refused") && !sam.stdout.contains("\u{1B}"), "\(sam.stdout)")
        let late = try await cli.caregate(["audit", "list", "--store", path, "--since", "2026-11-22T00:27:00Z", "--json"])
        let objects = try late.stdout.split(separator: "\n").map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        #expect(objects.map { $0["sequence"] as? Int } == [2, 3] && objects.first?["patient"] as? String == "Patient/sam-rivera")
        // A date alone is its midnight in UTC.
        #expect(try await cli.caregate(["audit", "list", "--store", path, "--since", "2026-11-22", "--json"]).stdout.split(separator: "\n").count == 3)
        #expect(try await cli.caregate(["audit", "list", "--store", path, "--until", "2026-11-22", "--json"]).stdout.isEmpty)
        let bad = try await cli.caregate(["audit", "list", "--store", path, "--since", "yesterday"])
        #expect(bad.status != 0 && bad.stderr.contains("--since must be an instant"))
    }

    @Test("verify says the trail holds, and after an entry is edited behind the store's back exits 1 naming it")
    func verify() async throws {
        let (_, path) = try store()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let holds = try await cli.caregate(["audit", "verify", "--store", path])
        #expect(holds.status == 0 && holds.stdout.hasPrefix("the audit trail holds: 3 entries"), "\(holds.stdout)\(holds.stderr)")
        try await DatabaseQueue(path: path).write { try $0.execute(sql: "UPDATE audit_entry SET outcome = 'success' WHERE sequence = 2") }
        let broken = try await cli.caregate(["audit", "verify", "--store", path])
        #expect(broken.status == 1 && broken.stderr.contains("does not hold after 1 entries: entry 2: its fields do not give its hash"), "\(broken.stderr)")
    }
}

/// Each command that reads or writes a patient's data leaves one entry per patient, naming the
/// OS user and the command line.
@Suite("Commands in the audit trail")
struct CommandAuditTests {
    let cli = CommandLineTests()

    /// The trail as `kind actor action event patient outcome` lines, through `caregate audit list --json`.
    func trail(_ store: String) async throws -> [String] {
        let listed = try await cli.caregate(["audit", "list", "--store", store, "--json"])
        return try listed.stdout.split(separator: "\n").map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return ["actorKind", "actor", "action", "event", "patient", "outcome"].map { object[$0] as? String ?? "-" }.joined(separator: " ")
        }
    }

    @Test("import, report, export, store export, store events, enroll and devices revoke: one entry each, by the OS user")
    func commands() async throws {
        let store = cli.temporaryPath("audit-commands.sqlite"), output = cli.temporaryPath("audit-out.json")
        defer { for path in [store, output] { try? FileManager.default.removeItem(atPath: path) } }
        let user = CommandAudit.userName(), maria = "Patient/maria-lopez"
        var expected: [String] = []
        func step(_ arguments: [String], status: Int32 = 0, adds: [String]) async throws {
            let run = try await cli.caregate(arguments + ["--store", store])
            #expect(run.status == status, "\(arguments): \(run.stderr)")
            expected += adds.map { "command \(user) \($0)" }
            let got = try await trail(store)
            #expect(got == expected, "after \(arguments): \(got)")
        }
        try await step(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--tz", "America/New_York"], adds: ["U command.import \(maria) success"])
        try await step(["report", "--patient", maria, "--from", "2026-11-16", "--to", "2026-11-23", "-o", output], adds: ["R command.report \(maria) success"])
        try await step(["report", "--patient", "nobody", "--from", "2026-11-16", "--to", "2026-11-23", "-o", output], status: 1,
                       adds: ["R command.report nobody refused"])
        try await step(["export", "--include-imported", "-o", output + ".ndjson"], adds: ["R command.export \(maria) success"])
        try await step(["store", "export", "--carekit", "-o", output], adds: ["R command.store-export \(maria) success"])
        try await step(["store", "events", "--from", "2026-11-16", "--to", "2026-11-23"], adds: ["R command.store-events \(maria) success"])
        try await step(["enroll", "--patient", maria], adds: ["C command.enroll \(maria) success"])
        try await step(["devices", "revoke", "no-such-device"], status: 1, adds: ["U command.devices-revoke - refused"])
        let listed = try await cli.caregate(["audit", "list", "--store", store, "--patient", maria])
        #expect(listed.stdout.contains("caregate report --patient Patient/maria-lopez --from 2026-11-16"), "\(listed.stdout)")
        #expect(try await cli.caregate(["audit", "verify", "--store", store]).stdout.hasPrefix("the audit trail holds: 8 entries"))
        try await exportedEvents(store)
    }

    /// `caregate audit export`: valid R4 AuditEvents in BALP's shape, the same ids each time, codes from the R4 code systems.
    func exportedEvents(_ store: String) async throws {
        let file = cli.temporaryPath("audit-events.ndjson")
        defer { try? FileManager.default.removeItem(atPath: file) }
        let exported = try await cli.caregate(["audit", "export", "--format", "ndjson", "--store", store, "-o", file, "--observer", "ward-3"])
        #expect(exported.status == 0 && exported.stderr.contains("exported 8 AuditEvents"), "\(exported.stderr)")
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o600)
        let lines = String(decoding: try FileBytes.read(file), as: UTF8.self).split(separator: "\n")
        let events = try lines.map { try FHIRJSONReader().read(String($0)).resource }
        for event in events { #expect(ResourceValidator().validate(event).isEmpty, "\(ResourceValidator().validate(event))") }
        let report = try #require(events.first { $0.first("subtype")?.string("code") == "read" && $0.children(named: "subtype").last?.string("code") == "command.report" })
        #expect(report.string("action") == "R" && report.string("outcome") == "0" && report.first("type.code")?.value == "rest")
        #expect(report.first("entity.what.reference")?.value == "Patient/maria-lopez" && report.first("entity.role.code")?.value == "1")
        #expect(report.first("agent.who.identifier.value")?.value == CommandAudit.userName() && report.first("agent.requestor")?.value == "true")
        #expect(report.first("source.site")?.value == "ward-3")
        let refused = try #require(events.first { $0.children(named: "subtype").last?.string("code") == "command.devices-revoke" })
        #expect(refused.string("outcome") == "4" && refused.first("entity") == nil)
        // Exported again: the same resources, id for id.
        let again = try await cli.caregate(["audit", "export", "--store", store, "--patient", "Patient/maria-lopez", "--observer", "ward-3"])
        let ids = try again.stdout.split(separator: "\n").map { try FHIRJSONReader().read(String($0)).resource.string("id") }
        #expect(ids.count == 6 && Set(ids).isSubset(of: Set(events.map { $0.string("id") })))
        // Every code from an R4 code system is one that system defines (read from ../shared).
        let definitions = "../shared/fhir-r4/definitions"
        guard FileManager.default.fileExists(atPath: definitions) else { return print("SKIPPED AuditEvent codes against the R4 code systems: ../shared is not present") }
        var defined: [String: Set<String>] = [:]
        for name in ["audit-event-type", "restful-interaction", "audit-entity-type", "object-role", "audit-source-type", "v3-ParticipationType"] {
            let system = try JSONValue.parse(try FileBytes.read("\(definitions)/CodeSystem-\(name).json"))
            func codes(_ concepts: [JSONValue]) -> [String] { concepts.flatMap { [$0["code"]?.stringValue ?? ""] + codes($0["concept"]?.arrayValue ?? []) } }
            defined[system["url"]?.stringValue ?? name] = Set(codes(system["concept"]?.arrayValue ?? []))
        }
        var checked = 0
        func visit(_ element: Element) {
            if let system = element.string("system"), let code = element.string("code"), let known = defined[system] {
                #expect(known.contains(code), "\(system)#\(code)")
                checked += 1
            }
            element.children.forEach(visit)
        }
        events.forEach(visit)
        #expect(checked >= 8 * 5, "\(checked) codes checked")
    }
}
