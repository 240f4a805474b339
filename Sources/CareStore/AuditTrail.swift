import Crypto
import Foundation
import JSON

/// One access to one patient's data (or an attempt at it): who, when, from where, what they did
/// and how it ended. The store keeps entries append-only, each chained to the one before by
/// hash (`AuditChain`), so that an entry changed, removed or inserted afterwards shows.
///
/// ```swift
/// try store.record([AuditEntry(recorded: Date(), actor: .init(kind: .device, id: device), action: .read, event: "carekit.pull",
///                              patientID: "Patient/maria-lopez", source: "203.0.113.9", outcome: .success, detail: "41 versions")])
/// ```
public struct AuditEntry: Sendable, Hashable {
    /// Who acted.
    public struct Actor: Sendable, Hashable {
        /// What kind of actor: a device, an operator, a command, a worker, the EHR.
        public var kind: ActorKind
        /// Its id: a device id, an operator token's fingerprint, an OS user, a worker's EHR base URL.
        public var id: String

        /// An actor of `kind` known as `id`.
        public init(kind: ActorKind, id: String) {
            self.kind = kind
            self.id = id
        }
    }

    /// The kinds of actor an access is recorded for.
    public enum ActorKind: String, Sendable, CaseIterable {
        /// A patient's device over the CareKit routes.
        case device
        /// An operator at the dashboard.
        case `operator`
        /// A `caregate` command run on the host.
        case command
        /// One of `caregate serve`'s workers (push, refresh).
        case worker
        /// The EHR (a notification it sent).
        case ehr
    }

    /// What was done to the data (FHIR's AuditEvent action codes).
    public enum Action: String, Sendable, CaseIterable {
        /// Made new data.
        case create = "C"
        /// Read it.
        case read = "R"
        /// Changed it.
        case update = "U"
        /// Removed it.
        case delete = "D"
        /// Ran something on it (an export, a refresh).
        case execute = "E"
    }

    /// How the access ended.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Done.
        case success
        /// Refused: not allowed, or the request was bad.
        case refused
        /// Allowed, and it failed.
        case failed
    }

    /// When it happened.
    public var recorded: Date
    /// Who did it.
    public var actor: Actor
    /// What was done.
    public var action: Action
    /// The kind of access, named once (`carekit.pull`, `dashboard.patient`, `command.report`).
    public var event: String
    /// The patient whose data it was, when one was named.
    public var patientID: String?
    /// The entities reached (`CarePlan/…`, task ids), when fewer than the whole record.
    public var entities: [String]
    /// Where it came from: a client address (after the trusted-proxy rule), a host.
    public var source: String?
    /// How it ended.
    public var outcome: Outcome
    /// What else an auditor needs: counts, the command line, a failure's kind.
    public var detail: String?

    /// An entry as an access records it (entity names cut to 256 characters, control characters
    /// in them replaced: they are kept one per line).
    public init(recorded: Date, actor: Actor, action: Action, event: String, patientID: String?, entities: [String] = [],
                source: String? = nil, outcome: Outcome, detail: String? = nil) {
        self.recorded = recorded
        self.actor = actor
        self.action = action
        self.event = event
        self.patientID = patientID
        // One per line as kept: a line break (or any control character) in a name from a request is not kept.
        self.entities = entities.map { entity in
            String(String.UnicodeScalarView(entity.unicodeScalars.prefix(256).map { $0.properties.generalCategory == .control ? "\u{FFFD}" : $0 }))
        }
        self.source = source
        self.outcome = outcome
        self.detail = detail
    }
}

/// An entry as the store keeps it: its place in the chain and the hashes that tie it there.
public struct ChainedAuditEntry: Sendable, Hashable {
    /// Its place, from 1, with no gaps.
    public var sequence: Int64
    /// The entry.
    public var entry: AuditEntry
    /// The hash of the entry before it (`AuditChain.genesis` for the first).
    public var previousHash: String
    /// The hash of this entry over its place, its fields and `previousHash`.
    public var hash: String

    /// A kept entry.
    public init(sequence: Int64, entry: AuditEntry, previousHash: String, hash: String) {
        self.sequence = sequence
        self.entry = entry
        self.previousHash = previousHash
        self.hash = hash
    }
}

