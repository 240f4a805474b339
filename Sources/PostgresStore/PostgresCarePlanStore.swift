import CareStore
import Foundation
import PostgresNIO

/// The gateway's store on PostgreSQL, for several `caregate serve` instances over one
/// database: the same protocols and semantics as `SQLiteCarePlanStore`, on tables the
/// migrations in `PostgresSchema` make. So far it keeps the gateway's own tables (the push
/// outbox, devices and enrollment codes, the import log, Bulk Data fetches); the care-plan
/// versions follow.
///
/// ```swift
/// let location = try PostgresLocation(url: "postgres://caregate@db.internal/care")
/// let store = try PostgresCarePlanStore(location, password: try location.password(file: "/etc/caregate/db-password", environment: [:]))
/// ```
public final class PostgresCarePlanStore: Sendable {
    public let database: PostgresDatabase

    /// Opens the database and brings its schema up to date (once, however many open it at once).
    public init(_ database: PostgresDatabase) throws(StoreError) {
        self.database = database
        do {
            try PostgresSchema.migrate(database)
            // One sync process per store, whichever instance opened it first.
            try database.withSession { session in
                try session.run("INSERT INTO store_meta (key, value) VALUES ('processID', \(UUID().uuidString)) ON CONFLICT (key) DO NOTHING")
            }
        } catch {
            throw PostgresCarePlanStore.storeError(error, database)
        }
    }

    public convenience init(_ location: PostgresLocation, password: String?, maximumConnections: Int = 8) throws(StoreError) {
        try self.init(PostgresDatabase(location, password: password, maximumConnections: maximumConnections))
    }

    /// One statement's work on a connection of its own, every error as a `StoreError`.
    @discardableResult
    func session<T>(_ body: (PostgresSession) throws -> T) throws(StoreError) -> T {
        do { return try database.withSession(body) } catch { throw PostgresCarePlanStore.storeError(error, database) }
    }

    /// A transaction's work, every error as a `StoreError`.
    func transaction<T>(_ body: (PostgresSession) throws -> T) throws(StoreError) -> T {
        do { return try database.transaction(body) } catch { throw PostgresCarePlanStore.storeError(error, database) }
    }

    static func storeError(_ error: any Error, _ database: PostgresDatabase) -> StoreError {
        error as? StoreError ?? .database(path: database.location.description, message: "\(error)")
    }
}

/// Instants as the store keeps them: seconds since 2001-01-01, as SQLite's store does.
extension Date {
    var storeSeconds: Double { timeIntervalSinceReferenceDate }

    init?(storeSeconds: Double?) {
        guard let storeSeconds else { return nil }
        self.init(timeIntervalSinceReferenceDate: storeSeconds)
    }
}
