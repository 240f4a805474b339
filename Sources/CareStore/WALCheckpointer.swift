import Foundation
import GRDB
import GRDBSQLite

/// Copies committed pages from the write-ahead log into the database file, on a connection and a
/// queue of its own. SQLite's automatic checkpoint runs inside the committing call: a bulk write of
/// 100,000 versions would wait a further ~0.2 s for its log to be copied, although it is durable
/// once the log is synced. The writer turns the automatic checkpoint off and reports, through
/// SQLite's WAL hook, how many pages the log holds; past `thresholdBytes` of pages (4 MiB: where
/// SQLite's automatic checkpoint runs with its default pages) a passive checkpoint is queued
/// here. Passive checkpoints never block readers or the writer, and SQLite still checkpoints
/// when the last connection closes.
final class WALCheckpointer: @unchecked Sendable {
    let path: String
    /// The log's size that queues a checkpoint, in bytes (counted in the store's pages).
    let thresholdBytes: Int
    /// `thresholdBytes` in the store's pages, set when the writer is installed.
    let threshold = Locked<Int32>(1024)
    private let queue = DispatchQueue(label: "caregate.store.checkpoint", qos: .utility)
    private let lock = NSLock()
    private var scheduled = false
    /// Opened on first use, after the pool has put the file in WAL mode (only touched on `queue`).
    private var connection: DatabaseQueue?

    init(path: String, thresholdBytes: Int = 4 << 20) {
        self.path = path
        self.thresholdBytes = thresholdBytes
    }

    /// Makes `db` report its log size here instead of checkpointing in its own commits.
    func install(on db: Database) throws {
        try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 4096
        threshold.withLock { $0 = Int32(max(1, thresholdBytes / max(pageSize, 512))) }
        sqlite3_wal_hook(db.sqliteConnection, { context, _, _, pages in
            guard let context else { return SQLITE_OK }
            let checkpointer = Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue()
            if pages >= checkpointer.threshold.withLock({ $0 }) { checkpointer.schedule() }
            return SQLITE_OK
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Queues one passive checkpoint unless one is already waiting.
    func schedule() {
        lock.lock()
        if scheduled { lock.unlock(); return }
        scheduled = true
        lock.unlock()
        queue.async { [self] in
            lock.lock()
            scheduled = false
            lock.unlock()
            checkpoint()
        }
    }

    /// Waits for queued checkpoints to finish (tests, and closing a store deliberately).
    func waitUntilIdle() {
        queue.sync {}
    }

    private func checkpoint() {
        do {
            if connection == nil {
                var configuration = Configuration()
                configuration.busyMode = .timeout(10)
                connection = try DatabaseQueue(path: path, configuration: configuration)
            }
            try connection?.writeWithoutTransaction { db in _ = try db.checkpoint(.passive) }
        } catch {
            // A checkpoint that cannot run now (the file busy or gone) loses nothing: the pages
            // stay in the log, readers see them there, and the next commit queues another try.
        }
    }
}
