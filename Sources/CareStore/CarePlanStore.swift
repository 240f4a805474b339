import Foundation

/// Which versions a query returns.
public enum VersionFilter: Sendable, Hashable {
    /// The current version of each entity (its tip), leaving out deleted ones.
    case latest
    /// Per entity, the versions in effect at some time in the interval (for outcomes: those
    /// whose event starts in it), leaving out deleted ones.
    case inEffect(DateInterval)
    /// Every version ever written, tombstones included.
    case history
}

/// What to fetch: every condition given must hold (CareKit's entity queries).
public struct EntityQuery: Sendable, Hashable {
    /// Which versions: the tips, those in effect in an interval, or every one.
    public var versions: VersionFilter
    /// Entities with any of these logical ids.
    public var ids: [String]?
    /// Versions with any of these uuids.
    public var uuids: [UUID]?
    /// Entities with any of these remote ids (where they came from in the EHR).
    public var remoteIDs: [String]?
    /// Entities carrying any of these tags.
    public var tags: [String]?
    /// Entities in any of these groups (CareKit's `groupIdentifier`; for tasks, the kind of
    /// activity).
    public var groupIdentifiers: [String]?
    /// Those of these patients (by patient id), for every kind: an entity's patient is fixed
    /// when it is written (a patient is its own; a device's versions are its patient's; the rest
    /// are their parent's, or the patient a write names). Ids are unique within a patient only:
    /// a query by id, care plan id or task id names the patient, or it reads every patient's.
    public var patientIDs: [String]?
    /// For tasks and contacts: those of these care plans (by care plan id).
    public var carePlanIDs: [String]?
    /// For outcomes: those of these tasks (by task id).
    public var taskIDs: [String]?
    /// Only versions the gateway wrote (imports, refreshes, its own resolutions), not those a
    /// device sent: what the gateway derives from the EHR (where an entity came from, the EHR's
    /// ids) is read from these, never from a device's. Combine with `.history`: a gateway
    /// version a device has since updated is no longer current.
    public var gatewayWrittenOnly = false
    /// At most this many versions.
    public var limit: Int?

    /// A query; every condition left nil holds for all.
    public init(versions: VersionFilter = .latest, ids: [String]? = nil, uuids: [UUID]? = nil, remoteIDs: [String]? = nil,
                tags: [String]? = nil, groupIdentifiers: [String]? = nil, patientIDs: [String]? = nil,
                carePlanIDs: [String]? = nil, taskIDs: [String]? = nil, limit: Int? = nil) {
        self.versions = versions
        self.ids = ids
        self.uuids = uuids
        self.remoteIDs = remoteIDs
        self.tags = tags
        self.groupIdentifiers = groupIdentifiers
        self.patientIDs = patientIDs
        self.carePlanIDs = carePlanIDs
        self.taskIDs = taskIDs
        self.limit = limit
    }
}

/// What changed in a store after a revision (the change feed that pushes to the EHR read).
public struct StoreChanges: Sendable {
    /// The versions written after the requested revision, in the order they were written.
    public var entities: [CareEntity]
    /// The revision to ask from next time.
    public var revision: Int

    /// Changes read up to `revision`.
    public init(entities: [CareEntity], revision: Int) {
        self.entities = entities
        self.revision = revision
    }
}

