import CareCharts
import CarePages
import CareStore
import Gateway
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Who may open the dashboard: the admin token's digest (from the configuration, separate from
/// device tokens), and whether session cookies are marked `Secure` (served over TLS, or behind a
/// TLS proxy).
public struct DashboardAccess: Sendable {
    let tokenDigest: [UInt8]
    public var secureCookie: Bool
    /// A session unused this long is signed out.
    public var idleTimeout: TimeInterval = 30 * 60

    public init(adminToken: String, secureCookie: Bool) {
        tokenDigest = SecretDigest.of(adminToken)
        self.secureCookie = secureCookie
    }

    func admits(_ token: String) -> Bool { SecretDigest.matches(token, tokenDigest) }

    /// The operator as the audit trail names them: `admin-` and the first 12 hex digits of the
    /// admin token's SHA-256 (which token, never the token).
    var fingerprint: String { "admin-" + tokenDigest.prefix(6).map { String($0, radix: 16).leftPadded(to: 2) }.joined() }
}

/// Signed-in operators: a random session id (the cookie's value) and its CSRF token, kept in the
/// store (`AccessLedger`) under the id's SHA-256 hash, so that every gateway over one store knows
/// the session and a copy of the database signs no one in.
struct DashboardSessions: Sendable {
    let ledger: any AccessLedger
    let idleTimeout: TimeInterval

    /// A new session's id and CSRF token.
    func open(now: Date = Date()) async throws -> (id: String, csrf: String) {
        let (id, csrf) = (Self.randomToken(), Self.randomToken())
        let ledger = ledger
        try await Blocking.run { try ledger.openSession(idHash: Self.hash(id), csrf: csrf, now: now) }
        return (id, csrf)
    }

    /// The session's CSRF token when the id is known and not idle too long (its clock restarts).
    func csrf(for id: String, now: Date = Date()) async throws -> String? {
        let (ledger, idleTimeout) = (ledger, idleTimeout)
        return try await Blocking.run { try ledger.touchSession(idHash: Self.hash(id), idleTimeout: idleTimeout, now: now) }
    }

    func close(_ id: String) async throws {
        let ledger = ledger
        try await Blocking.run { try ledger.closeSession(idHash: Self.hash(id)) }
    }

    /// What the store keeps of a session id: its SHA-256, hex.
    static func hash(_ id: String) -> String {
        SecretDigest.of(id).map { String($0, radix: 16).leftPadded(to: 2) }.joined()
    }

    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<4).map { _ in String(generator.next() as UInt64, radix: 16).leftPadded(to: 16) }.joined()
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

/// `/ui`: the operator's dashboard. Pages are server-rendered HTML (`CarePages`) behind a
/// sign-in with the admin token; the session lives in an HttpOnly, SameSite=Strict cookie and
/// every form carries the session's CSRF token. Responses are never cached and forbid scripts,
/// framing and loads from anywhere but the gateway.
struct DashboardRoutes: Sendable {
    let server: GatewayServer
    let access: DashboardAccess
    let sessions: DashboardSessions
    static let cookie = "caregate_session"
    /// Largest form body (bytes).
    static let formLimit = 4 << 10

