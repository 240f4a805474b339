import Foundation
import CareStore
import FHIR

/// Where a store entry came from: enough to find the FHIR resource again and to tell whether it
/// changed (pushes refer back to it; re-imports compare the hash).
public struct SourceRecord: Sendable, Hashable {
    /// `CarePlan/maria-lopez-home-care`.
    public var reference: String
    /// The file (or server) it was read from.
    public var origin: String
    public var versionID: String?
    /// FNV-1a 64 of the resource's compact JSON, hex.
    public var contentHash: String
    /// The mapping rule that made the entry (`careplan.yaml#activity-detail`).
    public var rule: String

    /// FNV-1a 64 of a resource's compact JSON, hex.
    public static func contentHash(of resource: Element) -> String {
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in FHIRJSONWriter(pretty: false).write(resource) { fnv = (fnv ^ UInt64(b)) &* 0x100_0000_01b3 }
        return String(fnv, radix: 16)
    }

    /// The fields as CareKit `userInfo` entries (`remoteID` holds `reference`).
    public var userInfo: [String: String] {
        var info = ["caregate.source": origin, "caregate.resource": reference, "caregate.hash": contentHash, "caregate.rule": rule]
        if let versionID { info["caregate.versionId"] = versionID }
        return info
    }
}

/// A care plan to create or update, with the store id of its patient.
public struct MappedCarePlan: Sendable {
    public var plan: CarePlan
    public var patientID: String
    public var source: SourceRecord
}

/// A task and the store id of its care plan.
public struct MappedTask: Sendable {
    public var task: CareTask
    public var carePlanID: String
    public var source: SourceRecord
    /// Whether the schedule starts at the rule's anchor (the plan's period, the request's date)
    /// rather than where the resource's own timing says (`boundsPeriod.start`, a Period's start,
    /// a dateTime): an activity new to a plan the store holds then starts when it first appears.
    public var startsAtAnchor = false

    public init(task: CareTask, carePlanID: String, source: SourceRecord, startsAtAnchor: Bool = false) {
        self.task = task
        self.carePlanID = carePlanID
        self.source = source
        self.startsAtAnchor = startsAtAnchor
    }
}

/// A contact and the store id of its care plan (nil for none).
public struct MappedContact: Sendable {
    public var contact: Contact
    public var carePlanID: String?
    public var source: SourceRecord
}

/// A recorded result, still to be matched to a task (by group) and occurrence (by date).
public struct MappedOutcome: Sendable {
    /// Codes; the task whose `groupIdentifier` is one of them records it.
    public var taskGroups: [String]
    public var date: Date
    public var values: [OutcomeValue]
    /// Where it came from, its content hash left for `recorded()`.
    public var source: SourceRecord
    /// The resource it came from, hashed when the outcome is stored.
    var resource: Element?
    /// Set while the date and values are still to be worked out (`completed()`).
    var pending: PendingOutcome?

    init(taskGroups: [String], date: Date, values: [OutcomeValue], source: SourceRecord) {
        self.taskGroups = taskGroups
        self.date = date
        self.values = values
        self.source = source
    }

    /// An outcome whose date and values wait until a task is found for it.
    init(taskGroups: [String], pending: PendingOutcome, source: SourceRecord) {
        self.init(taskGroups: taskGroups, date: .distantPast, values: [], source: source)
        self.pending = pending
    }

    /// Whether the date and values are worked out. An engine told which groups its tasks record
    /// (`MappingEngine.defersUnrecordedOutcomes`) leaves them for outcomes no task mapped before
    /// them records; the import completes those it finds a task for.
    public var isComplete: Bool { pending == nil }

    /// The outcome with its date and values, and what working them out noted (no date, no value,
    /// an expression that failed); nil when it gives no outcome. A complete one is itself.
    public func completed() -> (outcome: MappedOutcome?, notes: [ImportNote]) {
        guard let pending else { return (self, []) }
        var notes = MappingNotes()
        let context = pending.context
        let mapper = OutcomeMapper(rule: pending.shared.rule, context: context)
        var outcome: MappedOutcome?
        do {
            outcome = try mapper.dated(context, groups: taskGroups, record: source, notes: &notes)
        } catch {
            notes.failed(context.source, nil, pending.shared.rule.name, error)
        }
        outcome?.resource = resource
        return (outcome, notes.all)
    }

    /// The source record with its content hash: made only for outcomes that are stored (most
    /// mapped outcomes match no task).
    public func recorded() -> SourceRecord {
        var record = source
        if record.contentHash.isEmpty, let resource { record.contentHash = SourceRecord.contentHash(of: resource) }
        return record
    }
}

/// An entry an earlier import made that a resource now ends (or deletes).
public struct EndRequest: Sendable, Hashable {
    public var type: EntityType
    public var id: String
    /// Tombstone instead of ending.
    public var delete: Bool
    public var reason: String
    public var source: String
}

/// What one patient's resources became: written to the store in one transaction.
public struct PatientBatch: Sendable {
    public var patientID: String
    public var patient: Patient?
    public var carePlans: [MappedCarePlan] = []
    public var tasks: [MappedTask] = []
    public var contacts: [MappedContact] = []
    public var outcomes: [MappedOutcome] = []
    public var ends: [EndRequest] = []

    public init(patientID: String) { self.patientID = patientID }
}

/// A line of the import report: a skip, an end, an approximation, or an error.
public struct ImportNote: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case skipped, ended, deleted, loss, error, warning
    }

    public var kind: Kind
    /// `CarePlan/maria-lopez-home-care`.
    public var resource: String
    /// Where in the resource (`activity[8]`, `dosageInstruction[0].timing`), when it concerns a part.
    public var path: String?
    public var origin: String
    public var message: String

    public init(kind: Kind, resource: String, path: String?, origin: String, message: String) {
        self.kind = kind
        self.resource = resource
        self.path = path
        self.origin = origin
        self.message = message
    }

    public var description: String {
        "\(origin): \(resource)\(path.map { " \($0)" } ?? ""): \(kind.rawValue): \(message)"
    }
}

/// What became of one item of a rule's `each` (an activity, a dosage): every item gets exactly
/// one, so a test can show that nothing is dropped silently.
public struct ItemDisposition: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// A task or contact with this id.
        case made(String)
        /// Mapped by the file for the resource it references (`Type/id`).
        case delegated(String)
        case skipped
        /// An end (or delete) for this id.
        case ended(String)
        /// A reference to nothing imported, reported.
        case unresolved
        /// An error, reported.
        case failed
    }

    public var resource: String
    public var rule: String
    public var index: Int
    public var kind: Kind
}

/// The result of mapping a set of resources.
public struct MappingOutput: Sendable {
    public var batches: [PatientBatch] = []
    public var notes: [ImportNote] = []
    /// What became of every item of every rule.
    public var dispositions: [ItemDisposition] = []
    /// Resources no mapping file covers, by type (counted, not errors).
    public var unmapped: [String: Int] = [:]
}

extension VersionInfo {
    /// The `source` of every entry CareGate makes from the EHR's resources: how export tells
    /// imported outcomes (the EHR's own Observations) from what the patient recorded.
    public static let importedFromEHR = "caregate"
}
