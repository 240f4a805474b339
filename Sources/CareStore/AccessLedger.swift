import Foundation
import GRDB

/// What the server's security decisions rest on, kept in the store so that every gateway over
/// one store decides alike: wrong-secret attempts per client (several instances must not give a
/// guesser several budgets) and the dashboard's sessions (a load balancer without sticky
/// sessions must not sign operators out). The server keeps session ids here as SHA-256 hashes
/// only: a copy of the database signs no one in.
public protocol AccessLedger: Sendable {
    /// Takes an attempt for `client` in the sliding `window`: nil when it may try (the attempt
    /// counts until `releaseAttempt`), else the seconds until it may. Attempts taken at once,
    /// by any instance, are held to `limit` as attempts taken one after another.
    func reserveAttempt(client: String, limit: Int, window: TimeInterval, now: Date) throws(StoreError) -> Int?
    /// Gives back the client's newest attempt (it turned out right).
    func releaseAttempt(client: String) throws(StoreError)
    /// Keeps a new session (by its id's hash) with its CSRF token.
    func openSession(idHash: String, csrf: String, now: Date) throws(StoreError)
    /// The session's CSRF token when it is known and was used within `idleTimeout`; its idle
    /// clock restarts. A session idle longer is ended.
    func touchSession(idHash: String, idleTimeout: TimeInterval, now: Date) throws(StoreError) -> String?
    /// Ends a session at once (the operator signed out).
    func closeSession(idHash: String) throws(StoreError)
    /// Takes one of `limit` slots for `key` (a device's sync calls in flight) until `now + lease`:
    /// nil when all are held. Every instance over the store takes from the same slots, so a
    /// device is held to `limit` calls however many gateways serve it; the slot of an instance
    /// that died frees itself when its lease ends.
    func enterCall(key: String, limit: Int, lease: TimeInterval, now: Date) throws(StoreError) -> CallSlot?
    /// Frees a slot, unless its lease ended and another call holds it now.
    func leaveCall(_ slot: CallSlot) throws(StoreError)
}

/// One of a key's call slots, as `AccessLedger.enterCall` gave it.
public struct CallSlot: Sendable, Hashable {
    /// The key the slot is one of (a device's id).
    public var key: String
    /// Which of the key's slots, from 0.
    public var number: Int
    /// This call's own mark on the slot (a later holder's differs).
    public var holder: UUID

    /// A slot as a ledger hands it out.
    public init(key: String, number: Int, holder: UUID) {
        self.key = key
        self.number = number
        self.holder = holder
    }
}

extension AccessLedger {
    /// The seconds a client waits when its attempts in the window are used up: until the oldest leaves it.
    public static func wait(oldest: Date, window: TimeInterval, now: Date) -> Int {
        max(1, Int((window - now.timeIntervalSince(oldest)).rounded(.up)))
    }
}

