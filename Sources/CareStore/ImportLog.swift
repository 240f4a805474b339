import Foundation
import GRDB
import JSON

/// One import run as the store keeps it: when, from where, its counts by name (`files`,
/// `created`, `failedPatients`, `skip`…) and its whole report (the JSON `caregate import --report`
/// writes), so operators can read what each run did long after it.
public struct ImportRun: Sendable, Hashable {
    /// The run's number in the log (0 until it is kept).
    public var id: Int64
    /// When the run started.
    public var startedAt: Date
    /// The files, or the EHR refresh, the run read.
    public var source: String
    /// How many entities the run created, updated, left unchanged and deleted, by kind of change.
    public var counts: [String: Int]
    /// Empty in lists (`importRuns(limit:)`); whole from `importRun(id:)`.
    public var report: [UInt8]

    /// A run as `caregate import` logs it.
    public init(id: Int64 = 0, startedAt: Date, source: String, counts: [String: Int], report: [UInt8]) {
        self.id = id
        self.startedAt = startedAt
        self.source = source
        self.counts = counts
        self.report = report
    }
}

extension ImportRun {
    /// The counts as every backend keeps them: one JSON object, keys sorted.
    public var countsJSON: String {
        JSONValue.object(counts.sorted { $0.key < $1.key }.map { ($0.key, .number(Double($0.value))) }).serialized()
    }

    /// Counts read back from `countsJSON` (what is not a number is left out).
    public static func counts(fromJSON text: String) -> [String: Int] {
        var counts: [String: Int] = [:]
        if case .object(let members)? = try? JSONValue.parse(Array(text.utf8)) {
            for (key, value) in members { counts[key] = value.numberValue.map { Int($0) } }
        }
        return counts
    }
}

/// The record of import runs, beside the store's versions.
public protocol ImportLog: Sendable {
    /// Keeps a run; returns its id.
    @discardableResult
    func recordImport(_ run: ImportRun) throws(StoreError) -> Int64
    /// The latest runs, newest first, without their reports.
    func importRuns(limit: Int) throws(StoreError) -> [ImportRun]
    /// The run with this number, if the log holds it.
    func importRun(id: Int64) throws(StoreError) -> ImportRun?
}

extension SQLiteCarePlanStore: ImportLog {
    static func registerImportLog(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v5-import-runs") { db in
            try db.execute(sql: """
                CREATE TABLE import_run (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    started_at REAL NOT NULL,
                    source TEXT NOT NULL,
                    counts TEXT NOT NULL,
                    report BLOB NOT NULL
                );
                """)
        }
    }

    @discardableResult
    public func recordImport(_ run: ImportRun) throws(StoreError) -> Int64 {
        try writeDatabase { db in
            try db.execute(sql: "INSERT INTO import_run (started_at, source, counts, report) VALUES (?, ?, ?, ?)",
                           arguments: [run.startedAt.timeIntervalSinceReferenceDate, run.source, run.countsJSON, Data(run.report)])
            return db.lastInsertedRowID
        }
    }

    public func importRuns(limit: Int) throws(StoreError) -> [ImportRun] {
        try importRows(sql: "SELECT id, started_at, source, counts, x'' AS report FROM import_run ORDER BY id DESC LIMIT ?", arguments: [limit])
    }

    /// The run with this number, if the log holds it.
    public func importRun(id: Int64) throws(StoreError) -> ImportRun? {
        try importRows(sql: "SELECT * FROM import_run WHERE id = ?", arguments: [id]).first
    }

    func importRows(sql: String, arguments: StatementArguments) throws(StoreError) -> [ImportRun] {
        do {
            return try pool.read { db in
                try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                    let counts = ImportRun.counts(fromJSON: row["counts"])
                    let seconds: Double = row["started_at"]
                    let report: Data = row["report"] ?? Data()
                    return ImportRun(id: row["id"], startedAt: Date(timeIntervalSinceReferenceDate: seconds), source: row["source"],
                                     counts: counts, report: [UInt8](report))
                }
            }
        } catch {
            throw wrap(error)
        }
    }
}
