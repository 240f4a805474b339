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

    /// Half the connections: writers of different patients run at once, and reads (a device's
    /// pull, the dashboard) still find a connection.
    public var concurrentWriters: Int { max(1, database.maximumConnections / 2) }

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