/// Why a store operation failed. Nothing of a failed operation is written.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// SQLite failed (or the file cannot be opened).
    case database(path: String, message: String)
    /// `add` of an id that already has a current version.
    case alreadyExists(EntityType, id: String)
    /// `update` or `delete` of an id with no current version.
    case notFound(EntityType, id: String)
    /// A link names a version that is not in the store.
    case missingParent(EntityType, id: String, field: String, uuid: UUID)
    /// The entity breaks a rule (a bad effective date, an invalid schedule...).
    case invalid(EntityType, id: String, reason: String)
    /// The task version has no such occurrence, or another version covers it.
    case noSuchOccurrence(taskID: String, occurrence: Int, reason: String)
    /// Another outcome already exists for this task version and occurrence.
    case duplicateOutcome(taskID: String, occurrence: Int)
    /// Updating or deleting the task would orphan outcomes recorded at or after the version's effective date.
    case wouldOrphanOutcomes(taskID: String, count: Int, latestEvent: Date, effectiveDate: Date)
    /// The tasks' schedules could give more events in the range than are worked out at once
    /// (`maximumEvents`): a clear refusal, never an allocation failure.
    case tooManyEvents(estimated: Int, limit: Int)

    public var description: String {
        switch self {
        case .database(let path, let message): "\(path): \(message)"
        case .alreadyExists(let type, let id): "\(type.rawValue) \"\(id)\" already exists; update it instead"
        case .notFound(let type, let id): "no current \(type.rawValue) \"\(id)\""
        case .missingParent(let type, let id, let field, let uuid): "\(type.rawValue) \"\(id)\": \(field) \(uuid.uuidString) is not in the store"
        case .invalid(let type, let id, let reason): "\(type.rawValue) \"\(id)\": \(reason)"
        case .noSuchOccurrence(let taskID, let occurrence, let reason): "task \"\(taskID)\" occurrence \(occurrence): \(reason)"
        case .duplicateOutcome(let taskID, let occurrence): "task \"\(taskID)\" occurrence \(occurrence) already has an outcome"
        case .tooManyEvents(let estimated, let limit):
            "the tasks could have up to \(estimated) events in the range; at most \(limit) are worked out at once (ask for fewer days or tasks)"
        case .wouldOrphanOutcomes(let taskID, let count, let latest, let effective):
            "task \"\(taskID)\": \(count) outcome\(count == 1 ? "" : "s") recorded for events at or after \(ISO8601DateFormatter().string(from: effective)) (the latest at \(ISO8601DateFormatter().string(from: latest))); a new version must take effect after them"
        }
    }
}

/// One write among several that must land together (`CarePlanWriter.apply`).
public enum StoreOperation: Sendable {
    /// Adds new entities (a first version each).
    case add([CareEntity])
    /// Appends new versions of existing entities.
    case update([CareEntity])
    /// Tombstones for the current versions of these ids, effective at the date (the ids of the
    /// patient `apply` names).
    case delete(EntityType, ids: [String], at: Date)
}

/// What can be read from a care-plan store. On the store itself each call is one read; inside
/// `read {}` or `write {}` every call sees the same state (and, in a write, its own writes).
public protocol CarePlanReader: PatientSyncReader, QuestionnaireReader {
    /// The patients matching `query`.
    func fetchPatients(_ query: EntityQuery) throws(StoreError) -> [Patient]
    /// The care plans matching `query`.
    func fetchCarePlans(_ query: EntityQuery) throws(StoreError) -> [CarePlan]
    /// The contacts matching `query`.
    func fetchContacts(_ query: EntityQuery) throws(StoreError) -> [Contact]
    /// The tasks matching `query`.
    func fetchTasks(_ query: EntityQuery) throws(StoreError) -> [CareTask]
    /// The outcomes matching `query`.
    func fetchOutcomes(_ query: EntityQuery) throws(StoreError) -> [Outcome]
    /// The events of the tasks matching `tasks` (their version filter is ignored) from `start`
    /// to `end`, with their outcomes, in time order.
    func events(from start: Date, to end: Date, tasks: EntityQuery) throws(StoreError) -> [TaskEvent]
    /// Versions written after `revision` (0 for everything).
    func changes(since revision: Int, limit: Int?) throws(StoreError) -> StoreChanges
    /// Ids that have more than one current version within one patient (conflicts from merged
    /// devices); among `entities` of `patientID` only when given (a push asks about its own
    /// entities, not the whole store).
    func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?) throws(StoreError) -> [(EntityType, String)]
    /// The current outcome of one occurrence of a task version, if any.
    func liveOutcome(taskUUID: UUID, occurrence: Int) throws(StoreError) -> Outcome?
    /// The current version of every outcome (deleted ones' tombstones too), oldest effective
    /// date first, then by id, handed to `body` one at a time: an export of any size holds one
    /// outcome, not all. `body` may read the store through the same reader.
    func forEachCurrentOutcome(_ body: (Outcome) throws -> Void) throws
    /// How many outcomes `forEachCurrentOutcome` gives.
    func currentOutcomeCount() throws(StoreError) -> Int
    /// The entities' versions, kind by kind in apply order: patients, care plans, contacts,
    /// tasks, outcomes (what a revision record holds).
    func allEntities(versions: VersionFilter) throws(StoreError) -> [CareEntity]
    /// The store's CareKit sync process: its stable id, and the latest revision as its clock.
    func knowledgeVector() throws(StoreError) -> [RevisionRecord.Process]
}

