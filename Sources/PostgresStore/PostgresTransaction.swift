import CareStore
import Foundation

extension PostgresCarePlanStore {
    /// One transaction's view of the store: what `read {}` and `write {}` hand their body, and
    /// what every one-call method of the store runs in. Its writes go through `VersionWriter`'s
    /// rules over `PostgresVersionRows`, which take each patient's clock row before reading
    /// what a write depends on.
    struct Transaction: CarePlanWriter {
        let session: PostgresSession
        let rows: PostgresVersionRows

        init(session: PostgresSession) {
            self.session = session
            rows = PostgresVersionRows(session: session)
        }

        var writer: VersionWriter<PostgresVersionRows> { VersionWriter(rows: rows) }

        /// Runs `body`, reporting the driver's and the decoder's errors as `StoreError`.
        func run<T>(_ body: () throws -> T) throws(StoreError) -> T {
            do { return try body() } catch { throw PostgresCarePlanStore.storeError(error, session.database) }
        }

        func add(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try run { try writer.add(entities, patientID: nil) } }

        func update(_ entities: [CareEntity]) throws(StoreError) -> [CareEntity] { try run { try writer.update(entities, patientID: nil) } }

        func delete(_ type: EntityType, ids: [String], of patientID: String?, at date: Date) throws(StoreError) -> [CareEntity] {
            try run { try writer.delete(type, ids: ids, patientID: patientID, at: date) }
        }

        func apply(_ operations: [StoreOperation], for patientID: String?) throws(StoreError) -> [CareEntity] {
            try run { try writer.apply(operations, patientID: patientID) }
        }

        func merge(_ record: RevisionRecord) throws(StoreError) -> Int { try run { try writer.merge(record) } }

        func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int {
            try run { try writer.mergeDeviceRecords(records, patientID: patientID, deviceKnowledge: deviceKnowledge) }
        }
    }
}

/// `read {}`, `write {}` and `writeGroup`, as SQLite's store has them.
extension PostgresCarePlanStore: CarePlanStore {
    /// Runs a read-only body on one snapshot (`REPEATABLE READ`): the driver's errors as
    /// `StoreError`, the body's own unchanged.
    public func read<T>(_ body: (any CarePlanReader) throws -> T) throws -> T {
        try database.transaction(readOnly: true) { session in try body(Transaction(session: session)) }
    }

    /// Runs a body in one write transaction: committed when it returns, rolled back when it throws.
    public func write<T>(_ body: (any CarePlanWriter) throws -> T) throws -> T {
        try database.transaction { session in try body(Transaction(session: session)) }
    }

    /// Each body in a savepoint of its own, all under one commit. A body whose statement the
    /// server refused leaves the transaction unusable until its savepoint is rolled back, so
    /// every body has one (PostgreSQL's savepoints cost a subtransaction id, not a page copy).
    public func writeGroup<T>(_ bodies: [(any CarePlanWriter) throws -> T]) -> [Result<T, any Error>] {
        do {
            return try database.transaction { session in
                let tx = Transaction(session: session)
                return try bodies.map { body in
                    try session.execute("SAVEPOINT body")
                    do {
                        let result = try body(tx)
                        try session.execute("RELEASE SAVEPOINT body")
                        return .success(result)
                    } catch {
                        try session.execute("ROLLBACK TO SAVEPOINT body")
                        tx.rows.forgetLocks()
                        return .failure(error)
                    }
                }
            }
        } catch {
            let failure = PostgresCarePlanStore.storeError(error, database)
            return bodies.map { _ in .failure(failure) }
        }
    }

    /// `read {}` for the store's own one-call reads, every error as `StoreError`.
    func reading<T>(_ body: (Transaction) throws -> T) throws(StoreError) -> T {
        do { return try database.transaction(readOnly: true) { try body(Transaction(session: $0)) } } catch {
            throw PostgresCarePlanStore.storeError(error, database)
        }
    }

    /// `write {}` for the store's own one-call writes, every error as `StoreError`.
    func writing<T>(_ body: (Transaction) throws -> T) throws(StoreError) -> T {
        do { return try database.transaction { try body(Transaction(session: $0)) } } catch {
            throw PostgresCarePlanStore.storeError(error, database)
        }
    }
}

/// Every read and write of the store alone is one transaction of its own.
extension PostgresCarePlanStore {
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
