import Foundation

/// An entity's identity within its kind: its id within its patient (nil: of no patient).
public struct VersionIdentity: Hashable, Sendable {
    /// The logical id.
    public let id: String
    /// The patient it belongs to; nil for none.
    public let patientID: String?

    /// An identity.
    public init(id: String, patientID: String?) {
        self.id = id
        self.patientID = patientID
    }
}

/// A current version (tip) of an entity, as its row tells it.
public struct VersionTip: Sendable {
    /// The tip's uuid.
    public let uuid: UUID
    /// When it takes effect.
    public let effective: Date
    /// Whether it is a tombstone.
    public let deleted: Bool

    /// A tip as read.
    public init(uuid: UUID, effective: Date, deleted: Bool) {
        self.uuid = uuid
        self.effective = effective
        self.deleted = deleted
    }
}

/// A task version as an outcome written against it needs it.
public struct StoredTask: Sendable {
    /// The task version.
    public var task: CareTask
    /// When a newer version of the task takes over (nil: none has).
    public var superseded: Date?
    /// Whether the task is deleted from this version on.
    public var deleted: Bool
    /// The patient the task belongs to.
    public var patientID: String?

    /// A task version with what bounds it.
    public init(task: CareTask, superseded: Date?, deleted: Bool, patientID: String?) {
        self.task = task
        self.superseded = superseded
        self.deleted = deleted
        self.patientID = patientID
    }
}

/// The row-level reads and writes the store's rules need inside one write transaction. Each
/// backend implements them on its own tables; `VersionWriter` holds the rules (identity within
/// a patient, links, one live outcome per occurrence, no orphaned outcomes, device records and
/// their knowledge), so that they are the same on every backend.
public protocol VersionRows {
    /// The patient of a stored version (of `kind` when given): nil when there is none,
    /// `.some(nil)` when it belongs to no patient.
    func patient(of uuid: UUID, kind: String?) throws -> String??
    /// A stored task version; `known` is its content when the writer has decoded it already.
    func taskVersion(_ uuid: UUID, known: CareTask?) throws -> StoredTask?
    /// The current versions of many entities of one kind.
    func tips(kind: String, _ identities: [VersionIdentity]) throws -> [VersionIdentity: [VersionTip]]
    /// Inserts one version (with its successors already stored, when a merge brings it late),
    /// refusing what breaks a unique rule as that rule (`duplicateOutcome` naming the task's
    /// uuid, which the writer turns into its id; a uuid already stored), without reading
    /// anything after the refusal (PostgreSQL reads nothing more in a transaction once a
    /// statement failed). The backend numbers it: the number a patient's sync clock reads must
    /// follow the order in which writes of that patient commit. A backend may hold inserts back
    /// until `flush` (or its next read, which must see them).
    func insert(_ entity: CareEntity, patientID: String?, eventStart: Date?,
                successors: [(uuid: UUID, effective: Date)], stamp: String?) throws
    /// Makes the next number on the patient's clock at least `revision` (a restored version
    /// keeps its number or gets a higher one).
    func raiseClock(of patientID: String?, to revision: Int) throws
    /// Records `next` as a successor of `previous` (the version's data is untouched).
    func link(previous: UUID, next: UUID, nextEffective: Date) throws
    /// The live outcomes of a task (by id, within a patient) for events at or after `start`.
    func liveOutcomes(ofTask taskID: String, patientID: String?, from start: Date) throws -> (count: Int, latest: Date?)
    /// A stored version, read inside the write (never cached: the write may roll back).
    func version(_ uuid: UUID) throws -> CareEntity?
    /// Whether the store holds this version.
    func contains(_ uuid: UUID) throws -> Bool
    /// Which of these versions the store holds: a device record's worth in one look-up.
    func containing(_ uuids: [UUID]) throws -> Set<UUID>
    /// These stored task versions (as `taskVersion` reads them), those the store holds.
    func taskVersions(_ uuids: [UUID]) throws -> [UUID: StoredTask]
    /// The effective date of a stored version; nil when the store has no such version.
    func effectiveDate(of uuid: UUID) throws -> Date?
    /// The store's own sync process.
    func processID() throws -> UUID
    /// Binds the processes not bound yet to the patient whose data they wrote.
    func bindProcesses(_ processes: [UUID], to patientID: String) throws
    /// The patient's devices' knowledge as the store keeps it, and a new value for it.
    func devicesKnowledge(of patientID: String) throws -> KnowledgeVector?
    /// Keeps a new value of the patient's devices' knowledge.
    func saveDevicesKnowledge(_ vector: KnowledgeVector, of patientID: String) throws
    /// Sends the inserts held back to the database, refusing what breaks a rule as `insert`
    /// does: the writer calls it as each write ends.
    func flush() throws
    /// Drops the inserts held back for a write that failed.
    func discardPending()
}