/// What can be written, with CareKit's rules (CareKit's `OCKStoreProtocol`): updates append
/// versions, deletes append tombstones, nothing is overwritten. On the store each call is one
/// transaction; inside `write {}` they all land together or not at all.
///
/// An entity's identity is (patient, kind, id): two patients' apps may both name a task
/// `doxylamine`, and they are two tasks. A version's patient is its own id for a patient, its
/// parent's patient otherwise, or the patient the write names (`apply(_:for:)`), which every
/// parent it links to must then belong to.
public protocol CarePlanWriter: CarePlanReader, PatientSyncWriter, QuestionnaireWriter {
    /// Adds first versions of new entities, all or none.
    @discardableResult
    func add(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity]
    /// Appends new versions of existing entities (linked after their current versions), all or none.
    @discardableResult
    func update(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity]
    /// Appends tombstones for the current versions of these ids of `patientID` (nil: entities
    /// of no patient), effective at `date`.
    @discardableResult
    func delete(_ type: EntityType, ids: [String], of patientID: String?, at date: Date) throws(StoreError) -> [CareEntity]
    /// Several writes in one transaction: every one of them lands, or none does. With
    /// `patientID`, every entity written is that patient's (one patient's import); without, each
    /// is its parent's, and deletes touch entities of no patient.
    @discardableResult
    func apply(_ operations: [StoreOperation], for patientID: String?) throws(StoreError) -> [CareEntity]
    /// Stores versions made elsewhere (a CareKit device's revision record) as they are: new
    /// uuids are added and linked, known ones skipped; several tips for one id is a conflict.
    @discardableResult
    func merge(_ record: RevisionRecord) throws(StoreError) -> Int
}

/// A versioned care-plan store: the seam between the gateway's use cases and where versions
/// live (`SQLiteCarePlanStore`, on disk or in memory). As in GRDB, `read {}` runs a body on
/// one consistent snapshot and `write {}` runs it in one transaction that commits when the
/// body returns and rolls back when it throws; the body's own errors pass through unchanged.
///
/// ```swift
/// try store.write { tx in
///     let current = try tx.fetchCarePlans(EntityQuery(ids: ["CarePlan/home"]))
///     try tx.apply(plan(from: current))      // decided and written in one transaction
/// }
/// let record = try store.read { tx in try RevisionRecord(entities: tx.allEntities(versions: .history), knowledgeVector: tx.knowledgeVector()) }
/// ```
public protocol CarePlanStore: CarePlanWriter, Sendable {
    /// Runs `body` on one snapshot of the store: every read in it sees the same state.
    func read<T>(_ body: (any CarePlanReader) throws -> T) throws -> T
    /// Runs `body` in one transaction, committed when it returns and rolled back when it throws.
    func write<T>(_ body: (any CarePlanWriter) throws -> T) throws -> T
    /// Runs several bodies in one transaction, each as in a savepoint of its own: a body that
    /// throws undoes only its own writes, and one commit serves them all (device pushes arriving
    /// together share one sync of the log). Each body's result or error, in order; when the
    /// commit fails, every body fails with its error and nothing is stored. A body may run
    /// twice (the store may try the group whole first), so it must write only through `tx`.
    func writeGroup<T>(_ bodies: [(any CarePlanWriter) throws -> T]) -> [Result<T, any Error>]
    /// How many write transactions make progress at once (SQLite: one writer; PostgreSQL:
    /// several connections), for callers that spread writes of different patients.
    var concurrentWriters: Int { get }
}

extension CarePlanReader {
    /// Every id with more than one current version within its patient.
    public func conflicts() throws(StoreError) -> [(EntityType, String)] { try conflicts(among: nil, of: nil) }
    /// Every current patient.
    public func fetchPatients() throws(StoreError) -> [Patient] { try fetchPatients(EntityQuery()) }
    /// Every current care plan.
    public func fetchCarePlans() throws(StoreError) -> [CarePlan] { try fetchCarePlans(EntityQuery()) }
    /// Every current contact.
    public func fetchContacts() throws(StoreError) -> [Contact] { try fetchContacts(EntityQuery()) }
    /// Every current task.
    public func fetchTasks() throws(StoreError) -> [CareTask] { try fetchTasks(EntityQuery()) }
    /// Every current outcome.
    public func fetchOutcomes() throws(StoreError) -> [Outcome] { try fetchOutcomes(EntityQuery()) }
    /// Every version written after `revision`.
    public func changes(since revision: Int) throws(StoreError) -> StoreChanges { try changes(since: revision, limit: nil) }
    /// Every version of every entity, tombstones included.
    public func allEntities() throws(StoreError) -> [CareEntity] { try allEntities(versions: .history) }

