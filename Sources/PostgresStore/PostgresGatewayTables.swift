import CareStore
import Foundation
import NIOCore
import PostgresNIO

/// The push outbox on PostgreSQL. Claims take rows with `FOR UPDATE SKIP LOCKED`, so workers of
/// several instances claiming at once each get rows of their own, never waiting on each other.
extension PostgresCarePlanStore: Outbox {
    static let outboxColumns = "version_uuid, entity_id, idempotency_key, payload, state, attempts, last_error, remote_location, queued_at, finished_at, sole_copy"
    /// The column after `outboxColumns` in a row that adds one (a claim's `seq`).
    static let afterOutboxColumns = outboxColumns.split(separator: ",").count

    static func outboxItem(_ row: PostgresRow) throws -> OutboxItem {
        let (version, entity, key, payload, state, attempts, error, location, queued, finished, soleCopy) =
            try row.decode((UUID, String, String, ByteBuffer, String, Int, String?, String?, Double, Double?, Bool).self)
        var item = OutboxItem(versionUUID: version, entityID: entity, idempotencyKey: key, payload: Array(buffer: payload))
        item.state = OutboxItem.State(rawValue: state) ?? .queued
        item.attempts = attempts
        item.lastError = error
        item.remoteLocation = location
        item.queuedAt = Date(storeSeconds: queued)
        item.finishedAt = Date(storeSeconds: finished)
        item.soleCopy = soleCopy
        return item
    }

    @discardableResult
    public func enqueue(_ items: [OutboxItem]) throws(StoreError) -> Int {
        try transaction { session in try Self.enqueue(items, in: session) }
    }

    public func pendingOutcomeVersions(limit: Int) throws(StoreError) -> [UUID] {
        try session { session in
            try session.query("SELECT version_uuid FROM push_pending ORDER BY seq LIMIT \(limit)").map { try $0.decode(UUID.self) }
        }
    }

    @discardableResult
    public func enqueue(_ items: [OutboxItem], settling pending: [UUID]) throws(StoreError) -> Int {
        try transaction { session in
            let added = try Self.enqueue(items, in: session)
            try session.run("DELETE FROM push_pending WHERE version_uuid = ANY(\(pending))")
            return added
        }
    }

    /// The SQL that makes the outcome versions of dead letters pending again (before they are
    /// taken out): the next push exports them anew.
    static let repend = "INSERT INTO push_pending (version_uuid) SELECT version_uuid FROM push_outbox WHERE state = 'failed' AND NOT sole_copy"

    /// Queues items within a transaction already open (the audit trail queues its entries with their append).
    static func enqueue(_ items: [OutboxItem], in session: PostgresSession) throws -> Int {
        let now = Date().storeSeconds
        var added = 0
        for item in items {
            added += try session.run("""
                INSERT INTO push_outbox (version_uuid, entity_id, idempotency_key, payload, queued_at, sole_copy)
                VALUES (\(item.versionUUID), \(item.entityID), \(item.idempotencyKey), \(ByteBuffer(bytes: item.payload)), \(now), \(item.soleCopy))
                ON CONFLICT (version_uuid) DO NOTHING
                """)
        }
        return added
    }

    @discardableResult
    public func forgetFailed() throws(StoreError) -> Int {
        try transaction { session in
            try session.run("\(unescaped: Self.repend) ON CONFLICT DO NOTHING")
            return try session.run("UPDATE push_outbox SET \(unescaped: OutboxItem.requeue) WHERE state = 'failed' AND sole_copy")
                + session.run("DELETE FROM push_outbox WHERE state = 'failed'")
        }
    }

    @discardableResult
    public func forgetFailed(versions: [UUID]) throws(StoreError) -> Int {
        try transaction { session in
            try session.run("\(unescaped: Self.repend) AND version_uuid = ANY(\(versions)) ON CONFLICT DO NOTHING")
            return try session.run("""
                UPDATE push_outbox SET \(unescaped: OutboxItem.requeue)
                WHERE state = 'failed' AND version_uuid = ANY(\(versions)) AND sole_copy
                """) + session.run("DELETE FROM push_outbox WHERE state = 'failed' AND version_uuid = ANY(\(versions))")
        }
    }