extension VersionRows {
    /// A backend that inserts at once holds nothing back.
    public func flush() throws {}
    public func discardPending() {}

    /// One look-up per version: a backend whose reads cost no trip (SQLite) needs no more.
    public func containing(_ uuids: [UUID]) throws -> Set<UUID> {
        var held: Set<UUID> = []
        for uuid in uuids where try contains(uuid) { held.insert(uuid) }
        return held
    }

    public func taskVersions(_ uuids: [UUID]) throws -> [UUID: StoredTask] {
        var found: [UUID: StoredTask] = [:]
        for uuid in uuids { found[uuid] = try taskVersion(uuid, known: nil) }
        return found
    }
}

/// The store's rules for every write, over one backend's rows within one write transaction.
public struct VersionWriter<Rows: VersionRows> {
    /// The backend's rows, within the write's transaction.
    public let rows: Rows

    /// A writer over `rows`.
    public init(rows: Rows) {
        self.rows = rows
    }

    /// What one write call knows so far: the kinds and tasks it added (outcomes added with
    /// their task are checked against it without reading it back), task versions it read, and
    /// parents found to exist.
    struct Batch {
        var kinds: [UUID: String] = [:]
        var tasks: [UUID: CareTask] = [:]
        var decodedTasks: [UUID: CareTask] = [:]
        var knownParents: Set<UUID> = []
        /// The patient every version of this call belongs to (a device's, one patient's import);
        /// nil: each version's own (a patient's id, or its parent's).
        var patientID: String?
        /// For a device's record: its vector's JSON, stored with each version.
        var stamp: String?
        /// The patients of versions this call wrote or looked up (nil inside: of no patient).
        var patients: [UUID: String?] = [:]
        /// Task versions read before the call's writes (a write of no tasks: nothing it writes
        /// changes a task version).
        var storedTasks: [UUID: StoredTask] = [:]
    }

    /// An entity added within one call, per kind.
    struct AddedID: Hashable {
        let kind: String
        let identity: VersionIdentity
    }

    /// The store's kind name for a type (HealthKit tasks are tasks).
    public static func kind(_ type: EntityType) -> String { type == .healthKitTask ? "task" : type.rawValue }

    /// The link to the parent: its field and uuid.
    public static func parentUUID(_ entity: CareEntity) -> (field: String, uuid: UUID)? {
        switch entity {
        case .patient: nil
        case .carePlan(let c): c.patientUUID.map { ("patientUUID", $0) }
        case .contact(let c): c.carePlanUUID.map { ("carePlanUUID", $0) }
        case .task(let t): t.carePlanUUID.map { ("carePlanUUID", $0) }
        case .outcome(let o): ("taskUUID", o.taskUUID)
        }
    }

    static func parentKind(_ entity: CareEntity) -> String? {
        switch entity {
        case .patient: nil
        case .carePlan: "patient"
        case .contact, .task: "carePlan"
        case .outcome: "task"
        }
    }

    /// The entity with its version fields replaced.
    public static func replacing(_ entity: CareEntity, version: VersionInfo) -> CareEntity {
        var replaced = entity
        replaced.version = version
        return replaced
    }

