import CareStore
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import PostgresNIO

/// Connections to one PostgreSQL database for the store protocols, which are synchronous (as
/// SQLite's are): a call checks a connection out, runs its statements and waits for each answer
/// on its own thread, never on an event loop. The gateway calls stores off Swift's cooperative
/// threads already (`CarePlanStore.perform`, `Blocking.run`), so waiting there stalls nothing.
///
/// At most `maximumConnections` are open at once; a caller past that waits for one to come back.
/// A connection that failed is closed, not returned; the next caller opens a fresh one.
public final class PostgresDatabase: Sendable {
    public let location: PostgresLocation
    public let maximumConnections: Int
    let configuration: PostgresConnection.Configuration
    let group: MultiThreadedEventLoopGroup
    let idle = NIOLockedValueBox<[PooledConnection]>([])
    let slots: DispatchSemaphore
    let nextID = NIOLockedValueBox(0)
    let logger: Logger

    /// Opens nothing yet: the first call connects. `password` comes from
    /// `PostgresLocation.password(file:)`.
    public init(_ location: PostgresLocation, password: String?, maximumConnections: Int = 8, logger: Logger? = nil) throws(StoreError) {
        self.location = location
        self.maximumConnections = max(1, maximumConnections)
        var logger = logger ?? Logger(label: "caregate.postgres")
        logger.logLevel = logger.logLevel < .warning ? .warning : logger.logLevel
        self.logger = logger
        var configuration = PostgresConnection.Configuration(host: location.host, port: location.port, username: location.user,
                                                             password: password, database: location.database,
                                                             tls: try PostgresDatabase.tls(location))
        configuration.options.connectTimeout = .seconds(10)
        configuration.options.additionalStartupParameters = [("application_name", "caregate")]
        self.configuration = configuration
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        slots = DispatchSemaphore(value: self.maximumConnections)
    }

    /// Closes the idle connections, waiting for each (connections in use close when they come back).
    public func close() {
        for pooled in idle.withLockedValue({ idle in defer { idle = [] }; return idle }) { PostgresDatabase.close(pooled.connection) }
    }

    deinit {
        close()
        group.shutdownGracefully { _ in }
    }

    /// Closes a connection and waits until its channel is closed (the driver requires it before release).
    static func close(_ connection: PostgresConnection) {
        let closing: EventLoopFuture<Void> = connection.close()
        _ = try? closing.wait()
    }

    /// `verify-full`: the server's certificate is checked against the CA bundle (or the
    /// system's CAs) and must name the host.
    static func tls(_ location: PostgresLocation) throws(StoreError) -> PostgresConnection.Configuration.TLS {
        guard location.tls == .verifyFull else { return .disable }
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.certificateVerification = .fullVerification
        if let bundle = location.caBundle {
            guard FileManager.default.isReadableFile(atPath: bundle) else {
                throw StoreError.database(path: location.description, message: "sslrootcert \(bundle) cannot be read")
            }
            tls.trustRoots = .file(bundle)
        }
        do {
            return .require(try NIOSSLContext(configuration: tls))
        } catch {
            throw StoreError.database(path: location.description, message: "sslrootcert \(location.caBundle ?? "(system)"): \(error)")
        }
    }

