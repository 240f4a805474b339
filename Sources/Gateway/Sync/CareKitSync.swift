import CareStore
import Foundation

/// The backend of CareKit's sync (`OCKRemoteSynchronizable`) for one patient's devices: pulls
/// send the versions a device's knowledge vector does not cover, pushes merge a device's
/// revision records. Everything is scoped to the patient the caller is bound to: a device
/// never reads or writes another patient's versions, whatever uuids or vectors it sends.
///
/// ```swift
/// let sync = CareKitSync(store: store)
/// let page = try sync.pull(patientID: "maria-lopez", since: deviceVector)
/// let pushed = try sync.push(patientID: "maria-lopez", records: records, deviceKnowledge: vector)
/// ```
public struct CareKitSync: Sendable {
    /// The store synced.
    public let store: any CarePlanStore
    /// Where a pull's ordered list waits for its next pages (nil: each page works it out again).
    public let pages: PullPageCache?
    /// Versions per pull page when the device asks for no limit.
    public static let defaultPageSize = 1_000

    /// Sync over `store`, keeping pulls' lists in `pages` when given.
    public init(store: any CarePlanStore, pages: PullPageCache? = nil) {
        self.store = store
        self.pages = pages
    }

    // MARK: Pull

    /// Where a paged pull goes on: the store revision its first page read up to, and how many
    /// versions earlier pages sent.
    public struct PullCursor: Sendable, Hashable {
        /// The store revision the first page read up to.
        public var revision: Int
        /// Versions sent by earlier pages.
        public var offset: Int

        /// A cursor.
        public init(revision: Int, offset: Int) {
            self.revision = revision
            self.offset = offset
        }
    }

    /// One page of a pull: one revision record in apply order. Only the last page carries the
    /// catch-up vector; earlier pages carry what both sides know, so a device that stops
    /// between pages loses nothing: its next pull sends the rest again.
    public struct PullPage: Sendable {
        /// The page's versions in apply order, as stored (a pull copies them, never decodes them).
        public var versions: [StoredVersion]
        /// The page's record vector: what both sides know (the catch-up on the last page).
        public var knowledgeVector: [RevisionRecord.Process]
        /// The patient's knowledge (on the last page only).
        public var catchUp: KnowledgeVector?
        /// Where the next page starts; nil on the last.
        public var next: PullCursor?

        /// The page as a revision record's JSON (the bytes a device receives).
        public func bytes() -> [UInt8] { RevisionRecord.bytes(of: versions, knowledgeVector: knowledgeVector) }

        /// The page as a revision record, its versions decoded.
        public func record() throws(CareKitJSONError) -> RevisionRecord {
            RevisionRecord(entities: try versions.entities(), knowledgeVector: knowledgeVector)
        }
    }

    /// The patient's versions `since` does not cover, `limit` at a time. `upToDate`: the
    /// store's answer already read for an up-to-date device (`DeviceEnrollment.authenticate`).
    public func pull(patientID: String, since: KnowledgeVector, limit: Int = defaultPageSize,
                     cursor: PullCursor? = nil, upToDate: PatientVersions? = nil) throws(StoreError) -> PullPage {
        let versions: PatientVersions
        if cursor == nil, let upToDate, upToDate.versions.isEmpty, upToDate.knowledge.isCovered(by: since) {
            versions = upToDate
        } else if let cursor, let kept = pages?.versions(patientID, since: since, revision: cursor.revision) {
            versions = kept
        } else {
            versions = try store.patientVersions(patientID, notCoveredBy: since, upTo: cursor?.revision)
            if versions.versions.count > limit { pages?.keep(versions, patientID, since: since) }
        }
        let all = versions.versions
        let offset = min(cursor?.offset ?? 0, all.count)
        let end = min(offset + max(limit, 1), all.count)
        let page = Array(all[offset..<end])
        guard end < all.count else {
            if cursor != nil { pages?.drop(patientID, since: since, revision: versions.revision) }
            return PullPage(versions: page, knowledgeVector: versions.knowledge.processes, catchUp: versions.knowledge, next: nil)
        }
        let known = since.common(with: versions.knowledge)
        return PullPage(versions: page, knowledgeVector: known.processes, catchUp: nil, next: PullCursor(revision: versions.revision, offset: end))
    }

    // MARK: Push

    /// What a push did.
    public struct PushResult: Sendable {
        /// New versions stored (versions the gateway had already are skipped).
        public var merged: Int
        /// Entities of this push that now have more than one current version (CareKit's
        /// conflicts: the device resolves them at its next sync).
        public var conflicts: [String]
        /// Outcomes recorded twice for one occurrence, and how each was settled.
        public var resolutions: [OutcomeResolution]
        /// The patient's knowledge after the push.
        public var knowledge: KnowledgeVector
    }

    /// Merges a device's records for its patient, all or nothing, in one transaction. With
    /// `deviceID`, the device must still be enrolled when the transaction runs.
    public func push(patientID: String, records: [RevisionRecord], deviceKnowledge: KnowledgeVector,
                     deviceID: String? = nil) throws(SyncError) -> PushResult {
        do {
            return try store.write { tx in
                try merge(patientID: patientID, records: records, deviceKnowledge: deviceKnowledge, deviceID: deviceID, in: tx)
            }
        } catch {
            throw Self.syncError(error)
        }
    }