    /// A version's JSON as a row keeps it: without successors (the row's own column holds them).
    public static func storedJSON(_ entity: CareEntity) -> [UInt8] {
        guard !entity.withVersion({ $0.nextVersionUUIDs.isEmpty }) else { return CareKitJSON.bytes(entity, version: .v4) }
        var version = entity.version
        version.nextVersionUUIDs = []
        return CareKitJSON.bytes(replacing(entity, version: version), version: .v4)
    }

    // MARK: Scope and links

    /// The patient a version belongs to: the write's patient when it names one (a device's
    /// record, one patient's import), else a patient's own id, else its parent's patient (none
    /// without a parent).
    func patientScope(of entity: CareEntity, batch: inout Batch) throws -> String? {
        if let patientID = batch.patientID { return patientID }
        if case .patient(let patient) = entity { return patient.id }
        guard let parent = Self.parentUUID(entity)?.uuid else { return nil }
        if let known = batch.patients[parent] { return known }
        let found = try rows.patient(of: parent, kind: nil) ?? nil
        batch.patients[parent] = .some(found)
        return found
    }

    /// Refuses a version that leaves its patient: a patient written for another, or a parent of another patient's.
    func checkScope(_ entity: CareEntity, patientID: String?, parentPatientID: String??) throws {
        if case .patient(let patient) = entity, let patientID, patient.id != patientID {
            throw StoreError.invalid(.patient, id: patient.id, reason: "is not the patient this write is for (\"\(patientID)\")")
        }
        if let parentPatientID, let parentPatientID, parentPatientID != patientID, let (field, uuid) = Self.parentUUID(entity) {
            throw StoreError.missingParent(entity.entityType, id: entity.version.id, field: field, uuid: uuid)
        }
    }

    /// Checks links to parents (there, of the kind, and of the version's patient) and, for
    /// outcomes, computes the event the outcome is for.
    func validate(_ entity: CareEntity, patientID: String?, batch: inout Batch) throws -> Date? {
        let type = entity.entityType
        let id = entity.version.id
        let parent = Self.parentUUID(entity)
        try checkScope(entity, patientID: patientID, parentPatientID: parent.flatMap { batch.patients[$0.uuid] })
        if case .outcome(let outcome) = entity, let task = batch.tasks[outcome.taskUUID] {
            // The task was added in this same call: no successor yet.
            return try Self.occurrenceStart(outcome, task: task, superseded: nil, deleted: task.isDeleted)
        }
        if let (_, parent) = parent, let kind = batch.kinds[parent], kind == Self.parentKind(entity) {
            return nil
        }
        // An outcome's task is read below (which checks it is there); other parents are looked up.
        if let (field, parent) = parent, let parentKind = Self.parentKind(entity), parentKind != "task", !batch.knownParents.contains(parent) {
            guard let parentPatient = try rows.patient(of: parent, kind: parentKind) else {
                throw StoreError.missingParent(type, id: id, field: field, uuid: parent)
            }
            try checkScope(entity, patientID: patientID, parentPatientID: .some(parentPatient))
            batch.knownParents.insert(parent)
        }
        guard case .outcome(let outcome) = entity else { return nil }
        guard let stored = try batch.storedTasks[outcome.taskUUID] ?? rows.taskVersion(outcome.taskUUID, known: batch.decodedTasks[outcome.taskUUID]) else {
            throw StoreError.missingParent(.outcome, id: id, field: "taskUUID", uuid: outcome.taskUUID)
        }
        try checkScope(entity, patientID: patientID, parentPatientID: .some(stored.patientID))
        batch.decodedTasks[outcome.taskUUID] = stored.task
        return try Self.occurrenceStart(outcome, task: stored.task, superseded: stored.superseded, deleted: stored.deleted)
    }

