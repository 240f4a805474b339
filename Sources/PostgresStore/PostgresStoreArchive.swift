import CareStore
import Foundation
import JSON
import NIOCore
import PostgresNIO

/// Moving a store to or from PostgreSQL (`caregate store copy`).
extension PostgresCarePlanStore: StoreArchive {
    /// Every version in writing order (`seq`), a thousand rows at a time on one snapshot.
    public func forEachArchivedVersion(_ body: (ArchivedVersion) throws -> Void) throws {
        try database.transaction(readOnly: true) { session in
            var after = 0
            while true {
                let rows = try session.query("""
                    SELECT seq, kind, json, patient_id, stamp, revision FROM entity_version WHERE seq > \(after) ORDER BY seq LIMIT 1000
                    """)
                for row in rows {
                    let (seq, kind, json, patient, stamp, revision) = try row.decode((Int, String, ByteBuffer, String?, String?, Int).self)
                    var entity = try CareKitJSON.decode(storedKind: kind, value: JSONValue.parse(Array(buffer: json)))
                    entity.version.nextVersionUUIDs = []
                    try body(ArchivedVersion(entity: entity, patientID: patient, stamp: stamp, revision: revision))
                    after = seq
                }
                if rows.count < 1000 { return }
            }
        }
    }

    public func archivedRows(_ table: ArchivedTable) throws(StoreError) -> [[ArchiveValue]] {
        let columns = table.columns
        let sql = "SELECT \(columns.map(\.name).joined(separator: ", ")) FROM \(table.rawValue) ORDER BY \(columns[0].name)"
        return try reading { tx in
            try tx.session.query(PostgresQuery(unsafeSQL: sql)).map { row in
                let cells = row.makeRandomAccess()
                return try columns.indices.map { i throws -> ArchiveValue in
                    let cell = cells[i]
                    if cell.bytes == nil { return .null }
                    switch columns[i].type {
                    case .integer: return .integer(try cell.decode(Int64.self))
                    case .real: return .real(try cell.decode(Double.self))
                    case .text: return .text(try cell.decode(String.self))
                    case .bytes: return .bytes(Array(buffer: try cell.decode(ByteBuffer.self)))
                    case .uuid: return .uuid(try cell.decode(UUID.self))
                    }
                }
            }
        }
    }

    public func restore(_ versions: [ArchivedVersion]) throws(StoreError) {
        try writing { tx in try tx.writer.restore(versions) }
    }

    public func restore(_ rows: [[ArchiveValue]], into table: ArchivedTable) throws(StoreError) {
        let columns = table.columns
        let placeholders = columns.indices.map { "$\($0 + 1)" }.joined(separator: ", ")
        let sql = "INSERT INTO \(table.rawValue) (\(columns.map(\.name).joined(separator: ", "))) VALUES (\(placeholders))"
        try writing { tx in
            for row in rows {
                var binds = PostgresBindings(capacity: row.count)
                for (value, column) in zip(row, columns) {
                    switch (value, column.type) {
                    case (.null, .integer): binds.append(Int64?.none)
                    case (.null, .real): binds.append(Double?.none)
                    case (.null, .bytes): binds.append(ByteBuffer?.none)
                    case (.null, .uuid): binds.append(UUID?.none)
                    case (.null, .text): binds.append(String?.none)
                    case (.integer(let n), .real): binds.append(Double(n))
                    case (.integer(let n), _): binds.append(n)
                    case (.real(let x), _): binds.append(x)
                    case (.text(let text), _): binds.append(text)
                    case (.bytes(let bytes), _): binds.append(ByteBuffer(bytes: bytes))
                    case (.uuid(let uuid), _): binds.append(uuid)
                    }
                }
                try tx.session.run(PostgresQuery(unsafeSQL: sql, binds: binds))
            }
        }
    }

    public func adoptProcessID(_ id: UUID) throws(StoreError) {
        try session { try $0.run("UPDATE store_meta SET value = \(id.uuidString) WHERE key = 'processID'") }
    }
}
