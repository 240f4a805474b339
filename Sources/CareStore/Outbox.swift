import Foundation
import GRDB

/// One entry of the push outbox: an entity version to deliver once, with the key that makes its
/// delivery idempotent on the receiving side, and the payload to send (opaque to the store).
public struct OutboxItem: Sendable, Hashable {
    /// The key prefix of audit entries queued for the EHR (`urn:caregate:audit|<AuditEvent id>`).
    public static let auditKeyPrefix = "urn:caregate:audit|"
    /// The SQL assignments that put a dead letter back in the queue as if new (both backends' columns).
    public static let requeue = "state = 'queued', attempts = 0, last_error = NULL, finished_at = NULL, claimed_by = NULL, lease_until = NULL"
    /// Where the item is in its delivery.
    public enum State: String, Sendable {
        /// Waiting to be sent (again).
        case queued
        /// Delivered once.
        case pushed
        /// Refused for good: a dead letter, waiting for an operator.
        case failed
    }

    /// The entity version (an outcome version): queued at most once.
    public var versionUUID: UUID
    /// The entity's logical id.
    public var entityID: String
    /// What the receiver knows it by (`urn:caregate:outcome|<id>`).
    public var idempotencyKey: String
    /// What to send, as the exporter made it (opaque to the store).
    public var payload: [UInt8]
    /// Queued, pushed, or failed for good (a dead letter).
    public var state: State = .queued
    /// How many deliveries were tried.
    public var attempts = 0
    /// The last failure, as the receiver or the network gave it.
    public var lastError: String?
    /// Where the receiver keeps it, once delivered.
    public var remoteLocation: String?
    /// When it was queued, and when it was delivered or given up (nil while queued).
    public var queuedAt: Date?
    /// When it was delivered or given up; nil while queued.
    public var finishedAt: Date?
    /// The payload is the only copy: no export can make the item again (an AuditEvent of
    /// `ehr.audit`), so a retry of its dead letter queues it again instead of taking it out.
    public var soleCopy = false

    /// A new item, queued.
    public init(versionUUID: UUID, entityID: String, idempotencyKey: String, payload: [UInt8]) {
        self.versionUUID = versionUUID
        self.entityID = entityID
        self.idempotencyKey = idempotencyKey
        self.payload = payload
    }
}

/// Outbox counts by state.
public struct OutboxCounts: Sendable, Equatable {
    /// Items waiting to be sent.
    public var queued = 0
    /// Items delivered.
    public var pushed = 0
    /// Items refused for good (dead letters).
    public var failed = 0

    /// Counts as given.
    public init(queued: Int = 0, pushed: Int = 0, failed: Int = 0) {
        self.queued = queued
        self.pushed = pushed
        self.failed = failed
    }
}

/// What became of one outbox item in a delivery attempt.
public enum OutboxDelivery: Sendable {
    /// Delivered: the receiver keeps it at `location`.
    case pushed(UUID, location: String?)
    /// Not delivered: `dead` when the receiver refused it for good, else it stays queued.
    case failed(UUID, error: String, dead: Bool)
}

