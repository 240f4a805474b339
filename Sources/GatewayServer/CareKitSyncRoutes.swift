import CareStore
import Foundation
import Gateway
import HTTPTypes
import Hummingbird
import JSON

/// CareKit's sync API, the backend of an app's `OCKRemoteSynchronizable`:
///
/// - `POST /carekit/v1/enroll` `{"code": "KX7P2-M9QRT", "name": "Maria's iPhone", "app": "Heart Companion"}`
///   → `{"token", "deviceID", "patientID"}` (`name` and `app` optional: what the EHR is told recorded the outcomes)
/// - `GET /carekit/v1/revisions?since=<base64url of the vector's JSON>[&limit=N]` → `{"revisions":
///   [record], "knowledgeVector": <catch-up, on the last page>}`, `Link: <…>; rel="next"` for more
/// - `POST /carekit/v1/revisions` `{"revisions": [record…], "knowledgeVector": …}` → what merged
///
/// Sync calls carry `Authorization: Bearer <device token>` and reach only that device's patient.
struct CareKitSyncRoutes: Sendable {
    let server: GatewayServer

    var sync: CareKitSync { CareKitSync(store: server.store, pages: server.pullPages) }
    var enrollment: DeviceEnrollment { DeviceEnrollment(store: server.store) }

    func register(on router: Router<GatewayRequestContext>) {
        router.post("carekit/v1/enroll") { request, context in try await enroll(request, context) }
        router.get("carekit/v1/revisions") { request, context in try await perToken(request, context, event: AuditEvent.pull) { try await pull($0, $1, context) } }
        router.post("carekit/v1/revisions") { request, context in
            try await perToken(request, context, event: AuditEvent.push) { request, token in
                // Authenticated before the body is read: a stranger's body is never read. The
                // device's slot is taken before it too: a stalled body holds one on every gateway.
                let calls = server.deviceCalls
                let entered = try await Blocking.run { [enrollment] () throws -> (Device, CallSlot?)? in
                    guard let device = try enrollment.authenticate(token: token) else { return nil }
                    return (device, try calls.enter(device))
                }
                guard let (device, slot) = entered else { return refusedToken(context, event: AuditEvent.push) }
                guard let slot else {
                    audit(context, device, .update, AuditEvent.push, .refused, detail: "busy: another call of this device in flight")
                    return calls.busy
                }
                defer { Task { await Blocking.run { calls.leave(slot) } } }
                return try await push(request, device, context)
            }
        }
    }

    // MARK: Enrollment

    func enroll(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        // The attempt is taken before the body is read, and given back only for a right code.
        if let wait = try await server.throttle.reserve(context.client) {
            server.audit.note(entry(context, actor: .device("(enrolling)"), .create, AuditEvent.enroll, patientID: nil, .refused,
                                    detail: "too many wrong codes or tokens from this address"))
            return JSONBody.error(.tooManyRequests, "too many wrong codes or tokens from this address; try again later",
                                  headers: [.retryAfter: String(wait)])
        }
        let body: JSONValue
        switch await RequestBody.json(request, limit: server.limits.enrollBody) {
        case .success(let value): body = value
        case .failure(let refusal):
            server.audit.note(entry(context, actor: .device("(enrolling)"), .create, AuditEvent.enroll, patientID: nil, .refused, detail: "a body the gateway does not take"))
            return refusal.response
        }
        guard let code = body["code"]?.stringValue, code.count <= 64 else {
            server.audit.note(entry(context, actor: .device("(enrolling)"), .create, AuditEvent.enroll, patientID: nil, .refused, detail: "no code in the body"))
            return JSONBody.error(.badRequest, "expected {\"code\": \"<the code caregate enroll printed>\"}")
        }
        // What the device calls itself and its app: optional text, checked before the code is used up.
        var labels: [String: String] = [:]
        for field in ["name", "app"] where body[field] != nil {
            guard let label = body[field]?.stringValue, DeviceEnrollment.acceptedLabel(label) != nil else {
                server.audit.note(entry(context, actor: .device("(enrolling)"), .create, AuditEvent.enroll, patientID: nil, .refused, detail: "a \(field) the gateway does not take"))
                return JSONBody.error(.badRequest, EnrollmentError.invalidLabel(field).description)
            }
            labels[field] = label
        }
        do {
            let (name, app) = (labels["name"], labels["app"])
            let (device, token) = try await Blocking.run { try enrollment.redeem(code: code, name: name, app: app) }
            try await server.throttle.succeeded(context.client)
            audit(context, device, .create, AuditEvent.enroll, .success, detail: "enrolled")
            return JSONBody.response(.ok, "{\"token\":\(JSONBody.quoted(token)),\"deviceID\":\(JSONBody.quoted(device.id)),\"patientID\":\(JSONBody.quoted(device.patientID))}")
        } catch EnrollmentError.invalidCode {
            server.audit.note(entry(context, actor: .device("(enrolling)"), .create, AuditEvent.enroll, patientID: nil, .refused,
                                    detail: EnrollmentError.invalidCode.description))
            return JSONBody.error(.unauthorized, EnrollmentError.invalidCode.description)
        }
    }