    public func outboxEntities(versions: [UUID]) throws(StoreError) -> [UUID: String] {
        guard !versions.isEmpty else { return [:] }
        return try session { session in
            var entities: [UUID: String] = [:]
            for row in try session.query("SELECT version_uuid, entity_id FROM push_outbox WHERE version_uuid = ANY(\(versions))") {
                let (version, entity) = try row.decode((UUID, String).self)
                entities[version] = entity
            }
            return entities
        }
    }

    public func outbox(state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem] {
        try session { session in
            try session.query("""
                SELECT \(unescaped: Self.outboxColumns) FROM push_outbox WHERE state = \(state.rawValue) ORDER BY queued_at, seq LIMIT \(limit)
                """).map(Self.outboxItem)
        }
    }

    public func claim(limit: Int, worker: String, lease: TimeInterval, now: Date) throws(StoreError) -> [OutboxItem] {
        let until = now.addingTimeInterval(lease).storeSeconds
        let items = try session { session in
            try session.query("""
                UPDATE push_outbox SET claimed_by = \(worker), lease_until = \(until)
                WHERE version_uuid IN (
                    SELECT version_uuid FROM push_outbox WHERE state = 'queued' AND (lease_until IS NULL OR lease_until <= \(now.storeSeconds))
                    ORDER BY queued_at, seq LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                RETURNING \(unescaped: Self.outboxColumns), seq
                """).map { row in
                (item: try Self.outboxItem(row), seq: try row.makeRandomAccess()[Self.afterOutboxColumns].decode(Int.self))
            }
        }
        return items.sorted { ($0.item.queuedAt ?? .distantPast, $0.seq) < ($1.item.queuedAt ?? .distantPast, $1.seq) }.map(\.item)
    }

    public func release(worker: String) throws(StoreError) {
        try session { try $0.run("UPDATE push_outbox SET claimed_by = NULL, lease_until = NULL WHERE claimed_by = \(worker)") }
    }

    public func latestOutbox(state: OutboxItem.State, limit: Int) throws(StoreError) -> [OutboxItem] {
        try session { session in
            try session.query("""
                SELECT \(unescaped: Self.outboxColumns) FROM push_outbox WHERE state = \(state.rawValue)
                ORDER BY COALESCE(finished_at, queued_at) DESC, seq DESC LIMIT \(limit)
                """).map(Self.outboxItem)
        }
    }

    public func lastPushed(entityIDs: [String]) throws(StoreError) -> [String: Date] {
        guard !entityIDs.isEmpty else { return [:] }
        return try session { session in
            var times: [String: Date] = [:]
            for row in try session.query("""
                SELECT entity_id, MAX(finished_at) FROM push_outbox WHERE state = 'pushed' AND entity_id = ANY(\(entityIDs)) GROUP BY entity_id
                """) {
                let (entity, seconds) = try row.decode((String, Double?).self)
                times[entity] = Date(storeSeconds: seconds)
            }
            return times
        }
    }

    public func record(_ deliveries: [OutboxDelivery]) throws(StoreError) {
        let now = Date().storeSeconds
        try transaction { session in
            for delivery in deliveries {
                switch delivery {
                case .pushed(let version, let location):
                    try session.run("""
                        UPDATE push_outbox SET state = 'pushed', attempts = attempts + 1, remote_location = \(location), last_error = NULL,
                                               finished_at = \(now), claimed_by = NULL, lease_until = NULL
                        WHERE version_uuid = \(version)
                        """)
                case .failed(let version, let error, let dead):
                    try session.run("""
                        UPDATE push_outbox SET state = \(dead ? "failed" : "queued"), attempts = attempts + 1, last_error = \(error),
                                               finished_at = \(dead ? now : nil),
                                               claimed_by = CASE WHEN \(dead) THEN NULL ELSE claimed_by END,
                                               lease_until = CASE WHEN \(dead) THEN NULL ELSE lease_until END
                        WHERE version_uuid = \(version)
                        """)
                }
            }
        }
    }

    public func queuedCount() throws(StoreError) -> Int {
        try session { session in try session.query("SELECT count(*) FROM push_outbox WHERE state = 'queued'").first?.decode(Int.self) ?? 0 }
    }

    public func outboxCounts() throws(StoreError) -> OutboxCounts {
        try session { session in
            var counts = OutboxCounts()
            for row in try session.query("SELECT state, count(*) FROM push_outbox GROUP BY state") {
                let (state, n) = try row.decode((String, Int).self)
                switch state {
                case "queued": counts.queued = n
                case "pushed": counts.pushed = n
                default: counts.failed = n
                }
            }
            return counts
        }
    }
}