/// The durable push outbox: entries survive crashes, a version is queued only once (so a re-run
/// never sends it twice as a new item), and every change of state is one committed write. The
/// gateway's push works through this protocol; `SQLiteCarePlanStore` keeps the outbox in the
/// store's own database.
public protocol Outbox: Sendable {
    /// Queues items whose versions are not queued yet; returns how many were new.
    @discardableResult
    func enqueue(_ items: [OutboxItem]) throws(StoreError) -> Int
    /// Outcome versions the store took since a push last settled them, oldest first, at most
    /// `limit`: what a push cycle exports, and all it reads, however many were pushed before.
    /// The store notes every outcome version it takes (a trigger, in the writing transaction),
    /// so none is missed whichever instance or device wrote it.
    func pendingOutcomeVersions(limit: Int) throws(StoreError) -> [UUID]
    /// Queues `items` and settles `pending` (the versions they were exported from, and those
    /// that gave nothing to send) in one transaction; returns how many items were new.
    @discardableResult
    func enqueue(_ items: [OutboxItem], settling pending: [UUID]) throws(StoreError) -> Int
    /// Takes the dead letters out, so that the next enqueue exports their versions again (they
    /// are pending again); returns how many there were.
    @discardableResult
    func forgetFailed() throws(StoreError) -> Int
    /// Takes these dead letters out (an operator's retry): the next push exports their outcome
    /// versions again. Versions that are not dead letters are left alone; returns how many went.
    @discardableResult
    func forgetFailed(versions: [UUID]) throws(StoreError) -> Int
    /// Which of `versions` the outbox holds in any state, each with the entity id it was queued
    /// under: what a push need not export again, and the identifier a later version continues.
    func outboxEntities(versions: [UUID]) throws(StoreError) -> [UUID: String]
    /// Items in a state, oldest first.
    func outbox(state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem]
    /// Takes up to `limit` queued items, oldest first, for `worker` until `now + lease`: items
    /// another worker holds under a lease not yet over are passed by, so several push workers
    /// (in one process or many, over one database) never send one item at once, and the items
    /// of a worker that died come back by themselves when its lease ends. Recording an item's
    /// delivery, or `release`, ends its lease.
    func claim(limit: Int, worker: String, lease: TimeInterval, now: Date) throws(StoreError) -> [OutboxItem]
    /// Ends the leases `worker` still holds (the items it did not get to): they are queued for anyone.
    func release(worker: String) throws(StoreError)
    /// Items in `state`, most recently finished (or queued) first: what an operator looks at.
    func latestOutbox(state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem]
    /// When each of these entities (outcome ids) was last delivered; those never pushed are absent.
    func lastPushed(entityIDs: [String]) throws(StoreError) -> [String: Date]
    /// Records the results of a batch in one transaction: all of them or, on error, none. A
    /// delivery or a dead letter ends the item's lease; a failure in passing keeps it (the
    /// worker tries it once per run, and `release` hands it back).
    func record(_ deliveries: [OutboxDelivery]) throws(StoreError)
    /// How many items are in each state (a count of every item: for status pages, not cycles).
    func outboxCounts() throws(StoreError) -> OutboxCounts
    /// How many items are queued (read from the queued items alone).
    func queuedCount() throws(StoreError) -> Int
}

extension Outbox {
    /// The first thousand items in a state, oldest first.
    public func outbox(state: OutboxItem.State) throws(StoreError) -> [OutboxItem] { try outbox(state: state, limit: 1000) }

    /// Queued items, oldest first.
    public func queuedOutbox(limit: Int = 1000) throws(StoreError) -> [OutboxItem] { try outbox(state: .queued, limit: limit) }

    /// Records a delivery.
    public func markPushed(_ version: UUID, location: String?) throws(StoreError) { try record([.pushed(version, location: location)]) }

    /// Records a failed attempt: `dead` moves the item to the dead-letter list (the receiver
    /// refused it); otherwise it stays queued for the next run.
    public func markAttempt(_ version: UUID, error: String, dead: Bool) throws(StoreError) {
        try record([.failed(version, error: error, dead: dead)])
    }
}

/// The outbox in the store's own database, so that an outcome and its queue entry share one file.
extension SQLiteCarePlanStore: Outbox {
    /// Queues items whose versions are not queued yet; returns how many were new.
    @discardableResult
    public func enqueue(_ items: [OutboxItem]) throws(StoreError) -> Int {
        try writeDatabase { db in try Self.enqueue(items, in: db) }
    }

    public func pendingOutcomeVersions(limit: Int) throws(StoreError) -> [UUID] {
        do {
            return try pool.read { db in try UUID.fetchAll(db, sql: "SELECT version_uuid FROM push_pending ORDER BY rowid LIMIT ?", arguments: [limit]) }
        } catch {
            throw wrap(error)
        }
    }

    @discardableResult
    public func enqueue(_ items: [OutboxItem], settling pending: [UUID]) throws(StoreError) -> Int {
        try writeDatabase { db in
            let added = try Self.enqueue(items, in: db)
            let settle = try db.cachedStatement(sql: "DELETE FROM push_pending WHERE version_uuid = ?")
            for version in pending { try settle.execute(arguments: [version]) }
            return added
        }
    }

