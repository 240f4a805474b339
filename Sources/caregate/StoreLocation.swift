import CareStore
import Diagnostics
import Foundation
import PostgresStore

/// Everything the gateway keeps, whichever backend keeps it.
typealias GatewayStore = any CarePlanStore & Outbox & DeviceRegistry & ImportLog & BulkFetchLog & AccessLedger & RefreshSchedule & AuditTrail

/// Where a store is: an SQLite file (the embedded default), or a PostgreSQL database named by a
/// `postgres://user@host:port/database` URL whose password comes from a file or
/// `$CAREGATE_STORE_PASSWORD`, never from the URL.
enum StoreLocation: CustomStringConvertible {
    case sqlite(path: String)
    case postgres(PostgresLocation, password: String?)

    /// `text` as `--store` and `store:` give it; `passwordFile` is `--store-password-file`.
    init(_ text: String, passwordFile: String?, environment: [String: String] = ProcessInfo.processInfo.environment) throws(StoreError) {
        guard PostgresLocation.names(text) else {
            if let passwordFile {
                throw StoreError.database(path: text, message: "a password file (\(passwordFile)) is for a postgres:// store; an SQLite file has none")
            }
            self = .sqlite(path: text)
            return
        }
        let location = try PostgresLocation(url: text)
        self = .postgres(location, password: try location.password(file: passwordFile, environment: environment))
    }

    /// Whether a command may make the store it names: only those that write (import, enroll,
    /// serve, store copy, store import) do; one that only reads, given a path where no store is
    /// (a typo), refuses rather than making an empty store and reporting nothing in it.
    enum Use {
        /// The store must exist.
        case existing
        /// The store is made when it does not exist, and the command says so.
        case creating
    }

    /// Opens the store, bringing its schema up to date; refused with "no store at …" when
    /// `use` is `.existing` and there is none, and nothing is made.
    func open(_ use: Use, maximumConnections: Int = 8) throws(StoreError) -> GatewayStore {
        switch self {
        case .sqlite(let path):
            let isNew = !FileManager.default.fileExists(atPath: path)
            if isNew, use == .existing { throw Self.noStore(path) }
            let store = try SQLiteCarePlanStore(path: path)
            if isNew { StandardError.print("created a new store at \(path)") }
            return store
        case .postgres(let location, let password):
            let database = try PostgresDatabase(location, password: password, maximumConnections: maximumConnections)
            let isNew: Bool
            do { isNew = try !PostgresSchema.isPresent(database) } catch {
                database.close()
                throw error
            }
            if isNew, use == .existing {
                database.close()
                throw Self.noStore(location.description)
            }
            let store = try PostgresCarePlanStore(database)
            if isNew { StandardError.print("created a new store in \(location)") }
            return store
        }
    }

    /// The refusal of a command that reads, given a store that does not exist.
    static func noStore(_ place: String) -> StoreError {
        .database(path: "no store at \(place)", message: "commands that only read make none; import, enroll, serve or store copy make one")
    }

    /// Where commands keep scratch files for this store (an import's staging, a Bulk Data
    /// download): beside an SQLite file, in the working directory for a database elsewhere.
    var localFolder: String {
        switch self {
        case .sqlite(let path): FilePath.folder(of: path)
        case .postgres: FileManager.default.currentDirectoryPath
        }
    }

    /// The base name of the scratch files kept for this store (`<name>.bulk`).
    var localName: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let location, _): localFolder + "/caregate-" + location.database
        }
    }

    /// Whether the store is an SQLite file not created yet (a dry run compares with an empty store).
    var isMissingFile: Bool {
        if case .sqlite(let path) = self { return !FileManager.default.fileExists(atPath: path) }
        return false
    }

    /// The file's path, or the URL without secrets.
    var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let location, _): location.description
        }
    }
}
