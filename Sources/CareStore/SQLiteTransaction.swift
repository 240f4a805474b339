import Foundation
import GRDB

extension SQLiteCarePlanStore {
    /// One transaction's view of the store (GRDB's `Database`): what `read {}` and `write {}`
    /// hand their body, and what every one-call method of the store runs in.
    struct Transaction: CarePlanWriter {
        let store: SQLiteCarePlanStore
        let db: Database
        /// Outside a write transaction: what is read is committed, and may be cached.
        let committed: Bool

        /// Runs `body`, reporting GRDB's errors as `StoreError`.
        func run<T>(_ body: () throws -> T) throws(StoreError) -> T {
            do { return try body() } catch { throw store.wrap(error) }
        }

        func fetch<Entity>(_ kind: String, _ query: EntityQuery, _ cast: (CareEntity) -> Entity?) throws(StoreError) -> [Entity] {
            try run { try store.fetch(kind: kind, query, db: db, committed: committed).compactMap(cast) }
        }

        func fetchPatients(_ query: EntityQuery) throws(StoreError) -> [Patient] {
            try fetch("patient", query) { if case .patient(let e) = $0 { e } else { nil } }
        }

        func fetchCarePlans(_ query: EntityQuery) throws(StoreError) -> [CarePlan] {
            try fetch("carePlan", query) { if case .carePlan(let e) = $0 { e } else { nil } }
        }

        func fetchContacts(_ query: EntityQuery) throws(StoreError) -> [Contact] {
            try fetch("contact", query) { if case .contact(let e) = $0 { e } else { nil } }
        }

        func fetchTasks(_ query: EntityQuery) throws(StoreError) -> [CareTask] {
            try fetch("task", query) { if case .task(let e) = $0 { e } else { nil } }
        }

        func fetchOutcomes(_ query: EntityQuery) throws(StoreError) -> [Outcome] {
            try fetch("outcome", query) { if case .outcome(let e) = $0 { e } else { nil } }
        }

        func events(from start: Date, to end: Date, tasks: EntityQuery) throws(StoreError) -> [TaskEvent] {
            try run { try store.events(from: start, to: end, tasks: tasks, db: db, committed: committed) }
        }

        func changes(since revision: Int, limit: Int?) throws(StoreError) -> StoreChanges {
            try run { try store.changes(since: revision, limit: limit, db: db, committed: committed) }
        }

        func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?) throws(StoreError) -> [(EntityType, String)] {
            try run { try store.conflicts(among: entities, of: patientID, db: db) }
        }

        func liveOutcome(taskUUID: UUID, occurrence: Int) throws(StoreError) -> Outcome? {
            try run { try store.liveOutcome(taskUUID: taskUUID, occurrence: occurrence, db: db, committed: committed) }
        }

        func forEachCurrentOutcome(_ body: (Outcome) throws -> Void) throws {
            try store.forEachCurrentOutcome(db: db, body)
        }

        func currentOutcomeCount() throws(StoreError) -> Int {
            try run { try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entity_version WHERE kind = 'outcome' AND next_uuids IS NULL") ?? 0 }
        }

        func allEntities(versions: VersionFilter) throws(StoreError) -> [CareEntity] {
            try run { try store.allEntities(versions: versions, db: db, committed: committed) }
        }

        func knowledgeVector() throws(StoreError) -> [RevisionRecord.Process] { try run { try store.knowledgeVector(db: db) } }

        func add(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try run { try store.writer(db).add(entities, patientID: nil) } }

        func update(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try run { try store.writer(db).update(entities, patientID: nil) } }

        func delete(_ type: EntityType, ids: [String], of patientID: String?, at date: Date) throws(StoreError) -> [CareEntity] {
            try run { try store.writer(db).delete(type, ids: ids, patientID: patientID, at: date) }
        }

        func apply(_ operations: [StoreOperation], for patientID: String?) throws(StoreError) -> [CareEntity] {
            try run { try store.writer(db).apply(operations, patientID: patientID) }
        }

        func merge(_ record: RevisionRecord) throws(StoreError) -> Int { try run { try store.writer(db).merge(record) } }

        func patientKnowledge(_ patientID: String, upTo revision: Int?) throws(StoreError) -> KnowledgeVector {
            try run { try store.patientKnowledge(patientID, upTo: revision, db: db) }
        }

        func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?) throws(StoreError) -> PatientVersions {
            try run { try store.patientVersions(patientID, notCoveredBy: since, upTo: revision, db: db, committed: committed) }
        }

