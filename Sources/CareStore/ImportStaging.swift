import Foundation
import GRDB

/// One item waiting to be imported: its bytes, the group it is imported with (a patient), its
/// identity and full URL when it has them, where it was read, and which container it came in.
/// The staging area keeps items as they come; it knows nothing of FHIR.
public struct StagedItem: Sendable, Hashable {
    /// The order items were first staged in.
    public var sequence: Int64
    /// The group it is imported with; the empty group holds items imported with any group
    /// that refers to them.
    public var group: String
    /// What the resource is known by (`Type/id`), to tell repeated copies apart; nil without an id.
    public var identity: String?
    /// The Bundle entry's `fullUrl`, when it came in one.
    public var fullURL: String?
    /// Which container (a file's Bundle) it came in, 0 for none.
    public var container: Int
    /// The file (and line or entry) it was read from.
    public var origin: String
    /// The resource's JSON text as the file had it.
    public var bytes: [UInt8]

    /// A staged resource.
    public init(sequence: Int64 = 0, group: String, identity: String?, fullURL: String?, container: Int, origin: String, bytes: [UInt8]) {
        self.sequence = sequence
        self.group = group
        self.identity = identity
        self.fullURL = fullURL
        self.container = container
        self.origin = origin
        self.bytes = bytes
    }
}

/// Where an import puts what it reads before it maps anything, so that it holds one group at a
/// time, not the whole run.
///
/// ```swift
/// let staging = try SQLiteImportStaging(directory: "/var/tmp")
/// try staging.write { try $0.insert(StagedItem(group: "Patient/p1", identity: "Patient/p1", fullURL: nil, container: 0, origin: "a.ndjson:1", bytes: json)) }
/// for group in try staging.groups() { let items = try staging.items(group: group) }
/// ```
public protocol ImportStaging: Sendable {
    /// Changes made together (one file's items): one transaction.
    func write<T>(_ body: (any ImportStagingWriter) throws -> T) throws(StoreError) -> T
    /// The groups, in the order their first items were staged (the empty group left out).
    func groups() throws(StoreError) -> [String]
    /// A group's items in the order staged; the bytes only of those `wanted` says (the others'
    /// are empty until `readingBytes(of:)`): most of a patient's items are never read again.
    func items(group: String, readingBytesOf wanted: (StagedItem) -> Bool) throws(StoreError) -> [StagedItem]
    /// Items given without their bytes, with them.
    func readingBytes(of items: [StagedItem]) throws(StoreError) -> [StagedItem]
    /// The items with these identities or full URLs (any group).
    func items(identities: [String], fullURLs: [String]) throws(StoreError) -> [StagedItem]
    /// How many items are staged.
    func count() throws(StoreError) -> Int
    /// Whether items' text is best staged compact (whitespace between tokens left out): where
    /// every byte is written out and read back. Held in memory, text is copied as the file has it,
    /// which is faster than compacting it.
    var prefersCompactText: Bool { get }
}

extension ImportStaging {
    /// A group's items in the order staged, each with its bytes.
    public func items(group: String) throws(StoreError) -> [StagedItem] {
        try items(group: group) { _ in true }
    }
}

/// What a staging area's `write` may do.
public protocol ImportStagingWriter {
    /// Stages an item; returns its sequence.
    @discardableResult
    func insert(_ item: StagedItem) throws -> Int64
    /// The item staged with this identity.
    func item(identity: String) throws -> StagedItem?
    /// Replaces an item's content, origin and container, keeping its place and group.
    func replace(_ sequence: Int64, with item: StagedItem) throws
}

/// A staging area in a SQLite file of its own (removed when the staging area goes), or in memory
/// for tests. Items are appended with no index to keep up (identities are found through a map
/// of their hashes in memory); the indexes reading needs are built once, at the first read.
public final class SQLiteImportStaging: ImportStaging {
    let queue: DatabaseQueue
    let path: String?
    let identities = Locked(IdentityMap())
    let indexed = Locked(false)
    /// Read-only connections to the file, one per reader at once (made when first needed): the
    /// patients are read back on every core, and `queue` would take them one at a time.
    let readers = Locked<[DatabaseQueue]>([])

