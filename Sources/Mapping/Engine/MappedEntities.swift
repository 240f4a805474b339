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
    /// The resource's `meta.versionId`, when it has one.
    public var versionID: String?
    /// FNV-1a 64 of the resource's compact JSON, hex.
    public var contentHash: String
    /// The mapping rule that made the entry (`careplan.yaml#activity-detail`).
    public var rule: String

    /// FNV-1a 64 of a resource's compact JSON, hex.
    public static func contentHash(of resource: Element) -> String {
        contentHash(ofJSON: FHIRJSONWriter(pretty: false).write(resource))
    }

    /// FNV-1a 64 of a resource's compact JSON already written, hex.
    public static func contentHash(ofJSON bytes: [UInt8]) -> String {
        var fnv: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { fnv = (fnv ^ UInt64(b)) &* 0x100_0000_01b3 }
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
    /// The care plan.
    public var plan: CarePlan
    /// Its patient's store id.
    public var patientID: String
    /// Where it came from.
    public var source: SourceRecord
}

/// A task and the store id of its care plan.
public struct MappedTask: Sendable {
    /// The task.
    public var task: CareTask
    /// Its care plan's store id.
    public var carePlanID: String
    /// Where it came from.
    public var source: SourceRecord
    /// Whether the schedule starts at the rule's anchor (the plan's period, the request's date)
    /// rather than where the resource's own timing says (`boundsPeriod.start`, a Period's start,
    /// a dateTime): an activity new to a plan the store holds then starts when it first appears.
    public var startsAtAnchor = false
    /// The form a survey task asks, kept beside the care plan.
    public var questionnaire: MappedQuestionnaire?

    /// A mapped task.
    public init(task: CareTask, carePlanID: String, source: SourceRecord, startsAtAnchor: Bool = false, questionnaire: MappedQuestionnaire? = nil) {
        self.task = task
        self.carePlanID = carePlanID
        self.source = source
        self.startsAtAnchor = startsAtAnchor
        self.questionnaire = questionnaire
    }
}

/// A Questionnaire a survey task asks, as the store keeps it: one row per form and content, so
/// a new version of the form never rewrites what was answered to the old one.
public struct MappedQuestionnaire: Sendable, Hashable {
    /// The form's url and version (its own, else as the activity named it): the task's
    /// `userInfo["caregate.questionnaire"]`.
    public var canonical: Canonical
    /// The form's title.
    public var title: String?
    /// The content hash of the resource (`SourceRecord.contentHash`): the task's
    /// `userInfo["caregate.questionnaire.hash"]`.
    public var digest: String
    /// The resource as compact FHIR JSON.
    public var json: [UInt8]
    /// Where it was read (a file, the Bundle entry, the EHR).
    public var origin: String
}

/// A contact and the store id of its care plan (nil for none).
public struct MappedContact: Sendable {
    /// The contact.
    public var contact: Contact
    /// Its care plan's store id; nil for none.
    public var carePlanID: String?
    /// Where it came from.
    public var source: SourceRecord
}

/// A recorded result, still to be matched to a task (by group) and occurrence (by date).
public struct MappedOutcome: Sendable {
    /// Codes; the task whose `groupIdentifier` is one of them records it.
    public var taskGroups: [String]
    /// When it was recorded: the occurrence is the task's event around it.
    public var date: Date
    /// The values recorded.
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
    /// The kind of entry.
    public var type: EntityType
    /// Its id.
    public var id: String
    /// Tombstone instead of ending.
    public var delete: Bool
    /// Why, for the report.
    public var reason: String
    /// The resource that ends it.
    public var source: String
}

/// What one patient's resources became: written to the store in one transaction.
public struct PatientBatch: Sendable {
    /// The patient's store id.
    public var patientID: String
    /// The patient, when its resource was among those mapped.
    public var patient: Patient?
    /// Care plans to create or update.
    public var carePlans: [MappedCarePlan] = []
    /// Tasks to create or update.
    public var tasks: [MappedTask] = []
    /// Contacts to create or update.
    public var contacts: [MappedContact] = []
    /// Results to record as outcomes.
    public var outcomes: [MappedOutcome] = []
    /// Entries to end or delete.
    public var ends: [EndRequest] = []

    /// The forms the batch's survey tasks ask, each content once.
    public var questionnaires: [MappedQuestionnaire] {
        var seen: Set<String> = []
        return tasks.compactMap(\.questionnaire).filter { seen.insert($0.digest).inserted }
    }

    /// An empty batch for the patient.
    public init(patientID: String) { self.patientID = patientID }
}

/// A line of the import report: a skip, an end, an approximation, or an error.
public struct ImportNote: Sendable, Hashable, CustomStringConvertible {
    /// How a note is shown, and whether it fails the run (`error`).
    public enum Kind: String, Sendable {
        /// Skipped by a rule, an entry ended or deleted, an approximation (loss), an error, a
        /// warning.
        case skipped, ended, deleted, loss, error, warning
    }

    /// What sort of note.
    public var kind: Kind
    /// `CarePlan/maria-lopez-home-care`.
    public var resource: String
    /// Where in the resource (`activity[8]`, `dosageInstruction[0].timing`), when it concerns a part.
    public var path: String?
    /// The file and line (or entry, or URL) the resource was read from.
    public var origin: String
    /// What happened, in words.
    public var message: String

    /// A note.
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
    /// What became of the item.
    public enum Kind: Sendable, Hashable {
        /// A task or contact with this id.
        case made(String)
        /// Mapped by the file for the resource it references (`Type/id`).
        case delegated(String)
        /// Skipped by a rule's `skip`.
        case skipped
        /// An end (or delete) for this id.
        case ended(String)
        /// A reference to nothing imported, reported.
        case unresolved
        /// An error, reported.
        case failed
    }

    /// The resource (`CarePlan/maria-lopez-home-care`).
    public var resource: String
    /// The rule (`careplan.yaml#activity-detail`).
    public var rule: String
    /// The item's index in the rule's `each`.
    public var index: Int
    /// What became of it.
    public var kind: Kind
}

/// The result of mapping a set of resources.
public struct MappingOutput: Sendable {
    /// What to write, one batch per patient.
    public var batches: [PatientBatch] = []
    /// The report's notes.
    public var notes: [ImportNote] = []
    /// What became of every item of every rule.
    public var dispositions: [ItemDisposition] = []
    /// Resources no mapping file covers, by type (counted, not errors).
    public var unmapped: [String: Int] = [:]
    /// The forms survey activities asked for that the run could not find, in first-asked order:
    /// what to fetch from the EHR before mapping again.
    public var missingQuestionnaires: [Canonical] = []
}

/// Version fields from where an entry came from.
extension VersionInfo {
    /// The `source` of every entry CareGate makes from the EHR's resources: how export tells
    /// imported outcomes (the EHR's own Observations) from what the patient recorded.
    public static let importedFromEHR = "caregate"
}
