import CareStore
import FHIRClient
import Foundation
import Gateway
@testable import GatewayServer
import GRDB
import Testing

/// A browser's side of the dashboard: libcurl with a cookie header kept by hand, no redirects followed.
struct DashboardBrowser {
    let server: RunningServer
    var session: String?

    func send(_ method: String, _ path: String, form: [(String, String)]? = nil) async throws -> (status: Int, headers: [String: String], html: String) {
        var headers: [(String, String)] = []
        if let session { headers.append(("Cookie", "caregate_session=\(session)")) }
        var body: [UInt8]?
        if let form {
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
            body = Array(form.map { "\(Self.encoded($0.0))=\(Self.encoded($0.1))" }.joined(separator: "&").utf8)
        }
        let response = try await server.client.send(HTTPRequest(method: method, url: "http://127.0.0.1:\(server.port)\(path)", headers: headers, body: body))
        return (response.status, response.headers, String(decoding: response.body, as: UTF8.self))
    }

    static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    /// The CSRF token in a page's forms.
    static func csrf(in html: String) -> String? {
        guard let range = html.range(of: "name=\"csrf\" value=\"") else { return nil }
        return String(html[range.upperBound...].prefix { $0 != "\"" })
    }
}

extension GatewayServerSuites {
@Suite("The operator's dashboard over HTTP")
struct DashboardRouteTests {
    static let adminToken = "dashboard-admin-4d1f9c"

    /// Two patients (one with a hostile name), a dead letter whose error holds markup, and an enrolled device.
    func fixture(_ backend: Backend, test: String = #function) throws -> (Backend.Store, deviceToken: String, dead: UUID)? {
        guard let (store, _) = try twoPatientStore(backend, test: test) else { return nil }
        let hostile = Patient(id: "Patient/x 1", name: PersonName(givenName: "<script>alert(1)</script>"), effectiveDate: Date(), timezone: .current)
        try store.add([.patient(hostile)])
        let dead = UUID(), pushed = UUID()
        try store.enqueue([OutboxItem(versionUUID: dead, entityID: "outcome-1", idempotencyKey: "urn:caregate:outcome|outcome-1", payload: []),
                           OutboxItem(versionUUID: pushed, entityID: "outcome-2", idempotencyKey: "urn:caregate:outcome|outcome-2", payload: [])])
        try store.markAttempt(dead, error: "422 <b>OperationOutcome</b>: Observation.subject is required", dead: true)
        try store.markPushed(pushed, location: "https://ehr.example.org/fhir/Observation/77/_history/1")
        let enrollment = DeviceEnrollment(store: store)
        let token = try enrollment.redeem(code: try enrollment.issueCode(patientID: "maria").code).token
        return (store, token, dead)
    }