    /// A staging area in a new file under `directory` (a temporary directory by default).
    public init(directory: String = NSTemporaryDirectory()) throws(StoreError) {
        // What a killed import left here is removed first (its process is gone).
        ScratchFile.removeAbandoned(in: directory, prefix: "caregate-staging")
        let path = ScratchFile.path(in: directory, prefix: "caregate-staging", suffix: ".sqlite")
        self.path = path
        do {
            var configuration = Configuration()
            configuration.prepareDatabase { db in
                // Scratch data: a crash loses nothing that is not read again from the files.
                try db.execute(sql: "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA cache_size = -16384")
            }
            queue = try DatabaseQueue(path: path, configuration: configuration)
            try Self.create(queue)
        } catch {
            throw .database(path: path, message: "\(error)")
        }
    }

    /// A staging area in memory (tests).
    public init(inMemory: Void) throws(StoreError) {
        path = nil
        do {
            queue = try DatabaseQueue()
            try Self.create(queue)
        } catch {
            throw .database(path: ":memory:", message: "\(error)")
        }
    }

    deinit {
        guard let path else { return }
        for reader in readers.withLock({ $0 }) { try? reader.close() }
        try? queue.close()
        for suffix in ["", "-journal", "-wal", "-shm"] { unlink(path + suffix) }
    }

