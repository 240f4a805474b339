import Foundation
import GRDB
import JSON

/// A Bulk Data export being fetched into the store, kept so that an interrupted import resumes
/// where it stopped: the server's status URL, its manifest once done, and the files already
/// downloaded. The store keeps these as they come; it knows nothing of FHIR.
public struct BulkFetch: Sendable, Hashable {
    /// What was asked for (the kick-off URL without `_since`): one fetch per source at a time.
    public var source: String
    /// The server's status URL, polled until the export is done.
    public var statusURL: String
    /// When the export was kicked off.
    public var startedAt: Date
    /// The manifest's JSON, once the export is done.
    public var manifest: [UInt8]?
    /// The URLs of the files downloaded in full.
    public var downloaded: [String]

    /// A fetch as kept at kick-off, or as read back to resume it.
    public init(source: String, statusURL: String, startedAt: Date, manifest: [UInt8]? = nil, downloaded: [String] = []) {
        self.source = source
        self.statusURL = statusURL
        self.startedAt = startedAt
        self.manifest = manifest
        self.downloaded = downloaded
    }
}

extension BulkFetch {
    /// The downloaded files as every backend keeps them: a JSON array of URLs.
    public var downloadedJSON: String { JSONValue.array(downloaded.map { .string($0) }).serialized() }

    /// URLs read back from `downloadedJSON`.
    public static func downloaded(fromJSON text: String) -> [String] {
        (try? JSONValue.parse(Array(text.utf8)))?.arrayValue?.compactMap(\.stringValue) ?? []
    }
}

/// The store's record of Bulk Data fetches: those under way, and for each source the instant of
/// its last completed export (the `_since` of the next).
public protocol BulkFetchLog: Sendable {
    /// The fetch under way for `source`, if an earlier run left one.
    func bulkFetch(source: String) throws(StoreError) -> BulkFetch?
    /// Keeps the fetch (made or replaced).
    func saveBulkFetch(_ fetch: BulkFetch) throws(StoreError)
    /// Ends the source's fetch; a `transactionTime` is kept as the source's last.
    func finishBulkFetch(source: String, transactionTime: String?) throws(StoreError)
    /// The transaction time of the source's last completed export.
    func lastTransactionTime(source: String) throws(StoreError) -> String?
}

extension SQLiteCarePlanStore: BulkFetchLog {
    static func registerBulkFetchLog(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v6-bulk-fetch") { db in
            try db.execute(sql: """
                CREATE TABLE bulk_fetch (
                    source TEXT PRIMARY KEY NOT NULL,
                    status_url TEXT NOT NULL,
                    started_at REAL NOT NULL,
                    manifest BLOB,
                    downloaded TEXT NOT NULL
                ) WITHOUT ROWID;
                CREATE TABLE bulk_since (source TEXT PRIMARY KEY NOT NULL, transaction_time TEXT NOT NULL) WITHOUT ROWID;
                """)
        }
    }

    /// The fetch under way for `source`, if an earlier run left one.
    public func bulkFetch(source: String) throws(StoreError) -> BulkFetch? {
        do {
            return try pool.read { db in
                try Row.fetchOne(db, sql: "SELECT * FROM bulk_fetch WHERE source = ?", arguments: [source]).map { row in
                    let urls = BulkFetch.downloaded(fromJSON: row["downloaded"])
                    let manifest: Data? = row["manifest"]
                    let seconds: Double = row["started_at"]
                    return BulkFetch(source: source, statusURL: row["status_url"], startedAt: Date(timeIntervalSinceReferenceDate: seconds),
                                     manifest: manifest.map { [UInt8]($0) }, downloaded: urls)
                }
            }
        } catch {
            throw wrap(error)
        }
    }

    public func saveBulkFetch(_ fetch: BulkFetch) throws(StoreError) {
        let downloaded = fetch.downloadedJSON
        try writeDatabase { db in
            try db.execute(sql: "INSERT OR REPLACE INTO bulk_fetch (source, status_url, started_at, manifest, downloaded) VALUES (?, ?, ?, ?, ?)",
                           arguments: [fetch.source, fetch.statusURL, fetch.startedAt.timeIntervalSinceReferenceDate, fetch.manifest.map { Data($0) }, downloaded])
        }
    }

    public func finishBulkFetch(source: String, transactionTime: String?) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: "DELETE FROM bulk_fetch WHERE source = ?", arguments: [source])
            if let transactionTime {
                try db.execute(sql: "INSERT OR REPLACE INTO bulk_since (source, transaction_time) VALUES (?, ?)", arguments: [source, transactionTime])
            }
        }
    }

    public func lastTransactionTime(source: String) throws(StoreError) -> String? {
        do {
            return try pool.read { db in try String.fetchOne(db, sql: "SELECT transaction_time FROM bulk_since WHERE source = ?", arguments: [source]) }
        } catch {
            throw wrap(error)
        }
    }
}
