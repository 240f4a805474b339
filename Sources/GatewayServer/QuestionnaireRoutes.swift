import CareStore
import Foundation
import Gateway
import HTTPTypes
import Hummingbird
import Mapping

/// The forms a device's survey tasks ask, for an app to present (ResearchKitOnFHIR builds its
/// `ORKTask` from one):
///
/// - `GET /carekit/v1/questionnaires?url=<url|version>[&hash=<digest>]` → the Questionnaire as
///   FHIR JSON: the content `hash` names (a task's `userInfo["caregate.questionnaire.hash"]`),
///   else the newest kept of that url and version.
///
/// Only the device's own patient's forms are found; another patient's is a 404 like a form no
/// one has, so a device learns nothing of other patients.
struct QuestionnaireRoutes: Sendable {
    let server: GatewayServer
    let sync: CareKitSyncRoutes

    func register(on router: Router<GatewayRequestContext>) {
        router.get("carekit/v1/questionnaires") { request, context in
            try await sync.perToken(request, context, event: AuditEvent.questionnaire) { try await questionnaire($0, $1, context) }
        }
    }

    /// Longest `url` and `hash` read (a canonical is a URL; a hash is 16 hex digits).
    static let longestURL = 2048, longestHash = 64

    func questionnaire(_ request: Request, _ token: String, _ context: GatewayRequestContext) async throws -> Response {
        let query = request.uri.queryParameters
        let hash = query.get("hash")
        let asked = query.get("url").flatMap { $0.utf8.count <= Self.longestURL ? Canonical($0) : nil }
        enum Answer: Sendable { case unauthorized, found(Device, StoredQuestionnaire), missing(Device) }
        let answer = try await Blocking.run { [enrollment = sync.enrollment, store = server.store] () throws -> Answer in
            guard let device = try enrollment.authenticate(token: token) else { return .unauthorized }
            guard let asked, (hash?.utf8.count ?? 0) <= Self.longestHash else { return .missing(device) }
            let kept = try store.questionnaires(of: device.patientID, url: asked.url, version: asked.version)
            guard let form = hash.map({ hash in kept.first { $0.digest == hash } }) ?? kept.first else { return .missing(device) }
            return .found(device, form)
        }
        switch answer {
        case .unauthorized:
            return sync.refusedToken(context, event: AuditEvent.questionnaire)
        case .missing(let device) where asked == nil:
            sync.audit(context, device, .read, AuditEvent.questionnaire, .refused, detail: "no url asked")
            return JSONBody.error(.badRequest, "expected ?url=<the task's userInfo[\"caregate.questionnaire\"]> (at most \(Self.longestURL) bytes)")
        case .missing(let device):
            sync.audit(context, device, .read, AuditEvent.questionnaire, .refused, detail: "no such form for this patient")
            return JSONBody.error(.notFound, "this patient has no Questionnaire \(asked!)\(hash.map { " with hash \($0)" } ?? "")")
        case .found(let device, let form):
            sync.audit(context, device, .read, AuditEvent.questionnaire, .success, entities: ["Questionnaire/\(form.digest)"])
            var response = JSONBody.response(.ok, form.resource)
            response.headers[.contentType] = "application/fhir+json"
            return response
        }
    }
}