    @Test("sign-in with the admin token sets an HttpOnly, SameSite=Strict cookie; pages escape PHI and forbid scripts; forms without the CSRF token are refused; retry and revoke work; sign-out ends the session", arguments: Backend.allCases)
    func dashboard(backend: Backend) async throws {
        guard let (store, deviceToken, dead) = try fixture(backend) else { return }
        let server = try await RunningServer(store: store, dashboard: DashboardAccess(adminToken: Self.adminToken, secureCookie: false))
        defer { Task { try? await server.stop() } }
        var browser = DashboardBrowser(server: server)

        // Signed out: every page sends to the sign-in page; a wrong token is 401.
        for path in ["/ui", "/ui?page=2", "/ui/outbox", "/ui/devices", "/ui/patients/maria"] {
            let page = try await browser.send("GET", path)
            #expect(page.status == 303 && page.headers["location"] == "/ui/login", "\(path)")
            // A patient's device token opens no page either: the dashboard is the operators'.
            let asDevice = try await server.send("GET", path, token: deviceToken)
            #expect(asDevice.status == 303 && asDevice.headers["location"] == "/ui/login", "\(path) with a device token")
        }
        #expect(try await browser.send("POST", "/ui/outbox/retry", form: [("version", dead.uuidString)]).status == 303)
        // Nor can a device send a dead letter again: the re-queue is an operator's.
        #expect(try await server.send("POST", "/ui/outbox/retry", token: deviceToken, json: #"{"version": "\#(dead.uuidString)"}"#).status == 303)
        #expect(try store.outboxCounts().failed == 1, "the dead letter stays where it is")
        #expect(try await browser.send("POST", "/ui/login", form: [("token", "wrong")]).status == 401)
        #expect(try await browser.send("GET", "/ui/login").html.contains("type=\"password\""))

        // Signed in.
        let login = try await browser.send("POST", "/ui/login", form: [("token", Self.adminToken)])
        #expect(login.status == 303 && login.headers["location"] == "/ui")
        let cookie = try #require(login.headers["set-cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/ui") && !cookie.contains("Secure"))
        browser.session = String(cookie.dropFirst("caregate_session=".count).prefix { $0 != ";" })

        let patients = try await browser.send("GET", "/ui")
        #expect(patients.status == 200)
        // One page: no pager; a page past the last (or not a number) shows the last, the first here.
        #expect(!patients.html.contains("class=\"pager\""))
        for odd in ["/ui?page=7", "/ui?page=x", "/ui?page=-1"] { #expect(try await browser.send("GET", odd).html == patients.html, "\(odd)") }
        #expect(patients.html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !patients.html.contains("<script"))
        #expect(patients.html.contains("href=\"/ui/patients/maria\""))
        #expect(patients.headers["content-security-policy"]?.contains("default-src 'none'") == true)
        #expect(patients.headers["cache-control"] == "no-store")
        #expect(try await browser.send("GET", "/ui/patients/maria").html.contains("class=\"week-strip\""))
        #expect(try await browser.send("GET", "/ui/patients/nobody").status == 404)
        // An imported patient's id holds a slash: the list links to it encoded, and the page opens.
        #expect(patients.html.contains("href=\"/ui/patients/Patient%2Fx%201\""))
        #expect(try await browser.send("GET", "/ui/patients/Patient%2Fx%201").html.contains("<h1>&lt;script&gt;alert(1)&lt;/script&gt;</h1>"))
        #expect(try await browser.send("GET", "/ui/style.css").status == 200)

        // The outbox: the dead letter with the EHR's answer escaped, the pushed item with its URL.
        let outbox = try await browser.send("GET", "/ui/outbox")
        #expect(outbox.html.contains("422 &lt;b&gt;OperationOutcome&lt;/b&gt;") && outbox.html.contains("Observation/77/_history/1"))
        let csrf = try #require(DashboardBrowser.csrf(in: outbox.html))
        // No token, or a wrong one: 403, nothing changes.
        #expect(try await browser.send("POST", "/ui/outbox/retry", form: [("version", dead.uuidString)]).status == 403)
        #expect(try await browser.send("POST", "/ui/outbox/retry", form: [("csrf", "forged"), ("version", dead.uuidString)]).status == 403)
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 1, failed: 1))
        let retried = try await browser.send("POST", "/ui/outbox/retry", form: [("csrf", csrf), ("version", dead.uuidString)])
        #expect(retried.status == 303 && retried.headers["location"] == "/ui/outbox")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 1, failed: 0))

        // Devices: revoking Maria's device ends its sync.
        let device = try #require(try store.devices(patientID: "maria").first)
        #expect(try await browser.send("GET", "/ui/devices").html.contains(device.id))
        #expect(try await server.send("GET", "/carekit/v1/revisions", token: deviceToken).status == 200)
        #expect(try await browser.send("POST", "/ui/devices/revoke", form: [("device", device.id)]).status == 403)
        #expect(try await browser.send("POST", "/ui/devices/revoke", form: [("csrf", csrf), ("device", device.id)]).status == 303)
        #expect(try await server.send("GET", "/carekit/v1/revisions", token: deviceToken).status == 401)
        #expect(try await browser.send("GET", "/ui/devices").html.contains("revoked"))