    func register(on router: Router<GatewayRequestContext>) {
        router.get("ui/style.css") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/css; charset=utf-8", .cacheControl: "max-age=3600"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: DashboardFrame.stylesheet)))
        }
        router.get("ui/login") { _, _ in Self.html(.ok, DashboardFrame.login(message: nil)) }
        router.post("ui/login") { request, context in try await login(request, context) }
        router.post("ui/logout") { request, _ in try await signedIn(request, form: true) { _, _ in try await logout(request) } }
        router.get("ui") { request, context in
            let number = request.uri.queryParameters.get("page").flatMap { Int($0) } ?? 1
            return try await signedIn(request) { pages, _ in try await patients(pages, page: number, context) }
        }
        router.get("ui/patients/:id") { request, context in
            // Store ids of imported patients hold a slash (Patient/maria-lopez): links encode it.
            let id = context.parameters.get("id").flatMap { $0.removingPercentEncoding } ?? ""
            return try await signedIn(request) { pages, _ in try await patient(id, pages, context) }
        }
        router.get("ui/outbox") { request, context in try await signedIn(request) { pages, _ in try await outbox(pages, message: nil, context) } }
        router.post("ui/outbox/retry") { request, context in try await signedIn(request, form: true) { pages, form in try await retry(form, pages, context) } }
        router.get("ui/imports") { request, _ in try await signedIn(request) { pages, _ in try await imports(pages) } }
        router.get("ui/imports/:id") { request, context in
            let id = context.parameters.get("id").flatMap { Int64($0) }
            return try await signedIn(request) { pages, _ in try await importRun(id, pages) }
        }
        router.get("ui/devices") { request, context in try await signedIn(request) { pages, _ in try await devices(pages, context) } }
        router.post("ui/devices/revoke") { request, context in try await signedIn(request, form: true) { _, form in try await revoke(form, context) } }
    }

    /// Notes the signed-in operator's access to each of `patients` (one entry each; none named: one entry without a patient).
    func audit(_ context: GatewayRequestContext, _ action: AuditEntry.Action, _ event: String, patients: [String], entities: [String] = [],
               _ outcome: AuditEntry.Outcome = .success, detail: String) {
        let actor = AuditEntry.Actor(kind: .operator, id: access.fingerprint), now = Date()
        let named: [String?] = patients.isEmpty ? [nil] : Array(Set(patients)).sorted()
        server.audit.note(contentsOf: named.map {
            AuditEntry(recorded: now, actor: actor, action: action, event: event, patientID: $0, entities: entities, source: context.client,
                       outcome: outcome, detail: detail)
        })
    }

    /// Runs `page` for a signed-in operator (for forms, with the body read and its CSRF token
    /// checked); anyone else is sent to the sign-in page.
    func signedIn(_ request: Request, form: Bool = false,
                  _ page: @Sendable (DashboardPages, [String: String]) async throws -> Response) async throws -> Response {
        guard let id = Self.cookieValue(request), let csrf = try await sessions.csrf(for: id) else {
            return Self.redirect("/ui/login")
        }
        var fields: [String: String] = [:]
        if form {
            switch await RequestBody.bytes(request, limit: Self.formLimit) {
            case .success(let body): fields = Self.formFields(body)
            case .failure: return Self.html(.contentTooLarge, Self.message("The form is larger than \(Self.formLimit) bytes."))
            }
            guard let given = fields["csrf"], SecretDigest.matches(given, secret: csrf) else {
                return Self.html(.forbidden, Self.message("The form's CSRF token is missing or wrong: reload the page and try again."))
            }
        }
        return try await page(DashboardPages(frame: DashboardFrame(csrf: csrf), calendar: Calendar.current), fields)
    }

    func login(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // Sign-in shares the enrollment codes' bucket; the attempt is taken before the body is read.
        if let wait = try await server.throttle.reserve(context.client) {
            return Self.html(.tooManyRequests, DashboardFrame.login(message: "Too many wrong codes or tokens from this address: try again in \(wait) seconds."),
                             headers: [.retryAfter: String(wait)])
        }
        guard case .success(let body) = await RequestBody.bytes(request, limit: Self.formLimit),
              let token = Self.formFields(body)["token"], access.admits(token) else {
            return Self.html(.unauthorized, DashboardFrame.login(message: "That is not the admin token."))
        }
        try await server.throttle.succeeded(context.client)
        let session = try await sessions.open()
        var cookie = "\(Self.cookie)=\(session.id); Path=/ui; HttpOnly; SameSite=Strict"
        if access.secureCookie { cookie += "; Secure" }
        return Self.redirect("/ui", headers: [.setCookie: cookie])
    }

    func logout(_ request: Request) async throws -> Response {
        if let id = Self.cookieValue(request) { try await sessions.close(id) }
        return Self.redirect("/ui/login", headers: [.setCookie: "\(Self.cookie)=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"])
    }

    /// A page rendered from the store, off the cooperative threads (the store blocks).
    func page(_ render: @escaping @Sendable (GatewayServer.Store) throws -> String) async throws -> Response {
        let store = server.store
        return Self.html(.ok, try await Blocking.run { try render(store) })
    }

    func patients(_ pages: DashboardPages, page number: Int, _ context: GatewayRequestContext) async throws -> Response {
        try await page { store in
            let devices = try store.devices(patientID: nil)
            var list = try store.read { try PatientOverview.page(number, in: $0, devices: devices, now: Date()) }
            list.rows = try PatientOverview.withLastPushes(list.rows, from: store)
            audit(context, .read, AuditEvent.dashboardList, patients: list.rows.map(\.patient.id), detail: "patients, page \(number)")
            return pages.patients(list)
        }
    }

    func patient(_ id: String, _ pages: DashboardPages, _ context: GatewayRequestContext) async throws -> Response {
        do {
            return try await page { store in
                let devices = try store.devices(patientID: id)
                var dashboard = try store.read { try PatientDashboard(patientID: id, now: Date(), calendar: pages.calendar, devices: devices, in: $0) }
                dashboard.accesses = try store.auditEntries(AuditQuery(patientID: id, limit: 20))
                audit(context, .read, AuditEvent.dashboardPatient, patients: [id], detail: "the patient's page")
                return pages.patient(dashboard)
            }
        } catch PageError.noSuchPatient {
            audit(context, .read, AuditEvent.dashboardPatient, patients: [], .refused, detail: "no such patient")
            return Self.html(.notFound, Self.message("No patient with that id in the store."))
        }
    }

    func outbox(_ pages: DashboardPages, message: String?, _ context: GatewayRequestContext) async throws -> Response {
        try await page { store in
            var overview = try OutboxOverview(store)
            try store.read { try overview.naming(in: $0) }
            let named = overview.owners.values.map(\.patientID)
            if !named.isEmpty { audit(context, .read, AuditEvent.dashboardList, patients: named, detail: "outbox") }
            return pages.outbox(overview, message: message)
        }
    }

    /// Takes one dead letter out so the push worker exports and sends its outcome again, and
    /// wakes the worker.
    func retry(_ form: [String: String], _ pages: DashboardPages, _ context: GatewayRequestContext) async throws -> Response {
        guard let version = form["version"].flatMap(UUID.init(uuidString:)) else {
            return Self.html(.badRequest, Self.message("The form names no outcome version."))
        }
        let store = server.store
        let (gone, owner) = try await Blocking.run {
            (try store.forgetFailed(versions: [version]), try store.read { try OutboxOverview.owners(of: [version], in: $0) }[version]?.patientID)
        }
        audit(context, .execute, AuditEvent.dashboardRetry, patients: owner.map { [$0] } ?? [], entities: ["outcome/\(version.uuidString)"],
              gone > 0 ? .success : .refused, detail: gone > 0 ? "sent again" : "not a dead letter")
        if gone > 0 { await server.outcomesWritten() }
        return Self.redirect("/ui/outbox")
    }

    func imports(_ pages: DashboardPages) async throws -> Response {
        try await page { store in pages.imports(try store.importRuns(limit: 200)) }
    }

    func importRun(_ id: Int64?, _ pages: DashboardPages) async throws -> Response {
        let store = server.store
        guard let id, let run = try await Blocking.run({ try store.importRun(id: id) }) else {
            return Self.html(.notFound, Self.message("No import run with that id."))
        }
        return Self.html(.ok, pages.importRun(run))
    }

    func devices(_ pages: DashboardPages, _ context: GatewayRequestContext) async throws -> Response {
        try await page { store in
            let names = Dictionary(try store.fetchPatients().map { ($0.id, $0.name.displayName) }, uniquingKeysWith: { a, _ in a })
            let devices = try store.devices(patientID: nil)
            if !devices.isEmpty { audit(context, .read, AuditEvent.dashboardList, patients: devices.map(\.patientID), detail: "devices") }
            return pages.devicesPage(devices, names: names)
        }
    }

    func revoke(_ form: [String: String], _ context: GatewayRequestContext) async throws -> Response {
        guard let device = form["device"], !device.isEmpty else { return Self.html(.badRequest, Self.message("The form names no device.")) }
        let store = server.store
        let patient = try await Blocking.run { () throws -> String? in
            let patient = try store.device(id: device)?.patientID
            return try store.revokeDevice(id: device, at: Date()) ? patient : nil
        }
        audit(context, .update, AuditEvent.revoke, patients: patient.map { [$0] } ?? [], entities: ["Device/\(device)"],
              patient == nil ? .refused : .success, detail: patient == nil ? "no such device, or revoked already" : "revoked")
        return Self.redirect("/ui/devices")
    }

    // MARK: HTTP pieces

    /// What every dashboard response carries: no caching of PHI, no scripts, no framing, nothing
    /// loaded from elsewhere.
    static let headers: HTTPFields = [
        .cacheControl: "no-store",
        .contentSecurityPolicy: "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        HTTPField.Name("X-Content-Type-Options")!: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "no-referrer",
    ]

    static func html(_ status: HTTPResponse.Status, _ html: String, headers extra: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "text/html; charset=utf-8"
        fields.append(contentsOf: extra)
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    static func redirect(_ location: String, headers extra: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.location] = location
        fields.append(contentsOf: extra)
        return Response(status: .seeOther, headers: fields)
    }

    /// A short page for refusals (the text is plain, escaped by the frame).
    static func message(_ text: String) -> String {
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>CareGate</title><link rel=\"stylesheet\" href=\"/ui/style.css\"></head>"
            + "<body><main><p>\(HTMLText.escaped(text))</p><p><a href=\"/ui\">Back to the dashboard</a></p></main></body></html>"
    }

    static func cookieValue(_ request: Request) -> String? {
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == cookie { return String(parts[1]).trimmingCharacters(in: .whitespaces) }
            }
        }
        return nil
    }

    /// `application/x-www-form-urlencoded` fields (the first of a repeated name wins).
    static func formFields(_ body: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ s: Substring) -> String? { s.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decoded(parts[0]), fields[name] == nil else { continue }
            fields[name] = parts.count > 1 ? decoded(parts[1]) ?? "" : ""
        }
        return fields
    }
}