/// Enrollment codes and devices on PostgreSQL. A code is used up by one `DELETE … RETURNING`,
/// so two instances redeeming it at once enroll one device.
extension PostgresCarePlanStore: DeviceRegistry {
    /// Every column as text, so that one decoder reads the rows of plain and prepared
    /// statements alike (see `PostgresSession.prepared`).
    static let deviceColumns = "id, patient_id, token_hash, enrolled_at::text, revoked_at::text, last_sync_at::text, name, app"

    static func device(_ row: PostgresRow) throws -> Device {
        device(try row.decode((String, String, String, String, String?, String?, String?, String?).self))
    }

    static func device(_ c: (id: String, patient: String, token: String, enrolled: String, revoked: String?, synced: String?, name: String?, app: String?)) -> Device {
        Device(id: c.id, patientID: c.patient, tokenHash: c.token, enrolledAt: Date(timeIntervalSinceReferenceDate: Double(c.enrolled) ?? 0),
               revokedAt: Date(storeSeconds: c.revoked.flatMap(Double.init)), lastSyncAt: Date(storeSeconds: c.synced.flatMap(Double.init)),
               name: c.name, app: c.app)
    }

    public func addEnrollment(codeHash: String, patientID: String, expires: Date) throws(StoreError) {
        try session { session in
            try session.run("""
                INSERT INTO enrollment_code (code_hash, patient_id, expires) VALUES (\(codeHash), \(patientID), \(expires.storeSeconds))
                ON CONFLICT (code_hash) DO UPDATE SET patient_id = EXCLUDED.patient_id, expires = EXCLUDED.expires
                """)
        }
    }

    public func redeemEnrollment(codeHash: String, device: Device, now: Date) throws(StoreError) -> Device? {
        try transaction { session in
            try session.run("DELETE FROM enrollment_code WHERE expires <= \(now.storeSeconds)")
            guard let row = try session.query("DELETE FROM enrollment_code WHERE code_hash = \(codeHash) RETURNING patient_id").first else {
                return nil
            }
            var enrolled = device
            enrolled.patientID = try row.decode(String.self)
            try session.run("""
                INSERT INTO device (id, patient_id, token_hash, enrolled_at, name, app)
                VALUES (\(enrolled.id), \(enrolled.patientID), \(enrolled.tokenHash), \(enrolled.enrolledAt.storeSeconds), \(enrolled.name), \(enrolled.app))
                """)
            return enrolled
        }
    }

    public func device(tokenHash: String) throws(StoreError) -> Device? {
        try session { session in
            try session.prepared("SELECT \(Self.deviceColumns) FROM device WHERE token_hash = $1::text", [PostgresData(string: tokenHash)]).first.map(Self.device)
        }
    }

    /// The device and its patient's knowledge in one prepared statement (the device's own
    /// patient's, joined on its row): an up-to-date device's pull costs this one trip.
    public func device(tokenHash: String, since: KnowledgeVector) throws(StoreError) -> (device: Device, upToDate: PatientVersions?)? {
        try session { session in
            let sql = "SELECT \(Self.deviceColumns), \(Transaction.knowledgeColumns(patient: "device.patient_id")) FROM device WHERE token_hash = $1::text"
            guard let row = try session.prepared(sql, [PostgresData(string: tokenHash)]).first else { return nil }
            let c = try row.decode((String, String, String, String, String?, String?, String?, String?, String?, String?, String?, String?).self)
            let device = Self.device((c.0, c.1, c.2, c.3, c.4, c.5, c.6, c.7))
            let now = try Transaction.knowledge((c.8, c.9, c.10, c.11), session: session)
            let upToDate = now.knowledge.isCovered(by: since) ? PatientVersions(versions: [], knowledge: now.knowledge, revision: now.clock) : nil
            return (device, upToDate)
        }
    }

    public func device(id: String) throws(StoreError) -> Device? {
        try session { session in try session.query("SELECT \(unescaped: Self.deviceColumns) FROM device WHERE id = \(id)").first.map(Self.device) }
    }

    public func devices(patientID: String?) throws(StoreError) -> [Device] {
        try session { session in
            let query: PostgresQuery = if let patientID {
                "SELECT \(unescaped: Self.deviceColumns) FROM device WHERE patient_id = \(patientID) ORDER BY enrolled_at, id"
            } else {
                "SELECT \(unescaped: Self.deviceColumns) FROM device ORDER BY enrolled_at, id"
            }
            return try session.query(query).map(Self.device)
        }
    }

