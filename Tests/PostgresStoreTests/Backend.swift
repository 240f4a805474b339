import CareStore
import Foundation
import GRDB
import PostgresNIO
import PostgresStore
import Testing

/// The store backends the store's, the gateway's and the server's suites run on: each test
/// taking `backend` runs once on SQLite and once on PostgreSQL (a database of its own).
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    var testDescription: String { rawValue }

    typealias GatewayTables = Outbox & DeviceRegistry & ImportLog & BulkFetchLog & AccessLedger & RefreshSchedule & AuditTrail
    /// Everything the gateway keeps, as `GatewayServer.Store` needs it.
    typealias Store = any CarePlanStore & GatewayTables

    /// A new, empty store of this backend (a file for SQLite, a database for PostgreSQL), or
    /// nil after a SKIPPED line when there is no PostgreSQL to test on.
    func freshStore(_ test: String = #function) throws -> Store? {
        switch self {
        case .sqlite:
            return try SQLiteCarePlanStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(UUID().uuidString).sqlite").path)
        case .postgres:
            guard let (location, password) = try TestPostgres.freshLocation(test) else { return nil }
            return try PostgresCarePlanStore(location, password: password)
        }
    }

    /// The gateway's own tables of a new store (the suites that test only those).
    func freshTables(_ test: String = #function) throws -> (any GatewayTables)? { try freshStore(test) }

    /// A second handle on the same store, as another process (another instance) opens it.
    static func reopen(_ store: Store) throws -> Store {
        if let sqlite = store as? SQLiteCarePlanStore { return try SQLiteCarePlanStore(path: sqlite.path) }
        let postgres = try #require(store as? PostgresCarePlanStore)
        return try PostgresCarePlanStore(postgres.database.location, password: TestPostgres.cluster?.password)
    }

    /// Runs SQL on the store's own database behind its back, as someone with the file or the role would.
    static func tamper(_ store: Store, _ sql: String) throws {
        if let sqlite = store as? SQLiteCarePlanStore {
            try DatabaseQueue(path: sqlite.path).write { try $0.execute(sql: sql) }
        } else {
            let postgres = try #require(store as? PostgresCarePlanStore)
            try postgres.database.withSession { _ = try $0.query(PostgresQuery(unsafeSQL: sql)) }
        }
    }

    /// Every byte the store keeps (a SQLite file and its log; every PostgreSQL table's rows as
    /// text): what a test searches for secrets that must never be stored in clear.
    static func everythingStored(_ store: Store) throws -> Data {
        if let sqlite = store as? SQLiteCarePlanStore {
            return try Data(contentsOf: URL(fileURLWithPath: sqlite.path)) + ((try? Data(contentsOf: URL(fileURLWithPath: sqlite.path + "-wal"))) ?? Data())
        }
        let postgres = try #require(store as? PostgresCarePlanStore)
        return try postgres.database.withSession { session in
            var text = ""
            for table in try session.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'") {
                let name = try table.decode(String.self)
                for row in try session.query(PostgresQuery(unsafeSQL: "SELECT row_to_json(t)::text FROM \"\(name)\" t")) { text += try row.decode(String.self) }
            }
            return Data(text.utf8)
        }
    }
}