    /// A push's merge inside a transaction (`push`, or a group of pushes sharing one commit).
    /// The device's versions are stored without the fields the gateway owns (`GatewayOwnedFields`).
    func merge(patientID: String, records sent: [RevisionRecord], deviceKnowledge: KnowledgeVector, deviceID: String?,
               in tx: any CarePlanWriter) throws -> PushResult {
        if let deviceID, try !tx.isEnrolled(deviceID: deviceID, patientID: patientID) { throw SyncError.revoked }
        let records = try SyncScope.ordered(GatewayOwnedFields.stripped(sent).map { GatewayOwnedFields.naming(deviceID, in: $0) })
        let knowledge = try tx.patientKnowledge(patientID, upTo: nil)
        guard knowledge.isCovered(by: deviceKnowledge) else { throw SyncError.pullFirst(knowledge) }
        let known = try SyncScope.check(records, deviceKnowledge: deviceKnowledge, patientID: patientID, knowledge: knowledge, in: tx)
        let settled = try OutcomeResolution.settle(records, known: known, in: tx)
        // Parents first, then the gateway's resolutions, then the outcomes they settle. The
        // outcomes' call records the push's knowledge (the parents' call, when there are
        // parents, records the same again).
        let isOutcome: (CareEntity) -> Bool = { $0.entityType == .outcome }
        var merged = 0
        if settled.records.contains(where: { $0.entities.contains { !isOutcome($0) } }) {
            merged += try tx.mergeDeviceRecords(settled.records.map { $0.filtered { !isOutcome($0) } }, patientID: patientID,
                                                deviceKnowledge: deviceKnowledge)
        }
        for resolution in settled.resolutions {
            try tx.merge(RevisionRecord(entities: [.outcome(resolution.version)], knowledgeVector: []))
        }
        merged += try tx.mergeDeviceRecords(settled.records.map { $0.filtered(isOutcome) }, patientID: patientID,
                                            deviceKnowledge: deviceKnowledge)
        let sent = records.flatMap { $0.entities.map { (type: $0.entityType, id: $0.version.id) } }
        let conflicts = try tx.conflicts(among: sent, of: patientID).map(\.1).sorted()
        return PushResult(merged: merged, conflicts: conflicts, resolutions: settled.resolutions,
                          knowledge: try tx.patientKnowledge(patientID, upTo: nil))
    }

    /// A push's failure as the sync API reports it.
    static func syncError(_ error: any Error) -> SyncError {
        switch error {
        case let error as SyncError: error
        case let error as StoreError: .store(error)
        default: .store(.database(path: "", message: "\(error)"))
        }
    }
}

/// The ordered lists of pulls with more pages to come, kept for those pages: every page reads
/// up to the first page's revision, so the list is the same, and working it out again for each
/// page made a first pull of a year's plan cost its page count times over. A few lists are kept
/// (the most recent); a page whose list was dropped works it out again, with the same result.
/// A list goes once its last page is served: a year's plan is megabytes, kept for nobody.
public final class PullPageCache: Sendable {
    private let lists = Locked<[(key: String, versions: PatientVersions)]>([])
    let capacity: Int

    /// Four: a list is a year's plan in megabytes, and with many devices catching up at once
    /// any small cache is outrun anyway (sync-load, 200 devices: 16 lists held 43 MB more after
    /// the catch-up than 4, which caught up no slower).
    public init(capacity: Int = 4) {
        self.capacity = capacity
    }

    static func key(_ patientID: String, _ since: KnowledgeVector, _ revision: Int) -> String {
        "\(patientID)\u{0}\(revision)\u{0}\(since.json)"
    }

    func versions(_ patientID: String, since: KnowledgeVector, revision: Int) -> PatientVersions? {
        let key = Self.key(patientID, since, revision)
        return lists.withLock { lists in lists.last { $0.key == key }?.versions }
    }

    /// How many lists are kept.
    public var count: Int { lists.withLock { $0.count } }

    func drop(_ patientID: String, since: KnowledgeVector, revision: Int) {
        let key = Self.key(patientID, since, revision)
        lists.withLock { lists in lists.removeAll { $0.key == key } }
    }

    func keep(_ versions: PatientVersions, _ patientID: String, since: KnowledgeVector) {
        let key = Self.key(patientID, since, versions.revision)
        lists.withLock { lists in
            lists.removeAll { $0.key == key }
            lists.append((key, versions))
            if lists.count > capacity { lists.removeFirst(lists.count - capacity) }
        }
    }
}

/// Why a sync request is refused. Nothing of a refused push is stored.
public enum SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The gateway holds knowledge the device has not pulled (HTTP 409): pull, then push again.
    case pullFirst(KnowledgeVector)
    /// A record breaks a rule: which record, entity and field, and why (HTTP 400).
    case refused(record: Int?, entity: String?, field: String, reason: String)
    /// The store failed or refused the versions (a missing parent, an occurrence that does not exist).
    case store(StoreError)
    /// The device was revoked before its push was merged (HTTP 401); nothing of it is stored.
    case revoked

    public var description: String {
        switch self {
        case .pullFirst: "the gateway has knowledge this device has not pulled: pull first"
        case .refused(let record, let entity, let field, let reason):
            [record.map { "revisions[\($0)]" }, entity, field].compactMap { $0 }.joined(separator: " ") + ": " + reason
        case .store(let error): "\(error)"
        case .revoked: "the device was revoked; nothing of this request was merged"
        }
    }
}

extension RevisionRecord {
    /// The record with only the entities that pass, under the same vector.
    func filtered(_ keep: (CareEntity) -> Bool) -> RevisionRecord {
        RevisionRecord(entities: entities.filter(keep), knowledgeVector: knowledgeVector)
    }
}
