import CareStore
import Foundation
import Gateway
@testable import GatewayServer
import Testing

extension GatewayServerSuites {
/// Each kind of access over HTTP leaves exactly one entry, with the right actor, patient and
/// outcome; a refused attempt is entered with the patient it named, and never another patient's.
@Suite("The audit trail of accesses over HTTP")
struct AuditRouteTests {
    /// `kind actor-id action event patient outcome`, one line per entry.
    static func lines(_ store: Backend.Store, _ server: RunningServer) throws -> [String] {
        try server.gateway.audit.flush()
        return try store.auditEntries(AuditQuery()).map(\.entry).map {
            "\($0.actor.kind) \($0.action.rawValue) \($0.event) \($0.patientID ?? "-") \($0.outcome)"
        }
    }

    @Test("a device's enrollment, pull, push and form read, and refused tokens, codes and another patient's task", arguments: Backend.allCases)
    func device(backend: Backend) async throws {
        guard let (store, tasks) = try twoPatientStore(backend) else { return }
        // Repeats are counted for an hour: on a loaded machine this test has taken minutes.
        let server = try await RunningServer(store: store, auditRepeatWindow: 3600)
        defer { Task { try? await server.stop() } }
        let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code

        #expect(try await server.send("POST", "/carekit/v1/enroll", json: "not json").status == 400)
        #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "WRONG-CODE1"}"#).status == 401)
        let enrolled = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
        let token = try #require(enrolled.body?["token"]?.stringValue), deviceID = try #require(enrolled.body?["deviceID"]?.stringValue)
        // The second refusal from the same address within the minute is counted, not entered (below).
        #expect(try Self.lines(store, server) == ["device C carekit.enroll - refused", "device C carekit.enroll maria success"])

        var copy = DeviceCopy()
        try await copy.pull(from: server, token: token)
        #expect(try await server.send("GET", "/carekit/v1/revisions", token: "not-a-token").status == 401)
        #expect(try await server.send("GET", "/carekit/v1/revisions").status == 401)
        // Maria's device pushes an outcome of John's task: refused, entered under Maria (the device's patient), never John.
        let foreign = Outcome(taskUUID: tasks["john"]!.uuid, taskOccurrenceIndex: 0, values: [], effectiveDate: Date())
        let pushed = copy.vector.setting(UUID(), to: 1)
        let record = RevisionRecord(entities: [.outcome(foreign)], knowledgeVector: pushed.processes)
        let body = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(pushed.json)}"#
        #expect(try await server.send("POST", "/carekit/v1/revisions", token: token, json: body).status == 400)
        // Her own task's outcome: merged.
        let own = Outcome(taskUUID: tasks["maria"]!.uuid, taskOccurrenceIndex: 0, values: [], effectiveDate: Date())
        let ownRecord = RevisionRecord(entities: [.outcome(own)], knowledgeVector: pushed.processes)
        let ownBody = #"{"revisions": [\#(String(decoding: ownRecord.bytes(), as: UTF8.self))], "knowledgeVector": \#(pushed.json)}"#
        let merged = try await server.send("POST", "/carekit/v1/revisions", token: token, json: ownBody)
        #expect(merged.body?["merged"]?.numberValue == 1, "\(String(describing: merged.body))")
        #expect(try await server.send("GET", "/carekit/v1/questionnaires?url=http://example.org/Questionnaire/phq-9", token: token).status == 404)