    /// The start of the event an outcome is for, checking that the task version has it.
    static func occurrenceStart(_ outcome: Outcome, task: CareTask, superseded: Date?, deleted: Bool) throws -> Date {
        let taskID = task.id
        if deleted {
            throw StoreError.noSuchOccurrence(taskID: taskID, occurrence: outcome.taskOccurrenceIndex, reason: "the task version is a deletion")
        }
        guard let event = task.schedule.event(occurrence: outcome.taskOccurrenceIndex) else {
            throw StoreError.noSuchOccurrence(taskID: taskID, occurrence: outcome.taskOccurrenceIndex, reason: "the schedule has no such occurrence")
        }
        if event.start < task.effectiveDate {
            throw StoreError.noSuchOccurrence(taskID: taskID, occurrence: outcome.taskOccurrenceIndex,
                                              reason: "the event is before the task version takes effect")
        }
        if let superseded, event.start >= superseded {
            throw StoreError.noSuchOccurrence(taskID: taskID, occurrence: outcome.taskOccurrenceIndex,
                                              reason: "a newer task version covers the event")
        }
        return event.start
    }

    /// Refuses a new task version (or tombstone) that would orphan outcomes at or after its effective date.
    func checkOrphans(taskID: String, patientID: String?, effective: Date) throws {
        let (count, latest) = try rows.liveOutcomes(ofTask: taskID, patientID: patientID, from: effective)
        if count > 0, let latest {
            throw StoreError.wouldOrphanOutcomes(taskID: taskID, count: count, latestEvent: latest, effectiveDate: effective)
        }
    }

    /// Inserts a version after checking its links.
    func insertChecked(_ entity: CareEntity, patientID: String?, successors: [(uuid: UUID, effective: Date)] = [],
                       batch: inout Batch) throws {
        let eventStart = try validate(entity, patientID: patientID, batch: &batch)
        try insert(entity, patientID: patientID, eventStart: eventStart, successors: successors, batch: &batch)
    }

    func insert(_ entity: CareEntity, patientID: String?, eventStart: Date?, successors: [(uuid: UUID, effective: Date)] = [],
                batch: inout Batch) throws {
        try rows.insert(entity, patientID: patientID, eventStart: eventStart, successors: successors, stamp: batch.stamp)
        batch.patients[entity.version.uuid] = .some(patientID)
    }

    /// Runs one write: the inserts a backend held back go to the database as it ends, or are
    /// dropped when it fails. A refused outcome's task is named by its id, read or added in
    /// this write (the rows know the rule and the task's uuid; the write knows the task).
    func finishing<T>(_ batch: inout Batch, _ body: (inout Batch) throws -> T) throws -> T {
        do {
            let result = try body(&batch)
            try rows.flush()
            return result
        } catch StoreError.duplicateOutcome(let task, let occurrence) {
            rows.discardPending()
            let named = UUID(uuidString: task).flatMap { batch.tasks[$0] ?? batch.decodedTasks[$0] }?.id
            throw StoreError.duplicateOutcome(taskID: named ?? task, occurrence: occurrence)
        } catch {
            rows.discardPending()
            throw error
        }
    }

    /// For a write of no tasks, the task versions its outcomes are for, read at once before it
    /// writes (nothing it writes changes a task version): its outcomes then read nothing one by
    /// one, and a backend that holds inserts back sends them together.
    func readTasks(of entities: [CareEntity], batch: inout Batch) throws {
        guard !entities.contains(where: { Self.kind($0.entityType) == "task" }) else { return }
        let tasks = Set(entities.compactMap { entity in if case .outcome(let o) = entity { o.taskUUID } else { nil } })
        guard !tasks.isEmpty else { return }
        batch.storedTasks = try rows.taskVersions(Array(tasks))
    }

    // MARK: Writes