extension SQLiteCarePlanStore: AccessLedger {
    static func registerAccessLedger(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v9-access-ledger") { db in
            try db.execute(sql: """
                CREATE TABLE access_attempt (id INTEGER PRIMARY KEY AUTOINCREMENT, client TEXT NOT NULL, at REAL NOT NULL);
                CREATE INDEX access_attempt_client ON access_attempt(client, at);
                CREATE INDEX access_attempt_at ON access_attempt(at);
                CREATE TABLE dashboard_session (id_hash TEXT PRIMARY KEY NOT NULL, csrf TEXT NOT NULL, last_used REAL NOT NULL) WITHOUT ROWID;
                """)
        }
    }

    /// One write transaction: SQLite's single writer makes reservations take turns.
    public func reserveAttempt(client: String, limit: Int, window: TimeInterval, now: Date) throws(StoreError) -> Int? {
        try writeDatabase { db in
            let start = now.addingTimeInterval(-window).timeIntervalSinceReferenceDate
            try db.execute(sql: "DELETE FROM access_attempt WHERE at <= ?", arguments: [start])
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, MIN(at) AS oldest FROM access_attempt WHERE client = ?", arguments: [client])
            if let row, let count: Int = row["n"], count >= limit, let oldest: Double = row["oldest"] {
                return Self.wait(oldest: Date(timeIntervalSinceReferenceDate: oldest), window: window, now: now)
            }
            try db.execute(sql: "INSERT INTO access_attempt (client, at) VALUES (?, ?)", arguments: [client, now.timeIntervalSinceReferenceDate])
            return nil
        }
    }

    public func releaseAttempt(client: String) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: "DELETE FROM access_attempt WHERE id = (SELECT MAX(id) FROM access_attempt WHERE client = ?)", arguments: [client])
        }
    }

    public func openSession(idHash: String, csrf: String, now: Date) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: "INSERT INTO dashboard_session (id_hash, csrf, last_used) VALUES (?, ?, ?)",
                           arguments: [idHash, csrf, now.timeIntervalSinceReferenceDate])
        }
    }

    public func touchSession(idHash: String, idleTimeout: TimeInterval, now: Date) throws(StoreError) -> String? {
        try writeDatabase { db in
            // Sessions idle too long end here, this one or any other.
            try db.execute(sql: "DELETE FROM dashboard_session WHERE last_used <= ?", arguments: [now.addingTimeInterval(-idleTimeout).timeIntervalSinceReferenceDate])
            guard let csrf = try String.fetchOne(db, sql: "SELECT csrf FROM dashboard_session WHERE id_hash = ?", arguments: [idHash]) else { return nil }
            try db.execute(sql: "UPDATE dashboard_session SET last_used = ? WHERE id_hash = ?", arguments: [now.timeIntervalSinceReferenceDate, idHash])
            return csrf
        }
    }

    /// Ends the session held under `idHash` (the default does so through a zero idle timeout).
    public func closeSession(idHash: String) throws(StoreError) {
        try writeDatabase { db in try db.execute(sql: "DELETE FROM dashboard_session WHERE id_hash = ?", arguments: [idHash]) }
    }

    static let callSlotTable = """
        CREATE TABLE IF NOT EXISTS call_slot (key TEXT NOT NULL, slot INTEGER NOT NULL, holder BLOB NOT NULL, lease_until REAL NOT NULL,
                                              PRIMARY KEY (key, slot)) WITHOUT ROWID
        """

    /// The call slots' own file: created owner-only, in WAL mode without a sync per commit
    /// (slots last a request; one lost to a power cut is a lease that was over anyway).
    static func openCallSlots(_ path: String) throws -> DatabaseQueue {
        if !FileManager.default.fileExists(atPath: path) {
            let fd = open(path, O_WRONLY | O_CREAT, 0o600)
            guard fd >= 0 else { throw StoreError.database(path: path, message: "cannot create: " + String(cString: strerror(errno))) }
            close(fd)
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: callSlotTable)
        }
        return queue
    }

    /// One write transaction on the slots' file: its single writer makes the takers take turns.
    public func enterCall(key: String, limit: Int, lease: TimeInterval, now: Date) throws(StoreError) -> CallSlot? {
        try writeCallSlots { db in
            let held = try Set(Int.fetchAll(db, sql: "SELECT slot FROM call_slot WHERE key = ? AND lease_until > ?",
                                            arguments: [key, now.timeIntervalSinceReferenceDate]))
            guard let free = (0..<limit).first(where: { !held.contains($0) }) else { return nil }
            let slot = CallSlot(key: key, number: free, holder: UUID())
            try db.execute(sql: "INSERT OR REPLACE INTO call_slot (key, slot, holder, lease_until) VALUES (?, ?, ?, ?)",
                           arguments: [key, free, slot.holder, now.addingTimeInterval(lease).timeIntervalSinceReferenceDate])
            return slot
        }
    }

    public func leaveCall(_ slot: CallSlot) throws(StoreError) {
        try writeCallSlots { db in
            try db.execute(sql: "DELETE FROM call_slot WHERE key = ? AND slot = ? AND holder = ?", arguments: [slot.key, slot.number, slot.holder])
        }
    }

    func writeCallSlots<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try callSlotWriter().write(body) } catch { throw wrap(error) }
    }

    /// The call slots' file, opened by the first call that needs it.
    func callSlotWriter() throws -> any DatabaseWriter {
        try callSlots.withLock { (writer: inout (any DatabaseWriter)?) throws -> any DatabaseWriter in
            if let writer { return writer }
            let opened = try SQLiteCarePlanStore.openCallSlots(path + "-calls")
            writer = opened
            return opened
        }
    }
}
