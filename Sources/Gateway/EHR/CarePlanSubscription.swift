import CareStore
import FHIR
import FHIRClient
import Foundation

/// The R4 Subscriptions `caregate subscribe` creates on the EHR: one rest-hook per enrolled
/// patient on their CarePlans (`CarePlan?subject=Patient/x`), delivering the changed plan to the
/// gateway's `/fhir/notify` with the notification token in a header. Creating them again finds
/// the ones already there (same criteria and endpoint) and leaves them.
public struct CarePlanSubscription: Sendable {
    /// Where the EHR sends notifications: the gateway's `/fhir/notify` as the EHR reaches it.
    public var endpoint: String
    /// The token the EHR sends back in `Authorization: Bearer …`.
    public var token: String

    /// Subscriptions that notify `endpoint`, sending `token` back.
    public init(endpoint: String, token: String) {
        self.endpoint = endpoint
        self.token = token
    }

    /// What `ensure` did for one patient.
    public struct Outcome: Sendable, Equatable {
        /// The patient the Subscription is for.
        public var patient: EnrolledPatient
        /// Its criteria (`CarePlan?subject=Patient/maria-lopez`).
        public var criteria: String
        /// The Subscription on the server (`Subscription/12`).
        public var location: String?
        /// False when it was there already.
        public var created: Bool
    }

    /// The criteria of the patient's Subscription, by the patient's EHR id.
    public func criteria(for patient: EnrolledPatient) -> String { "CarePlan?subject=Patient/\(patient.ehrID)" }

    /// The Subscription resource for one patient.
    public func resource(for patient: EnrolledPatient) -> Element {
        var subscription = Element(resourceType: "Subscription")
        subscription.append(Element(name: "status", type: "code", value: "requested"))
        subscription.append(Element(name: "reason", type: "string", value: "CareGate: refresh the patient's CareKit care plan when the CarePlan changes"))
        subscription.append(Element(name: "criteria", type: "string", value: criteria(for: patient)))
        subscription.append(Element(name: "channel", type: "Subscription.channel", children: [
            Element(name: "type", type: "code", value: "rest-hook"),
            Element(name: "endpoint", type: "url", value: endpoint),
            Element(name: "payload", type: "code", value: "application/fhir+json"),
            Element(name: "header", type: "string", value: "Authorization: Bearer \(token)"),
        ]))
        return subscription
    }

    /// Creates the Subscriptions not on the server yet.
    public func ensure(on client: FHIRRESTClient, patients: [EnrolledPatient]) async throws(FHIRClientError) -> [Outcome] {
        let existing = try await client.search("Subscription", [("url", endpoint)])
        var outcomes: [Outcome] = []
        for patient in patients {
            let criteria = criteria(for: patient)
            if let found = existing.first(where: { $0.string("criteria") == criteria && $0.first("channel.endpoint")?.value == endpoint
                && ["requested", "active"].contains($0.string("status") ?? "") }) {
                outcomes.append(Outcome(patient: patient, criteria: criteria, location: found.string("id").map { "Subscription/\($0)" }, created: false))
                continue
            }
            let answer = try await client.create(resource(for: patient))
            let location = answer.location ?? answer.resource?.string("id").map { "Subscription/\($0)" }
            outcomes.append(Outcome(patient: patient, criteria: criteria, location: location, created: true))
        }
        return outcomes
    }
}