    /// The SQL that makes the outcome versions of dead letters pending again (before they are
    /// taken out): the next push exports them anew.
    static let repend = "INSERT OR IGNORE INTO push_pending (version_uuid) SELECT version_uuid FROM push_outbox WHERE state = 'failed' AND NOT sole_copy"

    /// Queues items within a write already open (the audit trail queues its entries with their append).
    static func enqueue(_ items: [OutboxItem], in db: Database) throws -> Int {
        let statement = try db.cachedStatement(sql: """
            INSERT OR IGNORE INTO push_outbox (version_uuid, entity_id, idempotency_key, payload, queued_at, sole_copy) VALUES (?, ?, ?, ?, ?, ?)
            """)
        var added = 0
        let now = Date().timeIntervalSinceReferenceDate
        for item in items {
            try statement.execute(arguments: [item.versionUUID, item.entityID, item.idempotencyKey, Data(item.payload), now, item.soleCopy])
            added += db.changesCount
        }
        return added
    }

    /// Takes the dead letters out of the outbox, so that the next enqueue exports their outcome
    /// versions again (with the mappings as they are now); returns how many there were. Items
    /// whose outcome version is gone are simply dropped.
    @discardableResult
    public func forgetFailed() throws(StoreError) -> Int {
        try writeDatabase { db in
            try db.execute(sql: Self.repend)
            try db.execute(sql: "UPDATE push_outbox SET \(OutboxItem.requeue) WHERE state = 'failed' AND sole_copy")
            let requeued = db.changesCount
            try db.execute(sql: "DELETE FROM push_outbox WHERE state = 'failed'")
            return requeued + db.changesCount
        }
    }

    @discardableResult
    public func forgetFailed(versions: [UUID]) throws(StoreError) -> Int {
        try writeDatabase { db in
            var gone = 0
            for version in versions {
                try db.execute(sql: Self.repend + " AND version_uuid = ?", arguments: [version])
                try db.execute(sql: "UPDATE push_outbox SET \(OutboxItem.requeue) WHERE state = 'failed' AND version_uuid = ? AND sole_copy", arguments: [version])
                gone += db.changesCount
                try db.execute(sql: "DELETE FROM push_outbox WHERE state = 'failed' AND version_uuid = ?", arguments: [version])
                gone += db.changesCount
            }
            return gone
        }
    }

    public func outboxEntities(versions: [UUID]) throws(StoreError) -> [UUID: String] {
        do {
            return try pool.read { db in
                var entities: [UUID: String] = [:]
                let statement = try db.cachedStatement(sql: "SELECT entity_id FROM push_outbox WHERE version_uuid = ?")
                for version in versions {
                    if let entity = try String.fetchOne(statement, arguments: [version]) { entities[version] = entity }
                }
                return entities
            }
        } catch {
            throw wrap(error)
        }
    }

    public func queuedCount() throws(StoreError) -> Int {
        do { return try pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_outbox WHERE state = 'queued'") ?? 0 } } catch {
            throw wrap(error)
        }
    }

    public func outbox(state: OutboxItem.State, limit: Int = 1000) throws(StoreError) -> [OutboxItem] {
        try outboxItems(sql: "SELECT * FROM push_outbox WHERE state = ? ORDER BY queued_at, rowid LIMIT ?", state: state, limit: limit)
    }

