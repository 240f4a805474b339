import CareStore
import Foundation
import Gateway
import HTTPTypes
import Hummingbird

/// `POST /fhir/notify`: the EHR's rest-hook notifications (classic R4 Subscriptions, empty or
/// with the changed resource, also PUT to `/fhir/notify/Type/id`; and the Subscriptions
/// Backport's notification Bundles). Each one makes the patients it names (every enrolled patient
/// when it names none) due on the store's refresh schedule and is answered at once; the pull
/// happens in a refresh worker, of this gateway or another over the store. The EHR
/// authenticates with the token from the configuration.
struct NotificationRoutes: Sendable {
    let server: GatewayServer

    func register(on router: Router<GatewayRequestContext>) {
        for path in ["fhir/notify", "fhir/notify/:type/:id"] {
            router.post(RouterPath(path)) { request, context in try await notify(request, context) }
            router.put(RouterPath(path)) { request, context in try await notify(request, context) }
        }
    }

    func notify(_ request: Request, _ context: GatewayRequestContext) async throws -> Response {
        guard let expected = server.ehr?.notifyToken else {
            return JSONBody.error(.notFound, "notifications are not configured (ehr.notify in the configuration)")
        }
        // Wrong tokens count in the bucket wrong enrollment codes do.
        if let wait = try await server.throttle.reserve(context.client) {
            refused(context, "too many wrong codes or tokens from this address")
            return JSONBody.error(.tooManyRequests, "too many wrong codes or tokens from this address; try again later",
                                  headers: [.retryAfter: String(wait)])
        }
        guard Self.matches(request.headers[.authorization], token: expected) else {
            refused(context, "not the token from ehr.notify")
            return JSONBody.error(.unauthorized, "a notification needs the token from ehr.notify (Authorization: Bearer …)",
                                  headers: [.wwwAuthenticate: "Bearer realm=\"caregate-notify\""])
        }
        try await server.throttle.succeeded(context.client)
        let body: [UInt8]
        switch await RequestBody.bytes(request, limit: server.limits.notifyBody) {
        case .success(let bytes): body = bytes
        case .failure(let refusal):
            refused(context, "a body over the limit", by: expectedSender)
            return refusal.response
        }
        let notification: RestHookNotification
        do { notification = try RestHookNotification.read(body) } catch {
            refused(context, "a body that is not a notification", by: expectedSender)
            return JSONBody.error(.badRequest, error.description)
        }
        GatewayMetrics.shared.notifications.increment()
        audit(notification, context)
        if notification.kind != .status, let schedule = server.ehr?.schedule {
            // Kept in the store: whichever gateway's worker claims the patients first refreshes them, once.
            let named = notification.unattributed ? nil : notification.patients
            do { _ = try await Blocking.run { try schedule.requestRefresh(ehrIDs: named, now: Date()) } } catch {
                return JSONBody.error(.serviceUnavailable, "the notification could not be kept; send it again", headers: [.retryAfter: "5"])
            }
            server.activity.refreshSoon()
        }
        return JSONBody.response(.ok, #"{"resourceType":"OperationOutcome","issue":[{"severity":"information","code":"informational","diagnostics":"notification received"}]}"#)
    }

    /// Notes the notification against each patient it names (`Patient/<the EHR's id>`), or once
    /// without a patient when it names none.
    func audit(_ notification: RestHookNotification, _ context: GatewayRequestContext) {
        let actor = AuditEntry.Actor(kind: .ehr, id: expectedSender), now = Date()
        let named: [String?] = notification.patients.isEmpty ? [nil] : notification.patients.sorted().map { "Patient/\($0)" }
        let detail = notification.kind == .status ? "a status notification" : notification.unattributed ? "names changes of no one patient: every patient refreshed" : "refresh requested"
        server.audit.note(contentsOf: named.map {
            AuditEntry(recorded: now, actor: actor, action: .execute, event: AuditEvent.notification, patientID: $0, source: context.client,
                       outcome: .success, detail: detail)
        })
    }

    /// The EHR, as a notification that carried its token is entered.
    var expectedSender: String { server.ehr?.refresh.client.base ?? "(no EHR)" }

    /// Notes a notification refused before it named anyone (by a caller without the token, unless `by` says who).
    func refused(_ context: GatewayRequestContext, _ why: String, by sender: String = "(not authenticated)") {
        server.audit.note(AuditEntry(recorded: Date(), actor: .init(kind: .ehr, id: sender), action: .execute, event: AuditEvent.notification,
                                     patientID: nil, source: context.client, outcome: .refused, detail: why))
    }

    /// Whether the header is `Bearer <token>`.
    static func matches(_ header: String?, token: String) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let given = header.dropFirst("Bearer ".count).trimmingCharacters(in: .whitespaces)
        return SecretDigest.matches(given, secret: token)
    }
}
