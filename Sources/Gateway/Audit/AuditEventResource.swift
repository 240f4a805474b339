import CareStore
import FHIR
import Foundation
import JSON

/// An audit entry as a FHIR R4 AuditEvent, shaped after IHE's Basic Audit Log Patterns: the
/// RESTful type with the interaction as subtype (and the gateway's own event name beside it),
/// the action, when, the outcome, the actor as the requesting agent with its network address,
/// the gateway as the source, and the patient and the entities reached as entities.
///
/// ```swift
/// let event = AuditEventResource(observer: "caregate@ward-3").json(row)   // {"resourceType": "AuditEvent", ...}
/// ```
public struct AuditEventResource: Sendable {
    /// The gateway that observed the access (`source.observer.display`, `source.site`).
    public var observer: String

    /// AuditEvents observed by `observer` (a host name, an instance).
    public init(observer: String) {
        self.observer = observer
    }

    /// The systems the gateway codes with.
    public enum System {
        /// Its event names (`carekit.pull`) as a subtype beside the REST interaction.
        public static let event = "urn:caregate:audit-event"
        /// Who acted, by kind: `urn:caregate:actor:device`, `…:operator`, `…:command`, `…:worker`, `…:ehr`.
        public static func actor(_ kind: AuditEntry.ActorKind) -> String { "urn:caregate:actor:\(kind.rawValue)" }
        /// The entities a device or command named (`outcome/<version uuid>`, `Device/<id>`).
        public static let entity = "urn:caregate:entity"
    }

    /// The resource's id: from the entry's hash, so the same entry is the same AuditEvent
    /// however often it is exported or sent (a push is `PUT AuditEvent/<id>`).
    public static func id(of row: ChainedAuditEntry) -> String { "caregate-" + row.hash.prefix(40) }

    /// The entry as an outbox item for the EHR (`ehr.audit`): keyed by its AuditEvent's id, under
    /// a version UUID made from its hash, so it is queued once and sent as `PUT AuditEvent/<id>`.
    public func outboxItem(_ row: ChainedAuditEntry) -> OutboxItem {
        let id = Self.id(of: row)
        var bytes = [UInt8](repeating: 0, count: 16)
        for (i, pair) in zip(0..<16, stride(from: 0, to: 32, by: 2)) {
            let start = row.hash.utf8.index(row.hash.utf8.startIndex, offsetBy: pair)
            bytes[i] = UInt8(String(row.hash.utf8[start..<row.hash.utf8.index(start, offsetBy: 2)])!, radix: 16) ?? 0
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x80  // a custom (version 8) UUID
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let uuid = UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                               bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
        var item = OutboxItem(versionUUID: uuid, entityID: "audit-\(row.sequence)", idempotencyKey: OutboxItem.auditKeyPrefix + id, payload: json(row).bytes())
        item.soleCopy = true  // no export makes it again: a retried dead letter is queued again
        return item
    }

    /// The AuditEvent of one kept entry.
    public func json(_ row: ChainedAuditEntry) -> JSONValue {
        let entry = row.entry
        var members: [(String, JSONValue)] = [
            ("resourceType", "AuditEvent"), ("id", .string(Self.id(of: row))),
            ("type", Self.coding("http://terminology.hl7.org/CodeSystem/audit-event-type", "rest", "Restful Operation")),
            ("subtype", .array([Self.coding("http://hl7.org/fhir/restful-interaction", Self.interaction(entry.action), nil),
                                Self.coding(System.event, entry.event, nil)])),
            ("action", .string(entry.action.rawValue)),
            ("recorded", .string(FHIRDateTime.lexical(entry.recorded, in: TimeZone(identifier: "UTC")!, fractionalSeconds: true))),
            ("outcome", .string(Self.outcomeCode(entry.outcome))),
        ]
        if let detail = entry.detail { members.append(("outcomeDesc", .string(detail))) }
        members.append(("agent", .array([agent(entry), gatewayAgent])))
        members.append(("source", .object([
            ("site", .string(observer)), ("observer", .object([("display", .string("CareGate \(observer)"))])),
            ("type", .array([Self.coding("http://terminology.hl7.org/CodeSystem/security-source-type", "4", "Application Server")])),
        ])))
        var entities: [JSONValue] = []
        if let patient = entry.patientID { entities.append(Self.patientEntity(patient)) }
        entities += entry.entities.map(Self.dataEntity)
        if !entities.isEmpty { members.append(("entity", .array(entities))) }
        return .object(members)
    }

    /// The requesting agent: who, by kind and id, and from which address.
    func agent(_ entry: AuditEntry) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("type", .object([("coding", .array([Self.agentType(entry.actor.kind)]))])),
            ("who", .object([("identifier", .object([("system", .string(System.actor(entry.actor.kind))), ("value", .string(entry.actor.id))]))])),
            ("requestor", .bool(true)),
        ]
        if let source = entry.source {
            let isAddress = source.contains(":") || source.split(separator: ".").count == 4 && source.allSatisfy { $0.isNumber || $0 == "." }
            members.append(("network", .object([("address", .string(source)), ("type", .string(isAddress ? "2" : "1"))])))
        }
        return .object(members)
    }

    /// The gateway as the agent that served the access (BALP's server agent).
    var gatewayAgent: JSONValue {
        .object([
            ("type", .object([("coding", .array([Self.coding("http://dicom.nema.org/resources/ontology/DCM", "110153", "Source Role ID")]))])),
            ("who", .object([("display", .string("CareGate \(observer)"))])),
            ("requestor", .bool(false)),
        ])
    }

    /// BALP's agent types: a person at the dashboard or a shell is the human user; a device,
    /// worker or EHR is the requesting application.
    static func agentType(_ kind: AuditEntry.ActorKind) -> JSONValue {
        switch kind {
        case .operator, .command: coding("http://terminology.hl7.org/CodeSystem/v3-ParticipationType", "IRCP", "information recipient")
        case .device, .worker, .ehr: coding("http://dicom.nema.org/resources/ontology/DCM", "110152", "Destination Role ID")
        }
    }

    static func patientEntity(_ patient: String) -> JSONValue {
        .object([
            ("what", .object([("reference", .string(patient.contains("/") ? patient : "Patient/\(patient)"))])),
            ("type", coding("http://terminology.hl7.org/CodeSystem/audit-entity-type", "1", "Person")),
            ("role", coding("http://terminology.hl7.org/CodeSystem/object-role", "1", "Patient")),
        ])
    }

    static func dataEntity(_ name: String) -> JSONValue {
        .object([
            ("what", .object([("identifier", .object([("system", .string(System.entity)), ("value", .string(name))]))])),
            ("type", coding("http://terminology.hl7.org/CodeSystem/audit-entity-type", "2", "System Object")),
            ("role", coding("http://terminology.hl7.org/CodeSystem/object-role", "4", "Domain Resource")),
        ])
    }

    /// The REST interaction an action is.
    static func interaction(_ action: AuditEntry.Action) -> String {
        switch action {
        case .create: "create"
        case .read: "read"
        case .update: "update"
        case .delete: "delete"
        case .execute: "operation"
        }
    }

    /// R4's outcome codes: 0 success, 4 minor failure (refused), 8 serious failure.
    static func outcomeCode(_ outcome: AuditEntry.Outcome) -> String {
        switch outcome {
        case .success: "0"
        case .refused: "4"
        case .failed: "8"
        }
    }

    static func coding(_ system: String, _ code: String, _ display: String?) -> JSONValue {
        var members: [(String, JSONValue)] = [("system", .string(system)), ("code", .string(code))]
        if let display { members.append(("display", .string(display))) }
        return .object(members)
    }
}
