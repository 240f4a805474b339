import JSON
import Foundation
import GRDB
import GRDBSQLite

#if canImport(Glibc)
import Glibc
#endif

/// The care-plan store on SQLite (through GRDB): one row per immutable version with the
/// version's CareKit JSON and indexed query columns, in WAL mode with full synchronous commits,
/// every multi-entity write in one transaction. The file is created readable by its owner only.
/// `SQLiteCarePlanStore(inMemory: ())` keeps everything in memory (golden tests, tools, tests).
///
/// ```swift
/// let store = try SQLiteCarePlanStore(path: "caregate.sqlite")
/// try store.add([.patient(patient), .carePlan(plan), .task(task)])
/// let today = try store.events(from: startOfDay, to: endOfDay, tasks: EntityQuery())
/// ```
public final class SQLiteCarePlanStore: CarePlanStore, @unchecked Sendable {
    /// The file, or `:memory:`.
    public let path: String
    /// A pool of connections for a file (readers beside one writer), a single queue in memory.
    let pool: any DatabaseWriter
    /// Moves committed pages from the log into the database file in the background (files only).
    let checkpointer: WALCheckpointer?
    /// Devices' call slots (`AccessLedger.enterCall`): a file of their own beside the store
    /// (`<path>-calls`), so that taking one never waits behind the store's writer or its sync.
    /// Opened (made, the first time) by the first call that takes a slot: a command that serves
    /// no device (an import, an export) never opens or closes it.
    let callSlots: Locked<(any DatabaseWriter)?>
    /// Decoded versions by uuid. Versions never change, so the cache never goes stale (only the
    /// successor bookkeeping does, and that is read from the row each time).
    private var cache: [UUID: CareEntity] = [:]
    private let cacheLock = NSLock()
    /// Emptied when full: about 20 MB of decoded versions (a few patients' years of outcomes).
    private static let cacheLimit = 20_000
    /// The newest revision committed when the running write transaction began (nil outside
    /// one; writes take turns): rows up to it are committed, so a version a write decodes from
    /// one may be cached (the task an outcome names, decoded for every push otherwise).
    let writeStart = Locked<Int?>(nil)

    /// Opens (creating if needed) the store at `path`.
    public init(path: String) throws(StoreError) {
        self.path = path
        do {
            try SQLiteCarePlanStore.create(path)
            callSlots = Locked(nil)
            let checkpointer = WALCheckpointer(path: path)
            self.checkpointer = checkpointer
            var configuration = SQLiteCarePlanStore.configuration
            configuration.prepareDatabase { db in
                // The writer's large transactions keep their dirty pages in memory until commit
                // instead of spilling (and re-spilling) them to the WAL: 64 MiB at most. Readers
                // (up to five) keep 4 MiB each: a served store's memory stays bounded.
                try db.execute(sql: db.configuration.readonly ? "PRAGMA cache_size = -4096" : "PRAGMA cache_size = -65536")
                // A savepoint's journal (each page's image before the savepoint first changes it:
                // a group of writes that one body refused runs again with one savepoint per
                // body) in memory, not a temp file.
                if !db.configuration.readonly { try db.execute(sql: "PRAGMA temp_store = MEMORY") }
                // Checkpoints run off the writer's path (see `WALCheckpointer`).
                try checkpointer.install(on: db)
            }
            pool = try DatabasePool(path: path, configuration: configuration)
            // The schema's migrations commit one by one under the pool's `synchronous = NORMAL`:
            // a new store's thirteen commits are not each synced. A power cut can lose only the
            // last of them, never leave the file inconsistent (WAL), and the next open runs what
            // was lost again.
            try SQLiteCarePlanStore.prepare(pool)
            // From here every commit syncs the log, so that what a caller was told is stored
            // survives a power cut (the first such commit syncs the migrations' frames with it).
            // Set on the writer once the pool is open: the pool puts the file in WAL mode after
            // `prepareDatabase`, and with it sets `synchronous = NORMAL` (which syncs only at
            // checkpoints: the last commits may be lost).
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.database(path: path, message: "\(error)")
        }
    }