        func scopes(of uuids: [UUID]) throws(StoreError) -> [UUID: VersionScope] { try run { try store.scopes(of: uuids, db: db) } }

        func processOwners(_ processes: [UUID]) throws(StoreError) -> [UUID: String] { try run { try store.processOwners(processes, db: db) } }

        func isEnrolled(deviceID: String, patientID: String) throws(StoreError) -> Bool {
            try run { try SQLiteCarePlanStore.isEnrolled(deviceID: deviceID, patientID: patientID, db: db) }
        }

        func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int {
            try run { try store.writer(db).mergeDeviceRecords(records, patientID: patientID, deviceKnowledge: deviceKnowledge) }
        }
    }
}

/// Every read and write of the store alone is one transaction of its own.
extension SQLiteCarePlanStore {
    public func fetchPatients(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Patient] { try reading { try $0.fetchPatients(query) } }
    public func fetchCarePlans(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [CarePlan] { try reading { try $0.fetchCarePlans(query) } }
    public func fetchContacts(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Contact] { try reading { try $0.fetchContacts(query) } }
    public func fetchTasks(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [CareTask] { try reading { try $0.fetchTasks(query) } }
    public func fetchOutcomes(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Outcome] { try reading { try $0.fetchOutcomes(query) } }

    public func events(from start: Date, to end: Date, tasks: EntityQuery = EntityQuery()) throws(StoreError) -> [TaskEvent] {
        try reading { try $0.events(from: start, to: end, tasks: tasks) }
    }

    public func changes(since revision: Int, limit: Int? = nil) throws(StoreError) -> StoreChanges { try reading { try $0.changes(since: revision, limit: limit) } }
    public func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?) throws(StoreError) -> [(EntityType, String)] {
        try reading { try $0.conflicts(among: entities, of: patientID) }
    }

    public func liveOutcome(taskUUID: UUID, occurrence: Int) throws(StoreError) -> Outcome? {
        try reading { try $0.liveOutcome(taskUUID: taskUUID, occurrence: occurrence) }
    }
    public func allEntities(versions: VersionFilter = .history) throws(StoreError) -> [CareEntity] { try reading { try $0.allEntities(versions: versions) } }
    public func forEachCurrentOutcome(_ body: (Outcome) throws -> Void) throws { try read { try $0.forEachCurrentOutcome(body) } }
    public func currentOutcomeCount() throws(StoreError) -> Int { try reading { try $0.currentOutcomeCount() } }
    public func knowledgeVector() throws(StoreError) -> [RevisionRecord.Process] { try reading { try $0.knowledgeVector() } }

    @discardableResult
    public func add(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try writing { try $0.add(entities) } }
    @discardableResult
    public func update(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try writing { try $0.update(entities) } }
    @discardableResult
    public func delete(_ type: EntityType, ids: [String], of patientID: String?, at date: Date = Date()) throws(StoreError) -> [CareEntity] {
        try writing { try $0.delete(type, ids: ids, of: patientID, at: date) }
    }
    /// Runs several writes as one transaction: all of them, or none (an import of one patient).
    @discardableResult
    public func apply(_ operations: [StoreOperation], for patientID: String? = nil) throws(StoreError) -> [CareEntity] {
        try writing { try $0.apply(operations, for: patientID) }
    }
    @discardableResult
    public func merge(_ record: RevisionRecord) throws(StoreError) -> Int { try writing { try $0.merge(record) } }

    public func patientKnowledge(_ patientID: String, upTo revision: Int? = nil) throws(StoreError) -> KnowledgeVector {
        try reading { try $0.patientKnowledge(patientID, upTo: revision) }
    }
    public func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int? = nil) throws(StoreError) -> PatientVersions {
        try reading { try $0.patientVersions(patientID, notCoveredBy: since, upTo: revision) }
    }
    public func scopes(of uuids: [UUID]) throws(StoreError) -> [UUID: VersionScope] { try reading { try $0.scopes(of: uuids) } }
    public func processOwners(_ processes: [UUID]) throws(StoreError) -> [UUID: String] { try reading { try $0.processOwners(processes) } }
    public func isEnrolled(deviceID: String, patientID: String) throws(StoreError) -> Bool {
        try reading { try $0.isEnrolled(deviceID: deviceID, patientID: patientID) }
    }
    @discardableResult
    public func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int {
        try writing { try $0.mergeDeviceRecords(records, patientID: patientID, deviceKnowledge: deviceKnowledge) }
    }
}