    /// One write transaction (SQLite has one writer at a time): the items are picked and leased together.
    public func claim(limit: Int, worker: String, lease: TimeInterval, now: Date = Date()) throws(StoreError) -> [OutboxItem] {
        try writeDatabase { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT * FROM push_outbox WHERE state = 'queued' AND (lease_until IS NULL OR lease_until <= ?) ORDER BY queued_at, rowid LIMIT ?
                """, arguments: [now.timeIntervalSinceReferenceDate, limit])
            let statement = try db.cachedStatement(sql: "UPDATE push_outbox SET claimed_by = ?, lease_until = ? WHERE version_uuid = ?")
            let until = now.addingTimeInterval(lease).timeIntervalSinceReferenceDate
            for row in rows { try statement.execute(arguments: [worker, until, row["version_uuid"] as UUID]) }
            return rows.map(Self.outboxItem)
        }
    }

    public func release(worker: String) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: "UPDATE push_outbox SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = ?", arguments: [worker])
        }
    }

    public func latestOutbox(state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem] {
        try outboxItems(sql: "SELECT * FROM push_outbox WHERE state = ? ORDER BY COALESCE(finished_at, queued_at) DESC, rowid DESC LIMIT ?",
                        state: state, limit: limit)
    }

    public func lastPushed(entityIDs: [String]) throws(StoreError) -> [String: Date] {
        do {
            return try pool.read { db in
                var times: [String: Date] = [:]
                for start in stride(from: 0, to: entityIDs.count, by: 500) {
                    let chunk = Array(entityIDs[start..<min(start + 500, entityIDs.count)])
                    let marks = Array(repeating: "?", count: chunk.count).joined(separator: ",")
                    let sql = "SELECT entity_id, MAX(finished_at) AS at FROM push_outbox WHERE state = 'pushed' AND entity_id IN (\(marks)) GROUP BY entity_id"
                    for row in try Row.fetchAll(db, sql: sql, arguments: StatementArguments(chunk)) {
                        guard let seconds = row["at"] as Double? else { continue }
                        times[row["entity_id"]] = Date(timeIntervalSinceReferenceDate: seconds)
                    }
                }
                return times
            }
        } catch {
            throw wrap(error)
        }
    }

    func outboxItems(sql: String, state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem] {
        do {
            return try pool.read { db in try Row.fetchAll(db, sql: sql, arguments: [state.rawValue, limit]).map(Self.outboxItem) }
        } catch {
            throw wrap(error)
        }
    }

    static func outboxItem(_ row: Row) -> OutboxItem {
        func date(_ column: String) -> Date? {
            guard let seconds = row[column] as Double? else { return nil }
            return Date(timeIntervalSinceReferenceDate: seconds)
        }
        var item = OutboxItem(versionUUID: row["version_uuid"], entityID: row["entity_id"], idempotencyKey: row["idempotency_key"],
                              payload: [UInt8]((row["payload"] as Data?) ?? Data()))
        item.state = OutboxItem.State(rawValue: row["state"]) ?? .queued
        item.attempts = row["attempts"]
        item.lastError = row["last_error"]
        item.remoteLocation = row["remote_location"]
        item.queuedAt = date("queued_at")
        item.finishedAt = date("finished_at")
        item.soleCopy = row["sole_copy"]
        return item
    }

    /// Records the results of a batch in one transaction: all of them or, on error, none.
    public func record(_ deliveries: [OutboxDelivery]) throws(StoreError) {
        let now = Date().timeIntervalSinceReferenceDate
        try writeDatabase { db in
            for delivery in deliveries {
                switch delivery {
                case .pushed(let version, let location):
                    try db.execute(sql: """
                        UPDATE push_outbox SET state = 'pushed', attempts = attempts + 1, remote_location = ?, last_error = NULL, finished_at = ?,
                                               claimed_by = NULL, lease_until = NULL
                        WHERE version_uuid = ?
                        """, arguments: [location, now, version])
                case .failed(let version, let error, let dead):
                    try db.execute(sql: """
                        UPDATE push_outbox SET state = ?, attempts = attempts + 1, last_error = ?, finished_at = ?,
                                               claimed_by = CASE WHEN ? THEN NULL ELSE claimed_by END,
                                               lease_until = CASE WHEN ? THEN NULL ELSE lease_until END
                        WHERE version_uuid = ?
                        """, arguments: [dead ? "failed" : "queued", error, dead ? now : nil, dead, dead, version])
                }
            }
        }
    }

    /// How many items are in each state.
    public func outboxCounts() throws(StoreError) -> OutboxCounts {
        do {
            return try pool.read { db in
                var counts = OutboxCounts()
                for row in try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM push_outbox GROUP BY state") {
                    switch row["state"] as String {
                    case "queued": counts.queued = row["n"]
                    case "pushed": counts.pushed = row["n"]
                    default: counts.failed = row["n"]
                    }
                }
                return counts
            }
        } catch {
            throw wrap(error)
        }
    }
}