    // MARK: Pull

    /// A sync call with its bearer token, counted against that token's requests in flight (so
    /// counting needs no store read; the handler authenticates).
    func perToken(_ request: Request, _ context: GatewayRequestContext, event: String,
                  _ handler: (Request, String) async throws -> Response) async throws -> Response {
        guard let token = Self.bearerToken(request) else { return refusedToken(context, event: event) }
        return try await server.perDevice.run(token, what: "device", refused: {
            // Refused before the token is checked: the entry names no device and no patient.
            server.audit.note(entry(context, actor: .device("(token not checked)"), Self.action(of: event), event, patientID: nil, .refused,
                                    detail: "too many calls in flight on one token (at most \(server.perDevice.limit))"))
        }) { try await handler(request, token) }
    }

    // MARK: Audit

    /// An entry of this request: from the client's address (after the trusted-proxy rule).
    func entry(_ context: GatewayRequestContext, actor: AuditEntry.Actor, _ action: AuditEntry.Action, _ event: String, patientID: String?,
               _ outcome: AuditEntry.Outcome, entities: [String] = [], detail: String? = nil) -> AuditEntry {
        AuditEntry(recorded: Date(), actor: actor, action: action, event: event, patientID: patientID, entities: entities,
                   source: context.client, outcome: outcome, detail: detail)
    }

    /// Notes a device's access to its patient's data.
    func audit(_ context: GatewayRequestContext, _ device: Device, _ action: AuditEntry.Action, _ event: String, _ outcome: AuditEntry.Outcome,
               entities: [String] = [], detail: String? = nil) {
        server.audit.note(entry(context, actor: .device(device.id), action, event, patientID: device.patientID, outcome, entities: entities, detail: detail))
    }

    /// A sync call without a valid token: noted (no patient is known) and answered 401.
    func refusedToken(_ context: GatewayRequestContext, event: String) -> Response {
        server.audit.note(entry(context, actor: .device("(no valid token)"), Self.action(of: event), event, patientID: nil, .refused,
                                detail: "no valid device token"))
        return Self.unauthorized
    }

    /// What a sync call does: a push updates, the rest read.
    static func action(of event: String) -> AuditEntry.Action { event == AuditEvent.push ? .update : .read }

    /// What a pull asks for, read from its query.
    struct PullQuery: Sendable {
        var since: KnowledgeVector
        var limit: Int
        var cursor: CareKitSync.PullCursor?
    }

    func pullQuery(_ request: Request) -> Result<PullQuery, Refusal> {
        let query = request.uri.queryParameters
        let since: KnowledgeVector
        switch Self.vector(fromQuery: query.get("since")) {
        case .success(let vector): since = vector
        case .failure(let refusal): return .failure(refusal)
        }
        let limit = min(max(query.get("limit").flatMap { Int($0) } ?? server.limits.pageSize, 1), server.limits.pageSize)
        var cursor: CareKitSync.PullCursor?
        if let text = query.get("cursor") {
            let parts = text.split(separator: ".").compactMap { Int($0) }
            guard parts.count == 2, parts.allSatisfy({ $0 >= 0 }) else { return .failure(Refusal(.badRequest, "cursor: expected the value a next link gave")) }
            cursor = CareKitSync.PullCursor(revision: parts[0], offset: parts[1])
        }
        return .success(PullQuery(since: since, limit: limit, cursor: cursor))
    }