        // Imports: the log's runs, newest first; a run's loss report with its notes escaped.
        let run = try store.recordImport(ImportRun(startedAt: Date(), source: "bundle <b>.json", counts: ["files": 1, "skipped": 1],
            report: Array(#"{"notes":[{"kind":"skipped","resource":"CarePlan/x","message":"activity <i>2</i> has no schedule"}],"patients":[]}"#.utf8)))
        let imports = try await browser.send("GET", "/ui/imports")
        #expect(imports.status == 200 && imports.html.contains("href=\"/ui/imports/\(run)\"") && imports.html.contains("bundle &lt;b&gt;.json"))
        let detail = try await browser.send("GET", "/ui/imports/\(run)")
        #expect(detail.html.contains("activity &lt;i&gt;2&lt;/i&gt; has no schedule") && detail.html.contains("CarePlan/x"))
        #expect(try await browser.send("GET", "/ui/imports/999").status == 404)
        #expect(try await browser.send("GET", "/ui/imports/abc").status == 404)

        // Sign-out ends the session on the server, not only in the browser.
        let logout = try await browser.send("POST", "/ui/logout", form: [("csrf", csrf)])
        #expect(logout.status == 303 && logout.headers["set-cookie"]?.contains("Max-Age=0") == true)
        #expect(try await browser.send("GET", "/ui").status == 303)
    }

    @Test("a Secure cookie when served over TLS; wrong admin tokens from one address are refused with 429 past the limit, even the right one; no admin token, no /ui")
    func throttleAndAbsence() async throws {
        let (store, _, _) = try #require(try fixture(.sqlite))
        var limits = GatewayServer.Limits()
        limits.wrongCodes = 3
        let server = try await RunningServer(store: store, limits: limits, dashboard: DashboardAccess(adminToken: Self.adminToken, secureCookie: true))
        let browser = DashboardBrowser(server: server)
        // Served over TLS (or behind a TLS proxy), the cookie is Secure too.
        #expect(try await browser.send("POST", "/ui/login", form: [("token", Self.adminToken)]).headers["set-cookie"]?.hasSuffix("; Secure") == true)
        for _ in 0..<3 { #expect(try await browser.send("POST", "/ui/login", form: [("token", "guess")]).status == 401) }
        let blocked = try await browser.send("POST", "/ui/login", form: [("token", Self.adminToken)])
        #expect(blocked.status == 429 && Int(blocked.headers["retry-after"] ?? "") ?? 0 > 0)
        try await server.stop()

        let plain = try await RunningServer(store: store)
        defer { Task { try? await plain.stop() } }
        #expect(try await DashboardBrowser(server: plain).send("GET", "/ui").status == 404)
    }
}
}

extension GatewayServerSuites {
@Suite("Several gateways over one store")
struct SharedStoreTests {
    /// Two servers over one store file, each with a store object (and connection pool) of its
    /// own, as two processes would have.
    func twoGateways(_ backend: Backend, wrongCodes: Int = 5, test: String = #function) async throws -> (a: RunningServer, b: RunningServer, store: Backend.Store)? {
        guard let (store, _) = try twoPatientStore(backend, test: test) else { return nil }
        var limits = GatewayServer.Limits()
        limits.wrongCodes = wrongCodes
        let access = DashboardAccess(adminToken: DashboardRouteTests.adminToken, secureCookie: false)
        let a = try await RunningServer(store: store, limits: limits, dashboard: access)
        let b = try await RunningServer(store: try Backend.reopen(store), limits: limits, dashboard: access)
        return (a, b, store)
    }

    @Test("wrong codes sent to two gateways over one store count against one budget: five spread over both lock the address out of both, a right code too", arguments: Backend.allCases)
    func sharedAttempts(backend: Backend) async throws {
        guard let (a, b, _) = try await twoGateways(backend) else { return }
        for server in [a, b, a, b, a] {
            #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "BBBBB-BBBBB"}"#).status == 401)
        }
        let code = try DeviceEnrollment(store: a.store).issueCode(patientID: "john").code
        for server in [b, a] {
            let blocked = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#)
            #expect(blocked.status == 429 && Int(blocked.headers["retry-after"] ?? "") ?? 0 > 0)
        }
        let signIn = try await DashboardBrowser(server: b).send("POST", "/ui/login", form: [("token", DashboardRouteTests.adminToken)])
        #expect(signIn.status == 429, "sign-in shares the bucket, on every gateway")
        #expect(try a.store.devices(patientID: nil).isEmpty)
        try await a.stop()
        try await b.stop()
    }

    @Test("an operator signed in on one gateway is signed in on the other, signing out on either ends it, and the store keeps only the session id's hash", arguments: Backend.allCases)
    func sharedSessions(backend: Backend) async throws {
        guard let (a, b, store) = try await twoGateways(backend) else { return }
        let login = try await DashboardBrowser(server: a).send("POST", "/ui/login", form: [("token", DashboardRouteTests.adminToken)])
        let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first?.split(separator: "=").last.map(String.init))
        var onB = DashboardBrowser(server: b)
        onB.session = cookie
        let page = try await onB.send("GET", "/ui")
        #expect(page.status == 200, "the session opened on a is known to b")
        let csrf = try #require(DashboardBrowser.csrf(in: page.html))
        let kept = String(decoding: try Backend.everythingStored(store), as: UTF8.self)
        #expect(!kept.contains(cookie) && kept.contains(DashboardSessions.hash(cookie)))
        #expect(try await onB.send("POST", "/ui/logout", form: [("csrf", csrf)]).status == 303)
        var onA = DashboardBrowser(server: a)
        onA.session = cookie
        let after = try await onA.send("GET", "/ui")
        #expect(after.status == 303 && after.headers["location"] == "/ui/login", "signed out on b is signed out on a")
        try await a.stop()
        try await b.stop()
    }
}
}
