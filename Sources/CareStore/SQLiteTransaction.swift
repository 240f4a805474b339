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

        func questionnaires(of patientID: String, url: String, version: String?) throws(StoreError) -> [StoredQuestionnaire] {
            try run { try SQLiteCarePlanStore.questionnaires(of: patientID, url: url, version: version, db: db) }
        }

        func keep(_ questionnaires: [StoredQuestionnaire]) throws(StoreError) {
            try run { try SQLiteCarePlanStore.keep(questionnaires, db: db) }
        }

        func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int {
            try run { try store.writer(db).mergeDeviceRecords(records, patientID: patientID, deviceKnowledge: deviceKnowledge) }
        }
    }
}
