import Foundation
import JSON

/// Why a notification body was refused.
public struct RestHookNotificationError: Error, Sendable, CustomStringConvertible {
    /// Why, in words (no part of the body is echoed).
    public var reason: String
    public var description: String { reason }
}

/// What an EHR's rest-hook notification says changed, in the three shapes R4 servers send:
/// an empty POST (a classic Subscription without payload), the changed resource itself (a
/// classic Subscription with payload, POSTed or PUT to `endpoint/Type/id`), or the R4
/// Subscriptions Backport's notification Bundle (`history`, first entry a `Parameters` or
/// R4B `SubscriptionStatus`, with `id-only` or `full-resource` content).
public struct RestHookNotification: Sendable, Equatable {
    /// What sort of notification it is.
    public enum Kind: String, Sendable {
        /// Something changed; the body does not say what (an empty ping).
        case ping
        /// Resources changed.
        case event
        /// A backport handshake, heartbeat or status answer: nothing changed.
        case status
    }

    /// What sort of notification it is.
    public var kind: Kind
    /// The EHR Patient ids the changed resources belong to.
    public var patients: Set<String> = []
    /// A change whose patient the body does not tell (a ping, an event on a resource with no
    /// patient reference): every enrolled patient is refreshed.
    public var unattributed = false

    /// A notification as read.
    public init(kind: Kind, patients: Set<String> = [], unattributed: Bool = false) {
        self.kind = kind
        self.patients = patients
        self.unattributed = unattributed
    }

    /// Reads a notification body (FHIR JSON, or nothing). Read as JSON, not as R4 resources: a
    /// backport notification may carry R4B's `SubscriptionStatus`, which R4 does not define.
    public static func read(_ body: [UInt8]) throws(RestHookNotificationError) -> RestHookNotification {
        guard body.contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { return RestHookNotification(kind: .ping, unattributed: true) }
        let resource: JSONValue
        do { resource = try JSONValue.parse(body) } catch {
            throw RestHookNotificationError(reason: "the notification is not JSON: \(error)")
        }
        guard let type = resource["resourceType"]?.stringValue else {
            throw RestHookNotificationError(reason: "the notification is not a FHIR resource (no resourceType)")
        }
        let entries = resource["entry"]?.arrayValue ?? []
        if type == "Bundle", resource["type"]?.stringValue == "history", let status = entries.first?["resource"],
           ["Parameters", "SubscriptionStatus"].contains(status["resourceType"]?.stringValue ?? "") {
            return backport(status: status, resources: entries.dropFirst().compactMap { $0["resource"] })
        }
        var notification = RestHookNotification(kind: .event)
        notification.add(resource)
        return notification
    }

    /// A backport notification: the status resource's type and events, and the full resources after it.
    static func backport(status: JSONValue, resources: [JSONValue]) -> RestHookNotification {
        let type: String?
        var events: [(focus: String?, context: [String])] = []
        if status["resourceType"]?.stringValue == "Parameters" {
            let parameters = status["parameter"]?.arrayValue ?? []
            func named(_ names: [String], in list: [JSONValue]) -> [JSONValue] { list.filter { names.contains($0["name"]?.stringValue ?? "") } }
            type = named(["type"], in: parameters).first?["valueCode"]?.stringValue
            for event in named(["notification-event", "notificationEvent"], in: parameters) {
                let parts = event["part"]?.arrayValue ?? []
                events.append((named(["focus"], in: parts).first?["valueReference"]?["reference"]?.stringValue,
                               named(["additional-context", "additionalContext"], in: parts).compactMap { $0["valueReference"]?["reference"]?.stringValue }))
            }
        } else {
            type = status["type"]?.stringValue
            for event in status["notificationEvent"]?.arrayValue ?? [] {
                events.append((event["focus"]?["reference"]?.stringValue,
                               (event["additionalContext"]?.arrayValue ?? []).compactMap { $0["reference"]?.stringValue }))
            }
        }
        guard type == "event-notification" else { return RestHookNotification(kind: .status) }
        var notification = RestHookNotification(kind: .event)
        for resource in resources { notification.add(resource) }
        for event in events {
            let named = ([event.focus].compactMap { $0 } + event.context).compactMap(patientID(in:))
            let inBundle = resources.contains { resource in
                event.focus.map { $0.hasSuffix("\(resource["resourceType"]?.stringValue ?? "")/\(resource["id"]?.stringValue ?? "")") } ?? false
            }
            if named.isEmpty && !inBundle { notification.unattributed = true }
            notification.patients.formUnion(named)
        }
        if events.isEmpty && resources.isEmpty { notification.unattributed = true }
        return notification
    }

    /// Adds the patient a changed resource belongs to (itself, or its subject or patient).
    mutating func add(_ resource: JSONValue) {
        if resource["resourceType"]?.stringValue == "Patient", let id = resource["id"]?.stringValue {
            patients.insert(id)
            return
        }
        let reference = ["subject", "patient", "for", "beneficiary"].lazy.compactMap { resource[$0]?["reference"]?.stringValue }.first
        if let id = reference.flatMap(Self.patientID(in:)) { patients.insert(id) } else { unattributed = true }
    }

    /// `x` for `Patient/x`, `https://ehr/fhir/Patient/x` or `Patient/x/_history/2`; nil for other references.
    static func patientID(in reference: String) -> String? {
        // Split over bytes, not characters: staging runs this for every resource that names a patient.
        var parts = reference.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        if parts.count >= 4, parts[parts.count - 2].elementsEqual("_history".utf8) { parts.removeLast(2) }
        guard parts.count >= 2, parts[parts.count - 2].elementsEqual("Patient".utf8), let id = parts.last, !id.isEmpty else { return nil }
        return String(Substring(id))
    }
}