    /// The token checked and the page read in one trip to a blocking thread (an up-to-date
    /// device, the common case, costs two indexed reads, or one statement on PostgreSQL): 401
    /// before any complaint about the query.
    func pull(_ request: Request, _ token: String, _ context: GatewayRequestContext) async throws -> Response {
        let asked = pullQuery(request)
        enum Answer: Sendable { case unauthorized, refused(Device, Refusal), busy(Device), page(Device, CareKitSync.PullPage, limit: Int) }
        let answer = try await Blocking.run { [sync, enrollment, calls = server.deviceCalls] () throws -> Answer in
            let since = if case .success(let query) = asked, query.cursor == nil { query.since } else { KnowledgeVector?.none }
            guard let (device, upToDate) = try enrollment.authenticate(token: token, since: since) else { return .unauthorized }
            switch asked {
            case .failure(let refusal): return .refused(device, refusal)
            case .success(let query):
                // Up to date: answered already, nothing held. Otherwise the pull holds a slot while it reads.
                var slot: CallSlot?
                if upToDate == nil {
                    guard let taken = try calls.enter(device) else { return .busy(device) }
                    slot = taken
                }
                defer { if let slot { calls.leave(slot) } }
                let page = try sync.pull(patientID: device.patientID, since: query.since, limit: query.limit, cursor: query.cursor, upToDate: upToDate)
                return .page(device, page, limit: query.limit)
            }
        }
        let (device, page, limit): (Device, CareKitSync.PullPage, Int)
        switch answer {
        case .unauthorized: return refusedToken(context, event: AuditEvent.pull)
        case .busy(let device):
            audit(context, device, .read, AuditEvent.pull, .refused, detail: "busy: another call of this device in flight")
            return server.deviceCalls.busy
        case .refused(let device, let refusal):
            audit(context, device, .read, AuditEvent.pull, .refused, detail: "a query the gateway does not take")
            return refusal.response
        case .page(let who, let read, let size): (device, page, limit) = (who, read, size)
        }
        audit(context, device, .read, AuditEvent.pull, .success, detail: "\(page.versions.count) versions")
        server.syncTimes.note(device.id)
        GatewayMetrics.shared.deviceSyncs.increment()
        GatewayMetrics.shared.pulls.increment()
        var body: [UInt8] = Array("{\"revisions\":[".utf8)
        body += page.bytes()
        body += Array("],\"knowledgeVector\":\(page.catchUp?.json ?? "null")}".utf8)
        var headers: HTTPFields = [:]
        if let next = page.next {
            let since = request.uri.queryParameters.get("since") ?? ""
            headers[HTTPField.Name("Link")!] = "</carekit/v1/revisions?since=\(since)&limit=\(limit)&cursor=\(next.revision).\(next.offset)>; rel=\"next\""
        }
        return JSONBody.response(.ok, body, headers: headers)
    }

    /// The `since` parameter; absent is the empty vector (a first pull).
    static func vector(fromQuery text: String?) -> Result<KnowledgeVector, Refusal> {
        guard let text, !text.isEmpty else { return .success(KnowledgeVector()) }
        do { return .success(try KnowledgeVector(base64URL: text)) } catch {
            return .failure(Refusal(.badRequest, "since: \(error)"))
        }
    }

    // MARK: Push