    /// Runs `body` with a connection of its own, outside any transaction.
    public func withSession<T>(_ body: (PostgresSession) throws -> T) throws -> T {
        slots.wait()
        defer { slots.signal() }
        let pooled = try checkOut()
        let session = PostgresSession(pooled: pooled, database: self)
        do {
            let result = try body(session)
            checkIn(pooled, healthy: !session.broken.withLockedValue { $0 })
            return result
        } catch {
            checkIn(pooled, healthy: !session.broken.withLockedValue { $0 })
            throw error
        }
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    /// `readOnly` transactions see one snapshot and write nothing.
    public func transaction<T>(readOnly: Bool = false, _ body: (PostgresSession) throws -> T) throws -> T {
        try withSession { session in
            try session.execute(readOnly ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN")
            let result: T
            do {
                result = try body(session)
            } catch {
                try? session.execute("ROLLBACK")
                throw error
            }
            try session.execute("COMMIT")
            return result
        }
    }

    func checkOut() throws(StoreError) -> PooledConnection {
        while let pooled = idle.withLockedValue({ $0.popLast() }) {
            if !pooled.connection.isClosed { return pooled }
        }
        let id = nextID.withLockedValue { $0 += 1; return $0 }
        do {
            return PooledConnection(try PostgresConnection.connect(on: group.next(), configuration: configuration, id: id, logger: logger).wait())
        } catch {
            throw PostgresSession.storeError(error, location: location, doing: "connecting")
        }
    }

    func checkIn(_ pooled: PooledConnection, healthy: Bool) {
        if healthy && !pooled.connection.isClosed {
            idle.withLockedValue { $0.append(pooled) }
        } else {
            PostgresDatabase.close(pooled.connection)
        }
    }
}

/// A pooled connection and the statements prepared on it, each parsed and planned once per
/// connection rather than at every call (planning cost more than running the hot reads).
final class PooledConnection: Sendable {
    let connection: PostgresConnection
    let prepared = NIOLockedValueBox<[String: PreparedQuery]>([:])

    init(_ connection: PostgresConnection) {
        self.connection = connection
    }
}

/// One connection checked out of a `PostgresDatabase`: statements run one at a time, each
/// waited for. Errors are `StoreError`s naming the database and what the server said.
public struct PostgresSession: Sendable {
    let pooled: PooledConnection
    let database: PostgresDatabase
    var connection: PostgresConnection { pooled.connection }
    /// Set when a statement failed for a reason other than the server refusing it (the
    /// connection may be unusable): it is closed rather than reused.
    let broken = NIOLockedValueBox(false)

    /// Runs a query and returns its rows.
    @discardableResult
    public func query(_ query: PostgresQuery) throws(StoreError) -> [PostgresRow] {
        do {
            return try connection.query(query, logger: database.logger).wait().rows
        } catch {
            if (error as? PSQLError)?.code != .server { broken.withLockedValue { $0 = true } }
            throw PostgresSession.storeError(error, location: database.location, doing: nil)
        }
    }

    /// Runs a statement and returns how many rows it wrote (or returned).
    @discardableResult
    public func run(_ query: PostgresQuery) throws(StoreError) -> Int {
        do {
            return try connection.query(query, logger: database.logger).wait().metadata.rows ?? 0
        } catch {
            if (error as? PSQLError)?.code != .server { broken.withLockedValue { $0 = true } }
            throw PostgresSession.storeError(error, location: database.location, doing: nil)
        }
    }

    /// Runs a statement prepared once per connection: `sql` is constant text (no values in it)
    /// naming its parameters `$1`, `$2`…, each cast to its type (`$1::text`), and `binds` gives
    /// them in order. For the hot reads (a device's token, a patient's knowledge), where
    /// planning cost more than running. Select every column as text (`clock::text`): the
    /// driver's prepared path describes the columns as text but receives them in binary,
    /// which is the same bytes for text only.
    public func prepared(_ sql: String, _ binds: [PostgresData]) throws(StoreError) -> [PostgresRow] {
        do {
            let key = sql
            let statement: PreparedQuery
            if let kept = pooled.prepared.withLockedValue({ $0[key] }) {
                statement = kept
            } else {
                statement = try connection.prepare(query: key).wait()
                pooled.prepared.withLockedValue { $0[key] = statement }
            }
            return try statement.execute(binds).wait()
        } catch {
            // The driver reports this path's errors in its older type.
            if case PostgresError.server = error {} else if (error as? PSQLError)?.code != .server { broken.withLockedValue { $0 = true } }
            throw PostgresSession.storeError(error, location: database.location, doing: nil)
        }
    }

    /// Runs one statement without parameters.
    public func execute(_ sql: String) throws(StoreError) {
        try query(PostgresQuery(unsafeSQL: sql))
    }

    /// The server's SQLSTATE of a refused statement (`23505`: a unique rule broken).
    public static func sqlState(_ error: StoreError) -> String? {
        guard case .database(_, let message) = error, message.hasPrefix("["), let end = message.firstIndex(of: "]") else { return nil }
        return String(message[message.index(after: message.startIndex)..<end])
    }

    /// A driver error as a `StoreError`: the server's SQLSTATE and message when it answered
    /// (`[23505] duplicate key value violates unique constraint …`), else what failed in transit.
    static func storeError(_ error: any Error, location: PostgresLocation, doing: String?) -> StoreError {
        if let error = error as? StoreError { return error }
        let prefix = doing.map { "\($0): " } ?? ""
        guard let psql = error as? PSQLError else { return .database(path: location.description, message: prefix + "\(error)") }
        if let info = psql.serverInfo, let message = info[.message] {
            let detail = info[.detail].map { " (\($0))" } ?? ""
            return .database(path: location.description, message: "[\(info[.sqlState] ?? "?")] \(prefix)\(message)\(detail)")
        }
        let cause = psql.underlying.map { "\($0)" } ?? "\(psql.code)"
        return .database(path: location.description, message: prefix + cause)
    }
}
