import Foundation

/// A version as a store holds it, for moving a store between backends: the entity (without
/// successors: they follow from later versions), its patient, the vector a device's record
/// stamped it with, and its number on the sync clock.
public struct ArchivedVersion: Sendable {
    /// The version.
    public var entity: CareEntity
    /// The patient whose data it is.
    public var patientID: String?
    /// The knowledge vector of the device record that brought it, when a device did.
    public var stamp: String?
    /// Its number on the store's sync clock.
    public var revision: Int

    /// A version as archived.
    public init(entity: CareEntity, patientID: String?, stamp: String?, revision: Int) {
        self.entity = entity
        self.patientID = patientID
        self.stamp = stamp
        self.revision = revision
    }
}

/// One value of a gateway table's row, whatever the backend's own type for it.
public enum ArchiveValue: Sendable, Hashable {
    /// No value.
    case null
    /// A whole number.
    case integer(Int64)
    /// A floating-point number.
    case real(Double)
    /// Text.
    case text(String)
    /// Bytes.
    case bytes([UInt8])
    /// A uuid (text on SQLite, `uuid` on PostgreSQL).
    case uuid(UUID)
}

/// The gateway's own tables that move with a store, and their columns (the same names on every
/// backend). Attempts and dashboard sessions stay behind (they last minutes), as do enrollment
/// codes (fifteen minutes) and push and refresh leases (a copy is made with the gateways stopped).
public enum ArchivedTable: String, CaseIterable, Sendable {
    /// The devices, the push outbox, the import log, Bulk fetches and their last times, the
    /// patients' knowledge, the sync processes, the refresh schedule and the survey forms.
    case device, pushOutbox = "push_outbox", importRun = "import_run", bulkFetch = "bulk_fetch", bulkSince = "bulk_since",
         patientKnowledge = "patient_knowledge", syncProcess = "sync_process", refreshSchedule = "refresh_schedule",
         questionnaire

    /// A column's type, as both backends can hold it.
    public enum Column: Sendable {
        /// A 64-bit integer.
        case integer
        /// A floating-point number.
        case real
        /// Text.
        case text
        /// Bytes.
        case bytes
        /// A uuid.
        case uuid
    }

    /// The columns copied, in order; the first orders the rows.
    public var columns: [(name: String, type: Column)] {
        switch self {
        case .device: [("id", .text), ("patient_id", .text), ("token_hash", .text), ("enrolled_at", .real), ("revoked_at", .real), ("last_sync_at", .real),
                        ("name", .text), ("app", .text)]
        case .pushOutbox: [("queued_at", .real), ("version_uuid", .uuid), ("entity_id", .text), ("idempotency_key", .text), ("payload", .bytes),
                           ("state", .text), ("attempts", .integer), ("last_error", .text), ("remote_location", .text), ("finished_at", .real)]
        case .importRun: [("started_at", .real), ("source", .text), ("counts", .text), ("report", .bytes)]
        case .bulkFetch: [("source", .text), ("status_url", .text), ("started_at", .real), ("manifest", .bytes), ("downloaded", .text)]
        case .bulkSince: [("source", .text), ("transaction_time", .text)]
        case .patientKnowledge: [("patient_id", .text), ("vector", .text)]
        case .syncProcess: [("process", .uuid), ("patient_id", .text)]
        case .refreshSchedule: [("patient_id", .text), ("ehr_id", .text), ("next_at", .real), ("last_success", .real), ("requested_at", .real)]
        case .questionnaire: [("stored_at", .real), ("patient_id", .text), ("url", .text), ("version", .text), ("digest", .text), ("title", .text),
                              ("resource", .bytes)]
        }
    }
}

/// What `caregate store copy` reads from one backend and writes to another: every version in
/// writing order with what scopes it, the gateway's own tables row by row, and the store's
/// sync process, so devices synced against the source go on syncing against the copy.
public protocol StoreArchive: CarePlanStore {
    /// Every version in writing order (parents before children), read on one snapshot.
    func forEachArchivedVersion(_ body: (ArchivedVersion) throws -> Void) throws
    /// A gateway table's rows, ordered by its first column.
    func archivedRows(_ table: ArchivedTable) throws(StoreError) -> [[ArchiveValue]]
    /// Writes versions as they were (in one transaction, under the store's rules), each numbered
    /// no lower than it was: a device's knowledge of the source never covers a later version.
    func restore(_ versions: [ArchivedVersion]) throws(StoreError)
    /// Adds rows to a gateway table (one transaction).
    func restore(_ rows: [[ArchiveValue]], into table: ArchivedTable) throws(StoreError)
    /// Takes over another store's CareKit sync process (a copy's devices know that one).
    func adoptProcessID(_ id: UUID) throws(StoreError)
}

extension VersionWriter {
    /// Writes archived versions in their writing order: each linked after the versions it
    /// follows, scoped and stamped as it was, numbered at least as it was.
    public func restore(_ versions: [ArchivedVersion]) throws {
        for archived in versions {
            var batch = Batch()
            batch.patientID = archived.patientID
            batch.stamp = archived.stamp
            try finishing(&batch) { batch in
                for previous in archived.entity.version.previousVersionUUIDs {
                    try rows.link(previous: previous, next: archived.entity.version.uuid, nextEffective: archived.entity.version.effectiveDate)
                }
                try rows.raiseClock(of: archived.patientID, to: archived.revision)
                try insertChecked(archived.entity, patientID: archived.patientID, batch: &batch)
            }
        }
    }
}