    /// A store in memory, gone with its last reference: GRDB's in-memory `DatabaseQueue`, with
    /// the same schema and rules as a file.
    /// `processID` fixes the store's sync process (reproducible fixtures: tests, fuzzing).
    public init(inMemory: Void, processID: UUID? = nil) throws(StoreError) {
        path = ":memory:"
        checkpointer = nil
        do {
            pool = try DatabaseQueue(configuration: SQLiteCarePlanStore.configuration)
            try SQLiteCarePlanStore.prepare(pool, processID: processID ?? UUID())
            callSlots = Locked(pool)
            try pool.write { db in try db.execute(sql: SQLiteCarePlanStore.callSlotTable) }
        } catch {
            throw StoreError.database(path: path, message: "\(error)")
        }
    }

    /// Creates the file when there is none, with owner-only permissions (SQLite gives its -wal
    /// and -shm files the same) and 4 KiB pages (fixed once WAL mode is on). A device's outcomes
    /// land in a page of each index apiece, and every commit writes those pages whole to the log
    /// and syncs them: 16 KiB pages wrote four times the bytes (device POSTs 15% slower, bulk
    /// writes 6% faster; docs/performance.md). Stores made with 16 KiB pages keep them.
    /// Another process creating the file at the same moment is fine: one of them does.
    static func create(_ path: String) throws {
        guard !FileManager.default.fileExists(atPath: path) else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        if fd < 0 {
            if errno == EEXIST { return }
            throw StoreError.database(path: path, message: "cannot create: " + String(cString: strerror(errno)))
        }
        close(fd)
        let setup = try DatabaseQueue(path: path, configuration: configuration)
        try setup.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA page_size = 4096; VACUUM") }
        try setup.close()
    }

    static var configuration: Configuration {
        var configuration = Configuration()
        // Another process's writer holds the lock for its transaction: wait for it.
        configuration.busyMode = .timeout(10)
        return configuration
    }