    /// The whole store as one revision record, parents before children.
    public func revisionRecord() throws(StoreError) -> RevisionRecord {
        RevisionRecord(entities: try allEntities(versions: .history), knowledgeVector: try knowledgeVector())
    }
}

extension CarePlanWriter {
    /// Deletes the entities of `type` with these ids (within `patientID`, when given) by appending
    /// tombstones; returns the tombstones.
    @discardableResult
    public func delete(_ type: EntityType, ids: [String], of patientID: String?) throws(StoreError) -> [CareEntity] {
        try delete(type, ids: ids, of: patientID, at: Date())
    }
    /// `apply` with each entity's patient worked out from its parents.
    @discardableResult
    public func apply(_ operations: [StoreOperation]) throws(StoreError) -> [CareEntity] { try apply(operations, for: nil) }
}

/// Every read and write of a store alone is one transaction of its own, whatever the backend:
/// each one-call method runs its `read {}` or `write {}` view's method.
extension CarePlanStore {
    /// `read {}` for one call, every error as `StoreError` (the backends report their own as such).
    func readOne<T>(_ body: (any CarePlanReader) throws(StoreError) -> T) throws(StoreError) -> T {
        do { return try read { try body($0) } } catch let error as StoreError { throw error } catch {
            throw .database(path: "", message: "\(error)")
        }
    }

    /// `write {}` for one call, every error as `StoreError`.
    func writeOne<T>(_ body: (any CarePlanWriter) throws(StoreError) -> T) throws(StoreError) -> T {
        do { return try write { try body($0) } } catch let error as StoreError { throw error } catch {
            throw .database(path: "", message: "\(error)")
        }
    }