    public func revokeDevice(id: String, at date: Date) throws(StoreError) -> Bool {
        try session { try $0.run("UPDATE device SET revoked_at = COALESCE(revoked_at, \(date.storeSeconds)) WHERE id = \(id)") > 0 }
    }

    public func recordSyncs(_ times: [String: Date]) throws(StoreError) {
        try transaction { session in
            for (deviceID, date) in times.sorted(by: { $0.key < $1.key }) {
                try session.run("UPDATE device SET last_sync_at = \(date.storeSeconds) WHERE id = \(deviceID)")
            }
        }
    }
}

/// The import log on PostgreSQL.
extension PostgresCarePlanStore: ImportLog {
    @discardableResult
    public func recordImport(_ run: ImportRun) throws(StoreError) -> Int64 {
        try session { session in
            let row = try session.query("""
                INSERT INTO import_run (started_at, source, counts, report)
                VALUES (\(run.startedAt.storeSeconds), \(run.source), \(run.countsJSON), \(ByteBuffer(bytes: run.report))) RETURNING id
                """).first
            guard let row else { throw StoreError.database(path: database.location.description, message: "the import run was not kept") }
            return Int64(try row.decode(Int.self))
        }
    }

    public func importRuns(limit: Int) throws(StoreError) -> [ImportRun] {
        try session { session in
            try session.query("SELECT id, started_at, source, counts, ''::bytea FROM import_run ORDER BY id DESC LIMIT \(limit)").map(Self.importRun)
        }
    }

    public func importRun(id: Int64) throws(StoreError) -> ImportRun? {
        try session { session in
            try session.query("SELECT id, started_at, source, counts, report FROM import_run WHERE id = \(Int(id))").first.map(Self.importRun)
        }
    }

    static func importRun(_ row: PostgresRow) throws -> ImportRun {
        let (id, started, source, counts, report) = try row.decode((Int, Double, String, String, ByteBuffer).self)
        return ImportRun(id: Int64(id), startedAt: Date(timeIntervalSinceReferenceDate: started), source: source,
                         counts: ImportRun.counts(fromJSON: counts), report: Array(buffer: report))
    }
}

/// Bulk Data fetches on PostgreSQL.
extension PostgresCarePlanStore: BulkFetchLog {
    public func bulkFetch(source: String) throws(StoreError) -> BulkFetch? {
        try session { session in
            guard let row = try session.query("SELECT status_url, started_at, manifest, downloaded FROM bulk_fetch WHERE source = \(source)").first else {
                return nil
            }
            let (status, started, manifest, downloaded) = try row.decode((String, Double, ByteBuffer?, String).self)
            return BulkFetch(source: source, statusURL: status, startedAt: Date(timeIntervalSinceReferenceDate: started),
                             manifest: manifest.map { Array(buffer: $0) }, downloaded: BulkFetch.downloaded(fromJSON: downloaded))
        }
    }

    public func saveBulkFetch(_ fetch: BulkFetch) throws(StoreError) {
        try session { session in
            try session.run("""
                INSERT INTO bulk_fetch (source, status_url, started_at, manifest, downloaded)
                VALUES (\(fetch.source), \(fetch.statusURL), \(fetch.startedAt.storeSeconds), \(fetch.manifest.map { ByteBuffer(bytes: $0) }), \(fetch.downloadedJSON))
                ON CONFLICT (source) DO UPDATE SET status_url = EXCLUDED.status_url, started_at = EXCLUDED.started_at,
                                                  manifest = EXCLUDED.manifest, downloaded = EXCLUDED.downloaded
                """)
        }
    }

    public func finishBulkFetch(source: String, transactionTime: String?) throws(StoreError) {
        try transaction { session in
            try session.run("DELETE FROM bulk_fetch WHERE source = \(source)")
            if let transactionTime {
                try session.run("""
                    INSERT INTO bulk_since (source, transaction_time) VALUES (\(source), \(transactionTime))
                    ON CONFLICT (source) DO UPDATE SET transaction_time = EXCLUDED.transaction_time
                    """)
            }
        }
    }

    public func lastTransactionTime(source: String) throws(StoreError) -> String? {
        try session { try $0.query("SELECT transaction_time FROM bulk_since WHERE source = \(source)").first.map { try $0.decode(String.self) } }
    }
}