    func push(_ request: Request, _ device: Device, _ context: GatewayRequestContext) async throws -> Response {
        let body: JSONValue
        switch await RequestBody.json(request, limit: server.limits.syncBody) {
        case .success(let value): body = value
        case .failure(let refusal):
            audit(context, device, .update, AuditEvent.push, .refused, detail: "a body the gateway does not take")
            return refusal.response
        }
        let push: PushBody
        do { push = try PushBody.read(body) } catch {
            audit(context, device, .update, AuditEvent.push, .refused, detail: "\(error)")
            return Self.response(for: error)
        }
        let result: CareKitSync.PushResult
        let entities = Self.entities(of: push.records)
        // The device is checked again inside the merge's transaction: revoked meanwhile, it merges nothing.
        switch await server.pushes.push(patientID: device.patientID, records: push.records, deviceKnowledge: push.deviceKnowledge, deviceID: device.id) {
        case .success(let merged): result = merged
        case .failure(let error):
            let outcome: AuditEntry.Outcome = if case .store(.database) = error { .failed } else { .refused }
            audit(context, device, .update, AuditEvent.push, outcome, entities: entities, detail: "\(error)")
            return Self.response(for: error)
        }
        audit(context, device, .update, AuditEvent.push, .success, entities: entities, detail: "\(result.merged) versions merged")
        server.syncTimes.note(device.id)
        GatewayMetrics.shared.deviceSyncs.increment()
        GatewayMetrics.shared.pushes.increment()
        if result.merged > 0 { await server.outcomesWritten() }
        let conflicts = result.conflicts.map(JSONBody.quoted).joined(separator: ",")
        let resolutions = result.resolutions.map {
            "{\"taskID\":\(JSONBody.quoted($0.taskID)),\"occurrence\":\($0.occurrence),\"kept\":\"\($0.kept.uuidString)\",\"superseded\":\"\($0.superseded.uuidString)\",\"version\":\"\($0.version.uuid.uuidString)\"}"
        }.joined(separator: ",")
        return JSONBody.response(.ok, "{\"merged\":\(result.merged),\"conflicts\":[\(conflicts)],\"resolutions\":[\(resolutions)],\"knowledgeVector\":\(result.knowledge.json)}")
    }

    /// The entities a push names (`outcome/<version uuid>`), the first 100.
    static func entities(of records: [RevisionRecord]) -> [String] {
        var names: [String] = []
        for record in records {
            for entity in record.entities where names.count < 100 { names.append("\(entity.entityType.rawValue)/\(entity.version.uuid.uuidString)") }
        }
        return names
    }

    static func response(for error: SyncError) -> Response {
        switch error {
        case .pullFirst(let knowledge):
            return JSONBody.error(.conflict, error.description, extra: [("knowledgeVector", knowledge.json)])
        case .refused(let record, let entity, let field, _):
            var extra = [("field", JSONBody.quoted(field))]
            if let record { extra.append(("record", String(record))) }
            if let entity { extra.append(("entity", JSONBody.quoted(entity))) }
            return JSONBody.error(.badRequest, error.description, extra: extra)
        case .revoked:
            return unauthorized
        case .store(.database):
            return JSONBody.error(.internalServerError, "the store failed; nothing of this request was merged")
        case .store(let refusal):
            return JSONBody.error(.badRequest, "\(refusal); nothing of this request was merged")
        }
    }

    // MARK: Authentication

    static let unauthorized = JSONBody.error(.unauthorized, "a device token is required (Authorization: Bearer …, from POST /carekit/v1/enroll)",
                                             headers: [.wwwAuthenticate: "Bearer realm=\"caregate\""])

    /// The token of `Authorization: Bearer <token>`.
    static func bearerToken(_ request: Request) -> String? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return nil }
        let token = String(header.dropFirst("Bearer ".count)).trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}

/// A request refused before any work, with its response.
struct Refusal: Error {
    let response: Response

    init(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) {
        response = JSONBody.error(status, message, headers: headers)
    }

    /// 413, closing the connection: the rest of the body is not read (a keep-alive connection
    /// would read and drop it, however large).
    static func tooLarge(_ message: String) -> Refusal {
        Refusal(.contentTooLarge, message, headers: [.connection: "close"])
    }
}

/// Request bodies read up to a limit.
enum RequestBody {
    static func json(_ request: Request, limit: Int) async -> Result<JSONValue, Refusal> {
        let bytes: [UInt8]
        switch await Self.bytes(request, limit: limit) {
        case .success(let read): bytes = read
        case .failure(let refusal): return .failure(refusal)
        }
        do {
            return .success(try JSONValue.parse(bytes))
        } catch {
            return .failure(Refusal(.badRequest, "the body is not JSON: \(error)"))
        }
    }

    /// The body's bytes; 413 past `limit`, before reading it when its length is declared.
    static func bytes(_ request: Request, limit: Int) async -> Result<[UInt8], Refusal> {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            return .failure(.tooLarge("the body is \(length) bytes; at most \(limit) are accepted"))
        }
        do { return .success(Array(try await request.body.collect(upTo: limit).readableBytesView)) } catch {
            return .failure(.tooLarge("the body is larger than \(limit) bytes"))
        }
    }
}
