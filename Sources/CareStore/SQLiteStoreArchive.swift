import Foundation
import GRDB

/// Moving a store to or from SQLite (`caregate store copy`).
extension SQLiteCarePlanStore: StoreArchive {
    public func forEachArchivedVersion(_ body: (ArchivedVersion) throws -> Void) throws {
        try pool.read { db in
            let rows = try Row.fetchCursor(db, sql: "SELECT revision, kind, json, patient_id, stamp FROM entity_version ORDER BY revision")
            while let row = try rows.next() {
                var entity = try decodeRow(kind: row["kind"], json: row["json"])
                entity.version.nextVersionUUIDs = []
                try body(ArchivedVersion(entity: entity, patientID: row["patient_id"], stamp: row["stamp"], revision: row["revision"]))
            }
        }
    }

    public func archivedRows(_ table: ArchivedTable) throws(StoreError) -> [[ArchiveValue]] {
        let columns = table.columns
        return try readDatabase { db in
            try Row.fetchAll(db, sql: "SELECT \(columns.map(\.name).joined(separator: ", ")) FROM \(table.rawValue) ORDER BY \(columns[0].name)").map { row in
                columns.indices.map { i in Self.archiveValue(row[i] as DatabaseValue, columns[i].type) }
            }
        }
    }

    static func archiveValue(_ value: DatabaseValue, _ type: ArchivedTable.Column) -> ArchiveValue {
        switch value.storage {
        case .null: return .null
        case .int64(let n): return type == .real ? .real(Double(n)) : .integer(n)
        case .double(let x): return .real(x)
        case .string(let text): return type == .uuid ? UUID(uuidString: text).map { .uuid($0) } ?? .text(text) : .text(text)
        case .blob(let data): return type == .uuid && data.count == 16 ? UUID(data: data).map { .uuid($0) } ?? .bytes(Array(data)) : .bytes(Array(data))
        }
    }

    public func restore(_ versions: [ArchivedVersion]) throws(StoreError) {
        try writeDatabase { db in try writer(db).restore(versions) }
    }

    public func restore(_ rows: [[ArchiveValue]], into table: ArchivedTable) throws(StoreError) {
        let columns = table.columns
        let sql = "INSERT INTO \(table.rawValue) (\(columns.map(\.name).joined(separator: ", "))) VALUES (\(Self.placeholders(columns.count)))"
        try writeDatabase { db in
            let statement = try db.makeStatement(sql: sql)
            for row in rows {
                // Sync processes are kept as text here; other uuids as 16 bytes.
                try statement.execute(arguments: StatementArguments(row.map { value -> (any DatabaseValueConvertible)? in
                    switch value {
                    case .null: nil
                    case .integer(let n): n
                    case .real(let x): x
                    case .text(let text): text
                    case .bytes(let bytes): Data(bytes)
                    case .uuid(let uuid): table == .syncProcess ? uuid.uuidString : uuid
                    }
                }))
            }
        }
    }

    public func adoptProcessID(_ id: UUID) throws(StoreError) {
        try writeDatabase { db in try db.execute(sql: "UPDATE store_meta SET value = ? WHERE key = 'processID'", arguments: [id.uuidString]) }
    }
}

extension UUID {
    /// A uuid from its 16 bytes.
    init?(data: Data) {
        guard data.count == 16 else { return nil }
        self = data.withUnsafeBytes { raw in NSUUID(uuidBytes: raw.bindMemory(to: UInt8.self).baseAddress!) as UUID }
    }
}