    /// The schema, and the store's sync process id (made once, so that reads can name it).
    static func prepare(_ writer: any DatabaseWriter, processID: UUID = UUID()) throws {
        // GRDB checks which migrations ran before taking the write lock: two processes opening a
        // new store together both try, and the second fails once the first has committed. Its
        // retry then finds the migrations done.
        for attempt in 1...5 {
            do {
                try migrator.migrate(writer)
                break
            } catch let error as DatabaseError {
                if try writer.read({ try migrator.hasCompletedMigrations($0) }) { break }
                if attempt == 5 { throw error }
            }
        }
        try writer.write { db in
            try db.execute(sql: "INSERT OR IGNORE INTO store_meta (key, value) VALUES ('processID', ?)", arguments: [processID.uuidString])
        }
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE entity_version (
                    revision INTEGER PRIMARY KEY,
                    uuid BLOB NOT NULL UNIQUE,
                    kind TEXT NOT NULL,
                    id TEXT NOT NULL,
                    effective_date REAL NOT NULL,
                    deleted_date REAL,
                    next_uuids TEXT,
                    superseded_date REAL,
                    remote_id TEXT,
                    group_identifier TEXT,
                    parent_uuid BLOB,
                    occurrence INTEGER,
                    event_start REAL,
                    json TEXT NOT NULL
                );
                CREATE INDEX entity_version_kind_id ON entity_version(kind, id, effective_date);
                CREATE INDEX entity_version_parent ON entity_version(parent_uuid, event_start) WHERE parent_uuid IS NOT NULL;
                CREATE INDEX entity_version_remote ON entity_version(kind, remote_id) WHERE remote_id IS NOT NULL;
                CREATE INDEX entity_version_group ON entity_version(kind, group_identifier) WHERE group_identifier IS NOT NULL;
                CREATE UNIQUE INDEX live_outcome_per_occurrence ON entity_version(parent_uuid, occurrence)
                    WHERE kind = 'outcome' AND next_uuids IS NULL AND deleted_date IS NULL;
                CREATE TABLE store_meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL);
                CREATE TABLE entity_tag (
                    tag TEXT NOT NULL,
                    uuid BLOB NOT NULL,
                    PRIMARY KEY (tag, uuid)
                ) WITHOUT ROWID;
                """)
        }
        // The push outbox: one row per outcome version, queued once (see `Outbox`).
        migrator.registerMigration("v2-outbox") { db in
            try db.execute(sql: """
                CREATE TABLE push_outbox (
                    version_uuid BLOB PRIMARY KEY NOT NULL,
                    entity_id TEXT NOT NULL,
                    idempotency_key TEXT NOT NULL,
                    payload BLOB NOT NULL,
                    state TEXT NOT NULL DEFAULT 'queued',
                    attempts INTEGER NOT NULL DEFAULT 0,
                    last_error TEXT,
                    remote_location TEXT,
                    queued_at REAL NOT NULL,
                    finished_at REAL
                );
                CREATE INDEX push_outbox_state ON push_outbox(state, queued_at);
                """)
        }
        registerPatientSync(&migrator)
        registerDevices(&migrator)
        registerImportLog(&migrator)
        registerBulkFetchLog(&migrator)
        // An entity's identity is (patient, kind, id): every version carries its patient from
        // the write on (those written before got theirs in v3), and look-ups by id go through it.
        migrator.registerMigration("v7-patient-identity") { db in
            try scopeVersions(from: 0, db: db)
            try db.execute(sql: """
                DROP INDEX entity_version_kind_id;
                CREATE INDEX entity_version_identity ON entity_version(kind, id, patient_id, effective_date);
                """)
        }
        // Outbox items are claimed by a push worker under a lease (see `Outbox.claim`).
        migrator.registerMigration("v8-outbox-leases") { db in
            try db.execute(sql: """
                ALTER TABLE push_outbox ADD COLUMN claimed_by TEXT;
                ALTER TABLE push_outbox ADD COLUMN lease_until REAL;
                """)
        }
        registerAccessLedger(&migrator)
        registerRefreshSchedule(&migrator)
        registerQuestionnaires(&migrator)
        registerAuditTrail(&migrator)
        // An item whose payload is its only copy is queued again by a retry, not taken out.
        migrator.registerMigration("v13-outbox-sole-copy") { db in
            try db.execute(sql: """
                ALTER TABLE push_outbox ADD COLUMN sole_copy BOOLEAN NOT NULL DEFAULT 0;
                UPDATE push_outbox SET sole_copy = 1 WHERE idempotency_key LIKE 'urn:caregate:audit|%';
                """)
        }
        // Outcome versions noted as the store takes them, until a push settles them: a push
        // cycle reads what is new, not every outcome and outbox item (`Outbox.pendingOutcomeVersions`).
        // What a store held before is pending once: its current outcome versions not queued yet.
        migrator.registerMigration("v14-push-pending") { db in
            try db.execute(sql: """
                CREATE TABLE push_pending (version_uuid BLOB PRIMARY KEY NOT NULL);
                CREATE TRIGGER push_pending_outcome AFTER INSERT ON entity_version WHEN NEW.kind = 'outcome'
                BEGIN INSERT OR IGNORE INTO push_pending (version_uuid) VALUES (NEW.uuid); END;
                INSERT INTO push_pending (version_uuid)
                    SELECT uuid FROM entity_version WHERE kind = 'outcome' AND next_uuids IS NULL
                    AND uuid NOT IN (SELECT version_uuid FROM push_outbox) ORDER BY revision;
                """)
        }
        return migrator
    }

    // MARK: Writing (the rules are `VersionWriter`'s; the rows, `SQLiteVersionRows`)

    func wrap(_ error: any Error) -> StoreError {
        if let error = error as? StoreError { return error }
        return .database(path: path, message: "\(error)")
    }

    func nextRevision(_ db: Database) throws -> Int {
        (try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(revision) FROM entity_version")) ?? 0) + 1
    }

    /// The rules over this database's rows, within the write transaction `db` is in.
    func writer(_ db: Database) -> VersionWriter<SQLiteVersionRows> {
        VersionWriter(rows: SQLiteVersionRows(store: self, db: db))
    }

    static func replacing(_ entity: CareEntity, version: VersionInfo) -> CareEntity {
        var replaced = entity
        replaced.version = version
        return replaced
    }

    // MARK: Reading

    func decodeRow(kind: String, json: String) throws -> CareEntity {
        try CareKitJSON.decode(storedKind: kind, value: JSONValue.parse(json))
    }

    func decodeRow(kind: String, value: JSONValue) throws -> CareEntity {
        try CareKitJSON.decode(storedKind: kind, value: value)
    }

    /// Runs a read on the database itself (devices), reporting failures as `StoreError`.
    func readDatabase<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try pool.read(body) } catch { throw wrap(error) }
    }

    /// Runs a write transaction on the database itself (the outbox), reporting failures as `StoreError`.
    func writeDatabase<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try pool.write(body) } catch { throw wrap(error) }
    }

    /// Runs a read-only body on one snapshot: GRDB's errors as `StoreError`, the body's own unchanged.
    public func read<T>(_ body: (any CarePlanReader) throws -> T) throws -> T {
        do {
            return try pool.read { db in try body(Transaction(store: self, db: db, committed: true)) }
        } catch let error as DatabaseError {
            throw wrap(error)
        }
    }

    /// Runs a body in one write transaction: committed when it returns, rolled back when it throws.
    public func write<T>(_ body: (any CarePlanWriter) throws -> T) throws -> T {
        do {
            return try pool.write { db in try marked(db) { try body(Transaction(store: self, db: db, committed: false)) } }
        } catch let error as DatabaseError {
            throw wrap(error)
        }
    }

    /// Most groups merge whole, so a group first runs in one transaction without savepoints
    /// (a savepoint copies every page its body changes into a statement journal first: a tenth
    /// of a device push's merge). When a body throws, that transaction is rolled back and the
    /// group runs again with a savepoint per body: the bodies must be safe to run twice. A
    /// failed commit fails every body, as it would with savepoints.
    /// One writer: SQLite's write lock is the file's.
    public var concurrentWriters: Int { 1 }

    public func writeGroup<T>(_ bodies: [(any CarePlanWriter) throws -> T]) -> [Result<T, any Error>] {
        var bodyThrew = false
        do {
            let results = try pool.write { db in try marked(db) {
                let tx = Transaction(store: self, db: db, committed: false)
                return try bodies.map { body in
                    do { return try body(tx) } catch { bodyThrew = true; throw error }
                }
            } }
            return results.map { .success($0) }
        } catch {
            guard bodyThrew, bodies.count > 1 else {
                let failure = error is DatabaseError ? wrap(error) : error
                return bodies.map { _ in .failure(failure) }
            }
            return writeEachInSavepoint(bodies)
        }
    }

    /// `writeGroup` with a savepoint per body: a body that throws undoes only its own writes.
    private func writeEachInSavepoint<T>(_ bodies: [(any CarePlanWriter) throws -> T]) -> [Result<T, any Error>] {
        var results: [Result<T, any Error>] = []
        do {
            try pool.write { db in try marked(db) {
                let tx = Transaction(store: self, db: db, committed: false)
                for body in bodies {
                    var result: Result<T, any Error>?
                    do {
                        // GRDB rolls the savepoint back when the body throws, and passes the error on.
                        try db.inSavepoint {
                            result = .success(try body(tx))
                            return .commit
                        }
                    } catch {
                        result = .failure(error is DatabaseError ? wrap(error) : error)
                    }
                    results.append(result!)
                }
            } }
        } catch {
            let failure = error is DatabaseError ? wrap(error) : error
            return bodies.map { _ in .failure(failure) }
        }
        return results
    }

    /// Runs a write transaction's body with `writeStart` set.
    private func marked<T>(_ db: Database, _ body: () throws -> T) throws -> T {
        let committed = try nextRevision(db) - 1
        writeStart.withLock { $0 = committed }
        defer { writeStart.withLock { $0 = nil } }
        return try body()
    }

    /// Decodes a row and fills in its successors. Only reads of committed rows (`pool.read`) may
    /// fill the cache: a row read inside a write transaction (`caching: false`) may yet roll back,
    /// and a version cached from it would shadow a corrected retry with the same uuid.
    func entity(_ row: Row, caching: Bool = true) throws -> CareEntity {
        let decoded = try decoded(uuid: row["uuid"], kind: row["kind"], caching: caching) { try JSONValue.parse(row["json"] as String) }
        return SQLiteCarePlanStore.withSuccessors(decoded, nextUUIDs: row["next_uuids"])
    }

    /// A version's content (no successors), from the cache or decoded from its JSON (read only
    /// when not cached).
    func decoded(uuid: UUID, kind: String, caching: Bool, json: () throws -> JSONValue) throws -> CareEntity {
        cacheLock.lock()
        let cached = cache[uuid]
        cacheLock.unlock()
        // The decoded value is used as it is, not read back from the cache: another reader may
        // have emptied the cache in between.
        if let cached { return cached }
        let decoded = try decodeRow(kind: kind, value: json())
        if caching { cacheDecoded(decoded) }
        return decoded
    }

    /// Puts a version decoded from a committed row into the cache.
    func cacheDecoded(_ entity: CareEntity) {
        cacheLock.lock()
        if cache.count >= SQLiteCarePlanStore.cacheLimit { cache.removeAll(keepingCapacity: true) }
        cache[entity.version.uuid] = entity
        cacheLock.unlock()
    }

    /// A version read inside a write transaction (so never cached: the transaction may roll back).
    func fetchEntity(uuid: UUID, db: Database) throws -> CareEntity? {
        try Row.fetchOne(db, sql: "SELECT uuid, kind, json, next_uuids FROM entity_version WHERE uuid = ?", arguments: [uuid])
            .map { try entity($0, caching: false) }
    }

    /// `?,?,?` for `count` values in an `IN (...)` list.
    static func placeholders(_ count: Int) -> String { Array(repeating: "?", count: count).joined(separator: ",") }

    /// The SQL for a query on one kind of entity (`VersionSelect`), its values bound as GRDB binds them.
    func select(kind: String, _ query: EntityQuery, includeTombstones: Bool = false) -> (sql: String, arguments: StatementArguments, reusable: Bool) {
        let select = VersionSelect(kind: kind, query, includeTombstones: includeTombstones, dialect: .sqlite)
        var arguments = StatementArguments()
        var reusable = true
        for value in select.arguments {
            switch value {
            case .text(let text): arguments += [text]
            case .double(let number): arguments += [number]
            case .uuid(let uuid): arguments += [uuid]
            case .texts(let texts):
                arguments += StatementArguments(texts)
                reusable = reusable && texts.count <= Self.reusedListLength
            case .uuids(let uuids):
                arguments += StatementArguments(uuids)
                reusable = reusable && uuids.count <= Self.reusedListLength
            }
        }
        return (select.sql, arguments, reusable)
    }

    /// The longest list of values a version query is kept prepared for (a statement per query
    /// shape and list length, at most): an import asks the same few queries of every patient.
    static let reusedListLength = 8

    /// Versions of one kind: those decoded already come from the cache; the rest are decoded,
    /// and cached only when `committed` (read outside any write transaction, which may yet roll
    /// back: a version cached from it would shadow a corrected retry with the same uuid).
    func fetch(kind: String, _ query: EntityQuery, includeTombstones: Bool = false, db: Database, committed: Bool) throws -> [CareEntity] {
        try fetchScoped(kind: kind, query, includeTombstones: includeTombstones, db: db, committed: committed).map(\.entity)
    }

    /// `fetch`, each version with its patient.
    func fetchScoped(kind: String, _ query: EntityQuery, includeTombstones: Bool = false, db: Database,
                     committed: Bool) throws -> [(entity: CareEntity, patientID: String?)] {
        let (sql, arguments, reusable) = select(kind: kind, query, includeTombstones: includeTombstones)
        // Versions never change: read the JSON only for those not decoded yet.
        let rows = try Row.fetchAll(reusable ? db.cachedStatement(sql: sql) : db.makeStatement(sql: sql), arguments: arguments)
        let uuids = rows.map { $0["uuid"] as UUID }
        // What the cache holds is taken now: another reader filling the cache may empty it
        // (it is emptied when full) before this one is done.
        var found: [UUID: CareEntity] = [:]
        var missing: [UUID] = []
        cacheLock.lock()
        for uuid in uuids { if let cached = cache[uuid] { found[uuid] = cached } else { missing.append(uuid) } }
        cacheLock.unlock()
        var offset = 0
        while offset < missing.count {
            let chunk = missing[offset..<min(offset + 500, missing.count)]
            offset += chunk.count
            let select = "SELECT uuid, kind, json FROM entity_version WHERE uuid IN (\(SQLiteCarePlanStore.placeholders(chunk.count)))"
            for row in try Row.fetchAll(db, sql: select, arguments: StatementArguments(Array(chunk))) {
                let decoded = try decodeRow(kind: row["kind"], json: row["json"])
                if committed { cacheDecoded(decoded) }
                found[decoded.version.uuid] = decoded
            }
        }
        return try zip(rows, uuids).map { row, uuid in
            guard let decoded = found[uuid] else { throw StoreError.database(path: path, message: "version \(uuid) vanished while reading") }
            return (SQLiteCarePlanStore.withSuccessors(decoded, nextUUIDs: row["next_uuids"]), row["patient_id"])
        }
    }

    /// A version with the successors from its row's `next_uuids`.
    static func withSuccessors(_ entity: CareEntity, nextUUIDs: String?) -> CareEntity {
        guard let nextUUIDs else { return entity }
        var version = entity.version
        version.nextVersionUUIDs = uuids(in: nextUUIDs)
        return replacing(entity, version: version)
    }

    /// The uuids of a `next_uuids` column (comma-separated).
    static func uuids(in text: String) -> [UUID] {
        text.split(separator: ",").compactMap { UUID(uuidString: String($0)) }
    }

    /// The events of the matching tasks in a range, read on `db` (see `CarePlanReader.events`).
    func events(from start: Date, to end: Date, tasks query: EntityQuery, db: Database, committed: Bool) throws -> [TaskEvent] {
        try EventWindow(start: start, end: end, tasks: query).events(
            taskVersions: { try fetchScoped(kind: "task", $0, includeTombstones: true, db: db, committed: committed) },
            outcomes: { try fetch(kind: "outcome", $0, db: db, committed: committed) })
    }

    func changes(since revision: Int, limit: Int?, db: Database, committed: Bool) throws -> StoreChanges {
        var sql = "SELECT uuid, kind, json, next_uuids, revision FROM entity_version WHERE revision > ? ORDER BY revision"
        if let limit { sql += " LIMIT \(limit)" }
        let rows = try Row.fetchAll(db, sql: sql, arguments: [revision])
        let latest: Int = rows.last?["revision"] ?? revision
        return StoreChanges(entities: try rows.map { try entity($0, caching: committed) }, revision: latest)
    }

    func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?, db: Database) throws -> [(EntityType, String)] {
        let rows: [Row]
        if let entities {
            guard !entities.isEmpty else { return [] }
            // The (kind, id) pairs joined first, each one look-up in the (kind, id, patient) index.
            // Each pair once (a pair listed twice would count its tips twice).
            let pairs = Set(entities.map { [VersionWriter<SQLiteVersionRows>.kind($0.type), $0.id] })
            rows = try Row.fetchAll(db.cachedStatement(sql: """
                SELECT v.kind, v.id FROM json_each(?) AS wanted
                CROSS JOIN entity_version v ON v.kind = wanted.value ->> 0 AND v.id = wanted.value ->> 1 AND v.patient_id IS ?
                WHERE v.next_uuids IS NULL GROUP BY v.kind, v.id HAVING COUNT(*) > 1 ORDER BY v.kind, v.id
                """), arguments: [JSONValue.array(pairs.map { .array($0.map { .string($0) }) }).serialized(), patientID])
        } else {
            rows = try Row.fetchAll(db, sql: """
                SELECT kind, id FROM entity_version WHERE next_uuids IS NULL GROUP BY kind, id, patient_id HAVING COUNT(*) > 1 ORDER BY kind, id
                """)
        }
        return rows.map { (EntityType(rawValue: $0["kind"]) ?? .task, $0["id"]) }
    }

    /// The live outcome of one occurrence of a task version, through the index that keeps it unique.
    func liveOutcome(taskUUID: UUID, occurrence: Int, db: Database, committed: Bool) throws -> Outcome? {
        let uuid = try UUID.fetchOne(db.cachedStatement(sql: """
            SELECT uuid FROM entity_version
            WHERE kind = 'outcome' AND parent_uuid = ? AND occurrence = ? AND next_uuids IS NULL AND deleted_date IS NULL
            """), arguments: [taskUUID, occurrence])
        guard let uuid else { return nil }
        return try fetch(kind: "outcome", EntityQuery(versions: .history, uuids: [uuid]), db: db, committed: committed)
            .compactMap { if case .outcome(let outcome) = $0 { outcome } else { nil } }.first
    }

    /// The outcomes' tips in export order, through a cursor over their revisions (the sort holds
    /// dates, ids and revisions only), each version read and decoded when its turn comes; not
    /// cached (an export would flush the cache for nothing).
    func forEachCurrentOutcome(db: Database, _ body: (Outcome) throws -> Void) throws {
        let order = try Int64.fetchCursor(db, sql: """
            SELECT revision FROM entity_version WHERE kind = 'outcome' AND next_uuids IS NULL ORDER BY effective_date, id, revision
            """)
        let version = try db.makeStatement(sql: "SELECT kind, json, next_uuids FROM entity_version WHERE revision = ?")
        while let revision = try order.next() {
            guard let row = try Row.fetchOne(version, arguments: [revision]) else { continue }
            let decoded = SQLiteCarePlanStore.withSuccessors(try decodeRow(kind: row["kind"], json: row["json"]), nextUUIDs: row["next_uuids"])
            if case .outcome(let outcome) = decoded { try body(outcome) }
        }
    }

    func knowledgeVector(db: Database) throws -> [RevisionRecord.Process] {
        // Every device push asks this: statements kept prepared.
        let id = try String.fetchOne(db.cachedStatement(sql: "SELECT value FROM store_meta WHERE key = 'processID'"))
        let clock = try Int.fetchOne(db.cachedStatement(sql: "SELECT MAX(revision) FROM entity_version")) ?? 0
        guard let id, let uuid = UUID(uuidString: id) else { throw StoreError.database(path: path, message: "the store has no sync process id") }
        return [RevisionRecord.Process(id: uuid, clock: clock)]
    }

    func allEntities(versions: VersionFilter, db: Database, committed: Bool) throws -> [CareEntity] {
        var result: [CareEntity] = []
        for kind in ["patient", "carePlan", "contact", "task", "outcome"] {
            result += try fetch(kind: kind, EntityQuery(versions: versions), db: db, committed: committed)
        }
        return result
    }

    /// SQLite's own consistency check of the file: `["ok"]` when sound.
    public func integrityCheck() throws(StoreError) -> [String] {
        do { return try pool.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") } } catch { throw wrap(error) }
    }
}

/// Binding Swift values to a prepared SQLite statement directly (the bulk-write path).
enum SQLiteBinding {
    /// SQLite copies the bytes before the call returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    static func bind(_ p: OpaquePointer?, _ index: Int32, _ value: String?) {
        guard var value else { sqlite3_bind_null(p, index); return }
        if value.isEmpty { sqlite3_bind_text(p, index, "", 0, transient); return }
        value.withUTF8 { bytes in
            _ = bytes.withMemoryRebound(to: CChar.self) { chars in
                sqlite3_bind_text(p, index, chars.baseAddress, Int32(chars.count), transient)
            }
        }
    }

    /// The store's kind name for an entity type (static strings: bound without a copy).
    static func bind(_ p: OpaquePointer?, _ index: Int32, kind type: EntityType) {
        let name: StaticString = switch type {
        case .patient: "patient"
        case .carePlan: "carePlan"
        case .contact: "contact"
        case .task, .healthKitTask: "task"
        case .outcome: "outcome"
        }
        name.utf8Start.withMemoryRebound(to: CChar.self, capacity: name.utf8CodeUnitCount) { chars in
            _ = sqlite3_bind_text(p, index, chars, Int32(name.utf8CodeUnitCount), nil)
        }
    }

    static func bind(_ p: OpaquePointer?, _ index: Int32, _ value: Double?) {
        if let value { sqlite3_bind_double(p, index, value) } else { sqlite3_bind_null(p, index) }
    }

    /// Steps a query whose one parameter is a version's uuid, through the C API (device pushes
    /// ask these for every version): true when it finds a row, whose columns can be read until
    /// the statement is reset; false when it finds none.
    static func step(_ p: OpaquePointer?, uuid: UUID, db: Database) throws -> Bool {
        sqlite3_reset(p)
        bind(p, 1, uuid)
        switch sqlite3_step(p) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errmsg(db.sqliteConnection)))
        }
    }

    /// Whether a one-uuid query finds a row.
    static func hasRow(_ statement: Statement, uuid: UUID, db: Database) throws -> Bool {
        defer { sqlite3_reset(statement.sqliteStatement) }
        return try step(statement.sqliteStatement, uuid: uuid, db: db)
    }

    /// A text or blob column of the current row, in place (valid until the statement moves on).
    static func bytes(_ p: OpaquePointer?, _ column: Int32) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: sqlite3_column_blob(p, column), count: Int(sqlite3_column_bytes(p, column)))
    }

    /// A text column of the current row (nil when NULL).
    static func text(_ p: OpaquePointer?, _ column: Int32) -> String? {
        guard let chars = sqlite3_column_text(p, column) else { return nil }
        return String(decoding: UnsafeBufferPointer(start: chars, count: Int(sqlite3_column_bytes(p, column))), as: UTF8.self)
    }

    /// A UUID as the 16-byte blob GRDB reads and writes.
    static func bind(_ p: OpaquePointer?, _ index: Int32, _ value: UUID) {
        withUnsafeBytes(of: value.uuid) { raw in
            _ = sqlite3_bind_blob(p, index, raw.baseAddress, 16, transient)
        }
    }
}