        var lines = try Self.lines(store, server)
        #expect(Array(lines.dropFirst(2)) == [
            "device R carekit.pull maria success", "device R carekit.pull - refused",
            "device U carekit.push maria refused", "device U carekit.push maria success", "device R carekit.questionnaire maria refused",
        ], "\(lines)")
        // The repeats' counts, when their window closes (here: the recorder closes).
        try server.gateway.audit.flush(closing: true)
        lines = try Self.lines(store, server)
        #expect(Array(lines.dropFirst(7)) == ["device C carekit.enroll - refused", "device R carekit.pull - refused"], "\(lines)")
        let counted = try store.auditEntries(AuditQuery()).map(\.entry).suffix(2)
        #expect(counted.allSatisfy { $0.detail?.hasPrefix("1 more like this from 127.0.0.1 between ") == true }, "\(counted.map(\.detail))")
        #expect(!lines.contains { $0.contains("john") })
        let entries = try store.auditEntries(AuditQuery(actorID: deviceID)).map(\.entry)
        #expect(entries.count == 5 && entries.allSatisfy { $0.source == "127.0.0.1" })
        #expect(entries.first { $0.event == AuditEvent.push && $0.outcome == .success }?.entities == ["outcome/\(own.uuid.uuidString)"])
        #expect(entries.first { $0.event == AuditEvent.pull }?.detail?.hasSuffix(" versions") == true)
        #expect(try AuditChain.verify(store).break == nil)
    }

    @Test("an operator's patient page, lists, retry and revoke: one entry per patient shown, by the admin token's fingerprint", arguments: Backend.allCases)
    func dashboard(backend: Backend) async throws {
        guard let (store, tasks) = try twoPatientStore(backend) else { return }
        // A dead letter of Maria's: the retry names her.
        let outcome = Outcome(taskUUID: tasks["maria"]!.uuid, taskOccurrenceIndex: 0, values: [], effectiveDate: Date())
        try store.add([.outcome(outcome)])
        try store.enqueue([OutboxItem(versionUUID: outcome.uuid, entityID: outcome.id, idempotencyKey: "urn:caregate:outcome|\(outcome.id)", payload: [])])
        try store.markAttempt(outcome.uuid, error: "422", dead: true)
        let enrollment = DeviceEnrollment(store: store)
        let device = try enrollment.redeem(code: try enrollment.issueCode(patientID: "john").code).device
        let access = DashboardAccess(adminToken: "audit-admin-77", secureCookie: false)
        let server = try await RunningServer(store: store, dashboard: access)
        defer { Task { try? await server.stop() } }
        var browser = DashboardBrowser(server: server)
        let login = try await browser.send("POST", "/ui/login", form: [("token", "audit-admin-77")])
        browser.session = String(try #require(login.headers["set-cookie"]).dropFirst("caregate_session=".count).prefix { $0 != ";" })
        #expect(try Self.lines(store, server).isEmpty)

        _ = try await browser.send("GET", "/ui/patients/maria")
        #expect(try Self.lines(store, server) == ["operator R dashboard.patient maria success"])
        _ = try await browser.send("GET", "/ui/patients/nobody")
        _ = try await browser.send("GET", "/ui")
        let devices = try await browser.send("GET", "/ui/devices")
        let csrf = try #require(DashboardBrowser.csrf(in: devices.html))
        _ = try await browser.send("POST", "/ui/devices/revoke", form: [("csrf", csrf), ("device", device.id)])
        _ = try await browser.send("POST", "/ui/devices/revoke", form: [("csrf", csrf), ("device", "no-such\ndevice")])
        _ = try await browser.send("GET", "/ui/outbox")
        #expect(try await browser.send("POST", "/ui/outbox/retry", form: [("csrf", csrf), ("version", outcome.uuid.uuidString)]).status == 303)
        let lines = try Self.lines(store, server)
        #expect(Array(lines.dropFirst()) == [
            "operator R dashboard.patient - refused", "operator R dashboard.list john success", "operator R dashboard.list maria success",
            "operator R dashboard.list john success", "operator U device.revoke john success", "operator U device.revoke - refused",
            "operator R dashboard.list maria success", "operator E dashboard.retry maria success",
        ], "\(lines)")
        let entries = try store.auditEntries(AuditQuery()).map(\.entry)
        #expect(Set(entries.map(\.actor.id)) == [access.fingerprint] && access.fingerprint.count == "admin-".count + 12)
        #expect(!entries.contains { $0.actor.id.contains("audit-admin-77") || ($0.detail ?? "").contains("audit-admin-77") })
        // The device id from the form is kept as one entity, its line break not kept.
        #expect(entries.first { $0.event == AuditEvent.revoke && $0.outcome == .refused }?.entities == ["Device/no-such\u{FFFD}device"])
        #expect(entries.last?.entities == ["outcome/\(outcome.uuid.uuidString)"])
        #expect(try AuditChain.verify(store).break == nil)

        // A patient's page lists that patient's recent accesses, and none of another patient's.
        let maria = try await browser.send("GET", "/ui/patients/maria").html
        #expect(maria.contains("id=\"accesses\"") && maria.contains("dashboard.patient") && maria.contains(access.fingerprint))
        #expect(!maria.contains("device.revoke") && !maria.contains(device.id), "John's revoke is on Maria's page")
        let john = try await browser.send("GET", "/ui/patients/john").html
        #expect(john.contains("device.revoke") && john.contains("revoked"))
        #expect(!john.contains("the patient&#39;s page") && !john.contains("the patient's page"), "Maria's page view is on John's page")
    }
}
}