/// Which entries to read: one patient's, an actor's, a time range (each optional).
public struct AuditQuery: Sendable, Hashable {
    /// The patient named.
    public var patientID: String?
    /// The actor's id.
    public var actorID: String?
    /// At or after.
    public var since: Date?
    /// Before.
    public var until: Date?
    /// At most this many, newest last.
    public var limit: Int
    /// Only entries after this sequence, and then the first `limit` of them (a page, oldest
    /// first) rather than the last: how `AuditPages` walks a query.
    public var after: Int64?

    /// Entries matching every given field.
    public init(patientID: String? = nil, actorID: String? = nil, since: Date? = nil, until: Date? = nil, limit: Int = 10_000, after: Int64? = nil) {
        self.patientID = patientID
        self.actorID = actorID
        self.since = since
        self.until = until
        self.limit = limit
        self.after = after
    }
}

/// The trail read oldest first, a page at a time, so a walk over every entry (`verify`, a
/// prune, an export) holds one page in memory: the whole chain, or the entries a query matches
/// (read by the store's index, not filtered here).
///
/// ```swift
/// var pages = AuditPages(store, matching: AuditQuery(patientID: "Patient/maria-lopez"))
/// while let row = try pages.next() { print(row.sequence, row.entry.event) }
/// ```
public struct AuditPages {
    let trail: any AuditTrail
    let query: AuditQuery?
    let size: Int
    var after: Int64
    var page: [ChainedAuditEntry] = []
    var index = 0
    var exhausted = false

    /// The entries after sequence `after` that `query` matches (every kept entry without one),
    /// read `size` at a time. The query's own `after` and `limit` are not used.
    public init(_ trail: any AuditTrail, matching query: AuditQuery? = nil, after: Int64 = 0, size: Int = 1_000) {
        self.trail = trail
        self.query = query
        self.after = after
        self.size = max(size, 1)
    }

    /// The next entry, reading the next page when this one is done; nil at the end.
    public mutating func next() throws(StoreError) -> ChainedAuditEntry? {
        if index == page.count {
            guard !exhausted else { return nil }
            if var query {
                (query.after, query.limit) = (after, size)
                page = try trail.auditEntries(query)
            } else {
                page = try trail.auditChain(from: after + 1, limit: size)
            }
            (index, exhausted) = (0, page.count < size)
            guard let last = page.last else { return nil }
            after = last.sequence
        }
        defer { index += 1 }
        return page[index]
    }
}

/// Where entries are kept, append-only and in one chain (both backends: one global order, each
/// append chained to the last under the store's write lock).
public protocol AuditTrail: Sendable {
    /// Appends entries, in order, each chained to the one before; with `queueing`, puts each
    /// chained entry's item in the outbox in the same transaction (an entry is queued for the
    /// EHR exactly when it is kept).
    func record(_ entries: [AuditEntry], queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)?) throws(StoreError)
    /// The entries a query matches, in chain order (the last `query.limit`).
    func auditEntries(_ query: AuditQuery) throws(StoreError) -> [ChainedAuditEntry]
    /// The chain from `sequence` on, at most `limit` entries: what `AuditChain.verify` walks.
    func auditChain(from sequence: Int64, limit: Int) throws(StoreError) -> [ChainedAuditEntry]
    /// The last entry's sequence and hash as the store noted them with each append (kept apart
    /// from the entries): what shows entries cut from the end.
    func auditHead() throws(StoreError) -> (sequence: Int64, hash: String)?
    /// Where the kept chain starts once a prefix was dropped: the last dropped entry's sequence
    /// and hash (nil while nothing was dropped).
    func auditAnchor() throws(StoreError) -> (sequence: Int64, hash: String)?
    /// Drops the entries up to `sequence` (a prefix of the chain, never a part in its middle),
    /// keeping that entry's sequence and hash as the anchor the rest is verified from. Returns
    /// how many were dropped; none when `sequence` is not kept.
    func dropAuditPrefix(through sequence: Int64) throws(StoreError) -> Int
}