    /// Adds new entities (a new version after a tombstone is an add too).
    public func add(_ entities: [CareEntity], patientID: String?) throws -> [CareEntity] {
        var batch = Batch()
        batch.patientID = patientID
        return try finishing(&batch) { batch in
            var added: [CareEntity] = []
            added.reserveCapacity(entities.count)
            batch.kinds.reserveCapacity(entities.count)
            // Each entity's patient first (a parent added in this call gives its own), then every
            // kind's tips in one query.
            var scopes: [String?] = []
            scopes.reserveCapacity(entities.count)
            var identitiesByKind: [String: [VersionIdentity]] = [:]
            for entity in entities {
                let scope = try patientScope(of: entity, batch: &batch)
                scopes.append(scope)
                batch.patients[entity.version.uuid] = .some(scope)
                identitiesByKind[Self.kind(entity.entityType), default: []].append(VersionIdentity(id: entity.version.id, patientID: scope))
            }
            var tipsByKind: [String: [VersionIdentity: [VersionTip]]] = [:]
            for (kind, identities) in identitiesByKind { tipsByKind[kind] = try rows.tips(kind: kind, identities) }
            try readTasks(of: entities, batch: &batch)
            var addedIDs: Set<AddedID> = []
            addedIDs.reserveCapacity(entities.count)
            batch.tasks.reserveCapacity(identitiesByKind["task"]?.count ?? 0)
            for (entity, scope) in zip(entities, scopes) {
                let kind = Self.kind(entity.entityType)
                let identity = VersionIdentity(id: entity.version.id, patientID: scope)
                let tips = tipsByKind[kind]?[identity] ?? []
                if tips.contains(where: { !$0.deleted }) || !addedIDs.insert(AddedID(kind: kind, identity: identity)).inserted {
                    throw StoreError.alreadyExists(entity.entityType, id: entity.version.id)
                }
                var version = entity.version
                version.previousVersionUUIDs = tips.map(\.uuid)
                version.nextVersionUUIDs = []
                if version.createdDate == nil { version.createdDate = Date() }
                let stored = Self.replacing(entity, version: version)
                let eventStart = try validate(stored, patientID: scope, batch: &batch)
                try insert(stored, patientID: scope, eventStart: eventStart, batch: &batch)
                for tip in tips { try rows.link(previous: tip.uuid, next: version.uuid, nextEffective: version.effectiveDate) }
                batch.kinds[version.uuid] = kind
                if case .task(let task) = stored { batch.tasks[version.uuid] = task }
                added.append(stored)
            }
            return added
        }
    }

    /// New versions of current entities.
    public func update(_ entities: [CareEntity], patientID: String?) throws -> [CareEntity] {
        var batch = Batch()
        batch.patientID = patientID
        return try finishing(&batch) { batch in
            var updated: [CareEntity] = []
            for entity in entities {
                let kind = Self.kind(entity.entityType)
                let id = entity.version.id
                let scope = try patientScope(of: entity, batch: &batch)
                let identity = VersionIdentity(id: id, patientID: scope)
                let tips = try rows.tips(kind: kind, [identity])[identity] ?? []
                guard !tips.isEmpty, tips.contains(where: { !$0.deleted }) else { throw StoreError.notFound(entity.entityType, id: id) }
                var version = entity.version
                if tips.contains(where: { $0.uuid == version.uuid }) || version.previousVersionUUIDs.contains(version.uuid) {
                    version.uuid = .timeOrdered()
                }
                if let latest = tips.map(\.effective).max(), version.effectiveDate < latest {
                    throw StoreError.invalid(entity.entityType, id: id,
                        reason: "the new version's effective date is before the current version's (\(ISO8601DateFormatter().string(from: latest)))")
                }
                if kind == "task" { try checkOrphans(taskID: id, patientID: scope, effective: version.effectiveDate) }
                version.previousVersionUUIDs = tips.map(\.uuid)
                version.nextVersionUUIDs = []
                version.updatedDate = Date()
                let stored = Self.replacing(entity, version: version)
                for tip in tips { try rows.link(previous: tip.uuid, next: version.uuid, nextEffective: version.effectiveDate) }
                try insertChecked(stored, patientID: scope, batch: &batch)
                updated.append(stored)
            }
            return updated
        }
    }

