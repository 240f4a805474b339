import CareStore
import Foundation

/// Device pushes merged in groups that share one commit. A push that arrives while the store's
/// one writer is busy waits; the waiting pushes are then merged together in one transaction,
/// each in a savepoint of its own (`CarePlanStore.writeGroup`), so that one sync of the log to
/// disk serves them all instead of each paying its own. A refused push undoes only itself; a
/// failed commit fails every push of its group, and none of them is stored.
///
/// A store with several writers (PostgreSQL) gets as many lanes: each patient's pushes go to
/// one lane (in arrival order), and the lanes merge their groups at once, each on a
/// connection of its own. SQLite's one writer gets one lane.
///
/// ```swift
/// let pushes = PushCommitGroups(sync: CareKitSync(store: store))
/// let result = await pushes.push(patientID: "maria-lopez", records: records, deviceKnowledge: vector)  // Result<PushResult, SyncError>
/// ```
public final class PushCommitGroups: Sendable {
    /// The sync the pushes merge through.
    public let sync: CareKitSync
    /// Pushes merged in one transaction, at most.
    public let groupLimit: Int
    /// Pushes waiting, one lane per writer. A lane's groups are merged one after another on a
    /// thread of its own, started when the first push waits and ended when none do: a thread,
    /// not a dispatch queue, so a lane blocked on the store's writer never waits for a pool
    /// thread that other blocked work holds.
    private let lanes: [Locked<Waiting>]

    struct Waiting {
        var pushes: [Push] = []
        /// Whether a thread is merging groups (it takes the pushes that wait, until none do).
        var merging = false
    }

    struct Push: Sendable {
        var patientID: String
        var deviceID: String?
        var records: [RevisionRecord]
        var deviceKnowledge: KnowledgeVector
        var answer: CheckedContinuation<Result<CareKitSync.PushResult, SyncError>, Never>
    }

    /// Groups of at most `groupLimit` pushes over `sync`'s store.
    public init(sync: CareKitSync, groupLimit: Int = 64) {
        self.sync = sync
        self.groupLimit = max(groupLimit, 1)
        lanes = (0..<max(1, sync.store.concurrentWriters)).map { _ in Locked(Waiting()) }
    }

    /// The patient's lane: the same for every push of the patient (FNV-1a of its id).
    func lane(of patientID: String) -> Locked<Waiting> {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in patientID.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return lanes[Int(hash % UInt64(lanes.count))]
    }

    /// Merges a device's records for its patient (as `CareKitSync.push`), in the next group.
    public func push(patientID: String, records: [RevisionRecord], deviceKnowledge: KnowledgeVector,
                     deviceID: String? = nil) async -> Result<CareKitSync.PushResult, SyncError> {
        await withCheckedContinuation { answer in
            let push = Push(patientID: patientID, deviceID: deviceID, records: records, deviceKnowledge: deviceKnowledge, answer: answer)
            let lane = lane(of: patientID)
            let start = lane.withLock { waiting in
                waiting.pushes.append(push)
                defer { waiting.merging = true }
                return !waiting.merging
            }
            if start { Thread.detachNewThread { self.mergeWhileWaiting(in: lane) } }
        }
    }

    /// Merges the lane's waiting pushes a group at a time until none wait (on a blocking thread).
    func mergeWhileWaiting(in lane: Locked<Waiting>) {
        while true {
            let group: [Push] = lane.withLock { waiting in
                let taken = Array(waiting.pushes.prefix(groupLimit))
                waiting.pushes.removeFirst(taken.count)
                if taken.isEmpty { waiting.merging = false }
                return taken
            }
            guard !group.isEmpty else { return }
            let results = sync.store.writeGroup(group.map { push in
                { [sync] tx in
                    try sync.merge(patientID: push.patientID, records: push.records, deviceKnowledge: push.deviceKnowledge, deviceID: push.deviceID, in: tx)
                }
            })
            for (push, result) in zip(group, results) {
                push.answer.resume(returning: result.mapError(CareKitSync.syncError))
            }
        }
    }
}
