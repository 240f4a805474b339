import CareStore
import FHIR
import Foundation

/// Keeps the trail to a number of days: the entries older than that which open the chain are
/// written to an archive file as AuditEvents first, then dropped as one prefix, so the rest
/// still verifies from the anchor the drop leaves. An entry newer than the cut-off stops the
/// prefix: nothing after it is dropped, even if older.
///
/// ```swift
/// let pruned = try AuditRetention(trail: store, keepDays: 365, archive: "/var/lib/caregate/audit", observer: "ward-3").prune()
/// // pruned.file: /var/lib/caregate/audit/audit-events-from-1.ndjson
/// ```
public struct AuditRetention: Sendable {
    /// The trail pruned.
    public var trail: any AuditTrail
    /// Entries younger than this many days are kept.
    public var keepDays: Int
    /// The folder the dropped entries are archived in (one owner-only NDJSON file per prune).
    public var archive: String
    /// The gateway named in the archived AuditEvents.
    public var observer: String

    /// Retention of `keepDays` days over `trail`, archiving into `archive`.
    public init(trail: any AuditTrail, keepDays: Int, archive: String, observer: String) {
        self.trail = trail
        self.keepDays = keepDays
        self.archive = archive
        self.observer = observer
    }

    /// What a prune did: how many entries were archived and dropped, and where.
    public struct Pruned: Sendable, Equatable {
        /// Entries dropped from the store.
        public var dropped: Int
        /// The archive file they were written to; nil when nothing was old enough.
        public var file: String?
    }

    /// Archives and drops the old prefix. The archive is written and closed before anything is
    /// dropped: when it cannot be written, nothing is.
    public func prune(now: Date = Date()) throws -> Pruned {
        let cutoff = now.addingTimeInterval(-Double(keepDays) * 86_400)
        // Streamed: the first prune of a large trail holds one page at a time.
        var rows = AuditPages(trail, after: try trail.auditAnchor()?.sequence ?? 0)
        guard let first = try rows.next(), first.entry.recorded < cutoff else { return Pruned(dropped: 0, file: nil) }
        let path = try archivePath(from: first.sequence)
        let resource = AuditEventResource(observer: observer)
        let last = try FHIROutput.writing(to: path) { sink in
            var row: ChainedAuditEntry? = first, last = first.sequence
            while let current = row, current.entry.recorded < cutoff {
                try sink.write(resource.json(current).bytes() + [0x0A])
                last = current.sequence
                row = try rows.next()
            }
            return last
        }
        return Pruned(dropped: try trail.dropAuditPrefix(through: last), file: path)
    }

    /// The archive file for entries from `sequence` on, in an owner-only folder made when missing.
    func archivePath(from sequence: Int64) throws -> String {
        try FileManager.default.createDirectory(atPath: archive, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return (archive as NSString).appendingPathComponent("audit-events-from-\(sequence).ndjson")
    }
}