    static func create(_ queue: DatabaseQueue) throws {
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE item (
                    sequence INTEGER PRIMARY KEY,
                    grp TEXT NOT NULL,
                    identity TEXT,
                    full_url TEXT,
                    container INTEGER NOT NULL,
                    origin TEXT NOT NULL,
                    bytes BLOB NOT NULL
                );
                """)
        }
    }

    /// Builds the indexes reading needs (once; a sort of what is staged, far quicker than
    /// keeping them up item by item). Writing after it is slower, but still right.
    func index() throws(StoreError) {
        guard !indexed.withLock({ $0 }) else { return }
        do {
            try queue.write { db in
                // The sorts behind the indexes take the other cores too (SQLite's sorter threads).
                try db.execute(sql: "PRAGMA threads = \(max(0, ProcessInfo.processInfo.activeProcessorCount - 1))")
                try db.execute(sql: """
                    CREATE INDEX IF NOT EXISTS item_group ON item(grp, sequence);
                    CREATE INDEX IF NOT EXISTS item_full_url ON item(full_url) WHERE full_url IS NOT NULL;
                    """)
            }
        } catch {
            throw .database(path: path ?? ":memory:", message: "\(error)")
        }
        indexed.withLock { $0 = true }
    }

    /// Staged identities by hash: most are staged once, and a look-up finds them in memory.
    /// Identities whose hash another one has are kept whole, beside.
    struct IdentityMap: Sendable {
        var byHash: [Int: Int64] = [:]
        var collided: [String: Int64] = [:]

        func sequence(of identity: String) -> Int64? {
            collided[identity] ?? byHash[identity.hashValue]
        }

        /// Notes a new item's identity; a hash already taken by another identity keeps it whole.
        mutating func add(_ identity: String, sequence: Int64) {
            if byHash[identity.hashValue] == nil { byHash[identity.hashValue] = sequence } else { collided[identity] = sequence }
        }
    }

    public func write<T>(_ body: (any ImportStagingWriter) throws -> T) throws(StoreError) -> T {
        do { return try queue.write { db in try body(Writer(db: db, identities: identities)) } } catch let error as StoreError { throw error } catch {
            throw .database(path: path ?? ":memory:", message: "\(error)")
        }
    }

    struct Writer: ImportStagingWriter {
        let db: Database
        let identities: Locked<IdentityMap>

        @discardableResult
        func insert(_ item: StagedItem) throws -> Int64 {
            // Statements prepared once per connection: this runs once per resource read.
            try db.cachedStatement(sql: "INSERT INTO item (grp, identity, full_url, container, origin, bytes) VALUES (?, ?, ?, ?, ?, ?)")
                .execute(arguments: [item.group, item.identity, item.fullURL, item.container, item.origin, Data(item.bytes)])
            let sequence = db.lastInsertedRowID
            if let identity = item.identity { identities.withLock { $0.add(identity, sequence: sequence) } }
            return sequence
        }

        func item(identity: String) throws -> StagedItem? {
            guard let sequence = identities.withLock({ $0.sequence(of: identity) }),
                  let item = try Row.fetchOne(db.cachedStatement(sql: "SELECT \(SQLiteImportStaging.columns) FROM item WHERE sequence = ?"), arguments: [sequence])
                      .map(SQLiteImportStaging.item),
                  item.identity == identity else { return nil }
            return item
        }

        func replace(_ sequence: Int64, with item: StagedItem) throws {
            try db.execute(sql: "UPDATE item SET full_url = ?, container = ?, origin = ?, bytes = ? WHERE sequence = ?",
                           arguments: [item.fullURL, item.container, item.origin, Data(item.bytes), sequence])
        }
    }

    public func groups() throws(StoreError) -> [String] {
        try index()
        return try read { db in try String.fetchAll(db, sql: "SELECT grp FROM item WHERE grp != '' GROUP BY grp ORDER BY MIN(sequence)") }
    }

    public func items(group: String, readingBytesOf wanted: (StagedItem) -> Bool) throws(StoreError) -> [StagedItem] {
        try index()
        return try read { db in
            let outlines = try Array(Row.fetchCursor(db.cachedStatement(sql: "SELECT \(Self.outlineColumns) FROM item WHERE grp = ? ORDER BY sequence"),
                                                     arguments: [group]).map(Self.outline))
            return try outlines.map { wanted($0) ? try Self.withBytes($0, db) : $0 }
        }
    }

    public func readingBytes(of items: [StagedItem]) throws(StoreError) -> [StagedItem] {
        try read { db in try items.map { try Self.withBytes($0, db) } }
    }

    /// An item's bytes, read by its sequence (a look-up of SQLite's row id).
    static func withBytes(_ item: StagedItem, _ db: Database) throws -> StagedItem {
        var item = item
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT bytes FROM item WHERE sequence = ?"), arguments: [item.sequence])
        if let row = try rows.next() { item.bytes = try row.withUnsafeData(atIndex: 0) { [UInt8]($0 ?? Data()) } }
        return item
    }

    public func items(identities: [String], fullURLs: [String]) throws(StoreError) -> [StagedItem] {
        guard !identities.isEmpty || !fullURLs.isEmpty else { return [] }
        try index()
        // Identities are found through the map in memory (no index of their own to build); a
        // hash another identity shares finds that one's item, which the check below drops.
        let wanted = Set(identities)
        let sequences = self.identities.withLock { map in wanted.compactMap { map.sequence(of: $0) } }
        return try read { db in
            // In chunks: SQLite limits how many values one statement binds.
            func items<Value: DatabaseValueConvertible>(_ column: String, _ values: [Value]) throws -> [StagedItem] {
                try stride(from: 0, to: values.count, by: 500).flatMap { start in
                    let chunk = Array(values[start..<min(start + 500, values.count)])
                    return try Array(Row.fetchCursor(db, sql: "SELECT \(Self.columns) FROM item WHERE \(column) IN (\(databaseQuestionMarks(count: chunk.count)))",
                                                     arguments: StatementArguments(chunk)).map(Self.item))
                }
            }
            return try items("sequence", sequences).filter { $0.identity.map(wanted.contains) ?? false } + items("full_url", fullURLs)
        }
    }

    /// Text is staged compact: every byte is written to the file and read back.
    public var prefersCompactText: Bool { true }

    public func count() throws(StoreError) -> Int {
        // Items are never deleted, so the last sequence is the count: a look-up at the table's
        // end, where COUNT(*) would read every page of it (a gigabyte for a large population).
        try read { db in try Int.fetchOne(db, sql: "SELECT MAX(sequence) FROM item") ?? 0 }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do {
            guard let path else { return try queue.read(body) }
            let reader = try readers.withLock { $0.popLast() } ?? {
                var configuration = Configuration()
                configuration.readonly = true
                return try DatabaseQueue(path: path, configuration: configuration)
            }()
            defer { readers.withLock { $0.append(reader) } }
            return try reader.read(body)
        } catch {
            throw .database(path: path ?? ":memory:", message: "\(error)")
        }
    }

    /// The columns `item(_:)` reads, in its order; `outline(_:)` reads all but the bytes.
    static let columns = outlineColumns + ", bytes"
    static let outlineColumns = "sequence, grp, identity, full_url, container, origin"

    /// An item from a row of `outlineColumns`, its bytes empty.
    static func outline(_ row: Row) -> StagedItem {
        StagedItem(sequence: row[0], group: row[1], identity: row[2], fullURL: row[3], container: row[4], origin: row[5], bytes: [])
    }

    /// An item from a row of `columns`; its bytes are copied once, straight from SQLite's row
    /// (a patient's items are most of what is staged for it).
    static func item(_ row: Row) throws -> StagedItem {
        StagedItem(sequence: row[0], group: row[1], identity: row[2], fullURL: row[3], container: row[4], origin: row[5],
                   bytes: try row.withUnsafeData(atIndex: 6) { [UInt8]($0 ?? Data()) })
    }
}