    /// Tombstones for the current versions of these ids, effective at `date`.
    public func delete(_ type: EntityType, ids: [String], patientID: String?, at date: Date) throws -> [CareEntity] {
        var batch = Batch()
        return try finishing(&batch) { batch in
            var tombstones: [CareEntity] = []
            let kind = Self.kind(type)
            for id in ids {
                let identity = VersionIdentity(id: id, patientID: patientID)
                let tips = try rows.tips(kind: kind, [identity])[identity] ?? []
                guard let current = tips.filter({ !$0.deleted }).max(by: { $0.effective < $1.effective }),
                      let entity = try rows.version(current.uuid) else {
                    throw StoreError.notFound(type, id: id)
                }
                if kind == "task" { try checkOrphans(taskID: id, patientID: patientID, effective: date) }
                var version = entity.version
                version.uuid = .timeOrdered()
                version.previousVersionUUIDs = tips.map(\.uuid)
                version.nextVersionUUIDs = []
                version.effectiveDate = max(date, current.effective)
                version.deletedDate = date
                version.updatedDate = Date()
                let tombstone = Self.replacing(entity, version: version)
                for tip in tips { try rows.link(previous: tip.uuid, next: version.uuid, nextEffective: version.effectiveDate) }
                try insert(tombstone, patientID: patientID, eventStart: nil, batch: &batch)
                tombstones.append(tombstone)
            }
            return tombstones
        }
    }

    /// Several writes as one: each in turn, within the caller's transaction.
    public func apply(_ operations: [StoreOperation], patientID: String?) throws -> [CareEntity] {
        var written: [CareEntity] = []
        for operation in operations {
            switch operation {
            case .add(let entities): written += try add(entities, patientID: patientID)
            case .update(let entities): written += try update(entities, patientID: patientID)
            case .delete(let type, let ids, let date): written += try delete(type, ids: ids, patientID: patientID, at: date)
            }
        }
        return written
    }

    /// Adds a record's versions not yet stored; `device`: a device's record, for its patient
    /// (the versions are stamped with the record's vector).
    public func merge(_ record: RevisionRecord, device: (patientID: String, stamp: String)? = nil) throws -> Int {
        var batch = Batch()
        batch.patientID = device?.patientID
        batch.stamp = device?.stamp
        return try finishing(&batch) { batch in
            var inserted = 0
            // What the record needs read, read at once: which versions are stored and, for a
            // record of no tasks (a device's usual push), its outcomes' task versions.
            var stored = try rows.containing(record.entities.map(\.version.uuid))
            try readTasks(of: record.entities, batch: &batch)
            for entity in record.entities {
                let version = entity.version
                guard stored.insert(version.uuid).inserted else { continue }
                let scope = try patientScope(of: entity, batch: &batch)
                // Successors that arrived earlier (out of order) are linked as the version goes in.
                var successors: [(uuid: UUID, effective: Date)] = []
                for next in version.nextVersionUUIDs {
                    if let nextEffective = try rows.effectiveDate(of: next) { successors.append((next, nextEffective)) }
                }
                // Previous versions stop being tips first, as in an update (one live outcome per occurrence).
                for previous in version.previousVersionUUIDs {
                    try rows.link(previous: previous, next: version.uuid, nextEffective: version.effectiveDate)
                }
                try insertChecked(entity, patientID: scope, successors: successors, batch: &batch)
                inserted += 1
            }
            return inserted
        }
    }

    /// A device's records for its patient: merged stamped with their vectors, the vectors'
    /// processes bound to the patient, and the patient's devices' knowledge advanced.
    public func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws -> Int {
        var merged = 0
        var knowledge = deviceKnowledge
        for record in records {
            let stamp = try KnowledgeVector(processes: record.knowledgeVector)
            merged += try merge(record, device: (patientID, stamp.json))
            knowledge = knowledge.merged(with: stamp)
        }
        let own = try rows.processID()
        try rows.bindProcesses(knowledge.clocks.keys.filter { $0 != own }.sorted { $0.uuidString < $1.uuidString }, to: patientID)
        if let stored = try rows.devicesKnowledge(of: patientID) { knowledge = knowledge.merged(with: stored) }
        try rows.saveDevicesKnowledge(knowledge, of: patientID)
        return merged
    }
}