extension AuditTrail {
    /// Appends entries, in order, each chained to the one before.
    public func record(_ entries: [AuditEntry]) throws(StoreError) { try record(entries, queueing: nil) }
}

/// The chain's hashing and its check, one implementation for every backend.
public enum AuditChain {
    /// The previous hash of the first entry: 64 zeros.
    public static let genesis = String(repeating: "0", count: 64)

    /// An entry's hash: SHA-256 over its sequence, every field (each length-prefixed, so no two
    /// entries write the same text) and the previous hash, in lower-case hex.
    public static func hash(sequence: Int64, _ entry: AuditEntry, previous: String) -> String {
        // Built as bytes and hexed by table: the server hashes every access of the last second at once.
        var text: [UInt8] = []
        text.reserveCapacity(256 + (entry.detail?.utf8.count ?? 0))
        func add(_ field: String) {
            text.append(contentsOf: String(field.utf8.count).utf8)
            text.append(UInt8(ascii: ":"))
            text.append(contentsOf: field.utf8)
        }
        for field in [String(sequence), String(entry.recorded.timeIntervalSinceReferenceDate.bitPattern, radix: 16), entry.actor.kind.rawValue, entry.actor.id,
                      entry.action.rawValue, entry.event, entry.patientID ?? "\u{0}", entry.entities.joined(separator: "\u{1F}"), entry.source ?? "\u{0}",
                      entry.outcome.rawValue, entry.detail ?? "\u{0}", previous] {
            add(field)
        }
        return TextEncoding.hexadecimal(SHA256.hash(data: text))
    }

    /// The entries after `last` chained on: sequences and hashes.
    public static func chained(_ entries: [AuditEntry], after last: (sequence: Int64, hash: String)?) -> [ChainedAuditEntry] {
        var sequence = last?.sequence ?? 0, previous = last?.hash ?? genesis
        return entries.map { entry in
            sequence += 1
            let hash = hash(sequence: sequence, entry, previous: previous)
            defer { previous = hash }
            return ChainedAuditEntry(sequence: sequence, entry: entry, previousHash: previous, hash: hash)
        }
    }

    /// Where a chain does not hold.
    public struct Break: Sendable, Hashable, CustomStringConvertible {
        /// The entry at fault (its sequence as kept).
        public var sequence: Int64
        /// What is wrong there.
        public var reason: String

        public var description: String { "entry \(sequence): \(reason)" }
    }

    /// Walks the whole kept chain (from the anchor, when a prefix was dropped), a page at a time: the first place where an entry was changed
    /// (its hash), removed (a gap, or the next entry's previous hash) or inserted (a sequence
    /// out of order, a hash that does not follow); nil when it holds. Returns how many entries were checked.
    public static func verify(_ trail: any AuditTrail, page: Int = 5_000) throws(StoreError) -> (checked: Int, break: Break?) {
        let anchor = try trail.auditAnchor()
        var expected: Int64 = (anchor?.sequence ?? 0) + 1, previous = anchor?.hash ?? genesis, checked = 0
        var rows = AuditPages(trail, after: expected - 1, size: page)
        while let row = try rows.next() {
            guard row.sequence == expected else {
                return (checked, Break(sequence: row.sequence, reason: "expected entry \(expected) here: \(row.sequence < expected ? "an entry inserted" : "entries removed before it")"))
            }
            guard row.previousHash == previous else {
                return (checked, Break(sequence: row.sequence, reason: "its previous hash is not the hash of the entry before it (an entry before it was changed, removed or inserted)"))
            }
            guard hash(sequence: row.sequence, row.entry, previous: row.previousHash) == row.hash else {
                return (checked, Break(sequence: row.sequence, reason: "its fields do not give its hash (the entry was changed)"))
            }
            previous = row.hash
            expected += 1
            checked += 1
        }
        let head = try trail.auditHead()
        if (head?.sequence ?? 0) != expected - 1 || (head?.hash ?? genesis) != previous {
            return (checked, Break(sequence: expected, reason: "the chain ends at entry \(expected - 1), and the store noted its last append as entry \(head?.sequence ?? 0) (entries removed from the end, or the note changed)"))
        }
        return (checked, nil)
    }
}