    /// The patients matching `query`, read in a transaction of its own.
    public func fetchPatients(_ query: EntityQuery) throws(StoreError) -> [Patient] { try readOne { tx throws(StoreError) in try tx.fetchPatients(query) } }
    /// The care plans matching `query`, read in a transaction of its own.
    public func fetchCarePlans(_ query: EntityQuery) throws(StoreError) -> [CarePlan] { try readOne { tx throws(StoreError) in try tx.fetchCarePlans(query) } }
    /// The contacts matching `query`, read in a transaction of its own.
    public func fetchContacts(_ query: EntityQuery) throws(StoreError) -> [Contact] { try readOne { tx throws(StoreError) in try tx.fetchContacts(query) } }
    /// The tasks matching `query`, read in a transaction of its own.
    public func fetchTasks(_ query: EntityQuery) throws(StoreError) -> [CareTask] { try readOne { tx throws(StoreError) in try tx.fetchTasks(query) } }
    /// The outcomes matching `query`, read in a transaction of its own.
    public func fetchOutcomes(_ query: EntityQuery) throws(StoreError) -> [Outcome] { try readOne { tx throws(StoreError) in try tx.fetchOutcomes(query) } }
    public func events(from start: Date, to end: Date, tasks: EntityQuery) throws(StoreError) -> [TaskEvent] {
        try readOne { tx throws(StoreError) in try tx.events(from: start, to: end, tasks: tasks) }
    }
    public func changes(since revision: Int, limit: Int?) throws(StoreError) -> StoreChanges {
        try readOne { tx throws(StoreError) in try tx.changes(since: revision, limit: limit) }
    }
    public func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?) throws(StoreError) -> [(EntityType, String)] {
        try readOne { tx throws(StoreError) in try tx.conflicts(among: entities, of: patientID) }
    }
    public func liveOutcome(taskUUID: UUID, occurrence: Int) throws(StoreError) -> Outcome? {
        try readOne { tx throws(StoreError) in try tx.liveOutcome(taskUUID: taskUUID, occurrence: occurrence) }
    }
    public func allEntities(versions: VersionFilter) throws(StoreError) -> [CareEntity] {
        try readOne { tx throws(StoreError) in try tx.allEntities(versions: versions) }
    }
    public func forEachCurrentOutcome(_ body: (Outcome) throws -> Void) throws { try read { try $0.forEachCurrentOutcome(body) } }
    public func currentOutcomeCount() throws(StoreError) -> Int { try readOne { tx throws(StoreError) in try tx.currentOutcomeCount() } }
    public func knowledgeVector() throws(StoreError) -> [RevisionRecord.Process] { try readOne { tx throws(StoreError) in try tx.knowledgeVector() } }

    /// The whole store as one revision record, read in one transaction: a consistent snapshot
    /// even while other connections write (also through `any CarePlanStore`, where the
    /// reader's version would read each kind in a transaction of its own).
    public func revisionRecord() throws(StoreError) -> RevisionRecord { try readOne { tx throws(StoreError) in try tx.revisionRecord() } }

    public func patientKnowledge(_ patientID: String, upTo revision: Int?) throws(StoreError) -> KnowledgeVector {
        try readOne { tx throws(StoreError) in try tx.patientKnowledge(patientID, upTo: revision) }
    }
    public func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?) throws(StoreError) -> PatientVersions {
        try readOne { tx throws(StoreError) in try tx.patientVersions(patientID, notCoveredBy: since, upTo: revision) }
    }
    public func scopes(of uuids: [UUID]) throws(StoreError) -> [UUID: VersionScope] { try readOne { tx throws(StoreError) in try tx.scopes(of: uuids) } }
    public func processOwners(_ processes: [UUID]) throws(StoreError) -> [UUID: String] {
        try readOne { tx throws(StoreError) in try tx.processOwners(processes) }
    }
    public func isEnrolled(deviceID: String, patientID: String) throws(StoreError) -> Bool {
        try readOne { tx throws(StoreError) in try tx.isEnrolled(deviceID: deviceID, patientID: patientID) }
    }
    public func questionnaires(of patientID: String, url: String, version: String?) throws(StoreError) -> [StoredQuestionnaire] {
        try readOne { tx throws(StoreError) in try tx.questionnaires(of: patientID, url: url, version: version) }
    }
    public func keep(_ questionnaires: [StoredQuestionnaire]) throws(StoreError) {
        try writeOne { tx throws(StoreError) in try tx.keep(questionnaires) }
    }

    @discardableResult
    public func add(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try writeOne { tx throws(StoreError) in try tx.add(entities) } }
    @discardableResult
    public func update(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try writeOne { tx throws(StoreError) in try tx.update(entities) } }
    @discardableResult
    public func delete(_ type: EntityType, ids: [String], of patientID: String?, at date: Date) throws(StoreError) -> [CareEntity] {
        try writeOne { tx throws(StoreError) in try tx.delete(type, ids: ids, of: patientID, at: date) }
    }
    /// Runs several writes as one transaction: all of them, or none (an import of one patient).
    @discardableResult
    public func apply(_ operations: [StoreOperation], for patientID: String?) throws(StoreError) -> [CareEntity] {
        try writeOne { tx throws(StoreError) in try tx.apply(operations, for: patientID) }
    }
    @discardableResult
    public func merge(_ record: RevisionRecord) throws(StoreError) -> Int { try writeOne { tx throws(StoreError) in try tx.merge(record) } }
    @discardableResult
    public func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int {
        try writeOne { tx throws(StoreError) in try tx.mergeDeviceRecords(records, patientID: patientID, deviceKnowledge: deviceKnowledge) }
    }

    /// Runs store operations from async code without holding one of Swift's cooperative threads
    /// while SQLite works: the operation runs on a dispatch queue and the caller resumes when it
    /// is done. Each operation is still one transaction (or one read) as the store's methods are.
    ///
    /// ```swift
    /// let added = try await store.perform { try $0.add(entities) }
    /// let today = try await store.perform { try $0.events(from: start, to: end, tasks: EntityQuery()) }
    /// ```
    /// Errors pass through unchanged (the store's own are `StoreError`s).
    public func perform<T: Sendable>(_ operation: @escaping @Sendable (Self) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global(qos: .userInitiated).async {
                continuation.resume(with: Result { try operation(self) })
            }
        }
    }
}
