import CareStore
import Foundation

/// Two devices recorded the same task occurrence. CareKit cannot hold two live outcomes for one
/// occurrence (a device's insert fails, and later syncs with it), so the gateway settles them
/// as it merges the second: the outcome recorded first wins (earlier `createdDate`, else earlier
/// `effectiveDate`, then the smaller uuid), and the gateway appends one new version of it whose
/// `previousVersionUUIDs` name both. Both stay in history; each device receives the new version
/// as an update of the outcome it has, and the EHR receives the winner once.
public struct OutcomeResolution: Sendable, Hashable {
    /// The task both outcomes are for.
    public var taskID: String
    /// The occurrence both recorded.
    public var occurrence: Int
    /// The outcome version whose values were kept, and the one superseded with it.
    public var kept: UUID
    /// The outcome version that lost.
    public var superseded: UUID
    /// The gateway's new version, which supersedes both.
    public var version: Outcome

    /// The records with each second outcome marked as superseded by its resolution, and the
    /// resolutions to store before those outcomes. `known`: the versions of the records that the
    /// store holds (from `SyncScope.check`); those are not merged again, so never settled.
    static func settle(_ records: [RevisionRecord], known: [UUID: VersionScope], in tx: any CarePlanReader) throws -> (records: [RevisionRecord], resolutions: [OutcomeResolution]) {
        struct Occurrence: Hashable { let task: UUID; let index: Int }
        var live: [Occurrence: Outcome] = [:]
        var successors: [UUID: UUID] = [:]
        var resolutions: [OutcomeResolution] = []
        for record in records {
            for case .outcome(let outcome) in record.entities where known[outcome.uuid] == nil && outcome.deletedDate == nil {
                let key = Occurrence(task: outcome.taskUUID, index: outcome.taskOccurrenceIndex)
                let current: Outcome?
                if let sent = live[key] { current = sent } else { current = try storedLive(key.task, key.index, in: tx) }
                guard let current, !outcome.version.previousVersionUUIDs.contains(current.uuid) else {
                    live[key] = outcome
                    continue
                }
                let resolution = OutcomeResolution(between: current, and: outcome, taskID: try taskID(outcome.taskUUID, records, in: tx))
                resolutions.append(resolution)
                successors[current.uuid] = resolution.version.uuid
                successors[outcome.uuid] = resolution.version.uuid
                live[key] = resolution.version
            }
        }
        let marked = records.map { record in
            RevisionRecord(entities: record.entities.map { entity in
                guard let next = successors[entity.version.uuid] else { return entity }
                var marked = entity
                marked.version.nextVersionUUIDs.append(next)
                return marked
            }, knowledgeVector: record.knowledgeVector)
        }
        return (marked, resolutions)
    }

    init(between first: Outcome, and second: Outcome, taskID: String) {
        func key(_ o: Outcome) -> (Date, String) { (o.version.createdDate ?? o.effectiveDate, o.uuid.uuidString) }
        let (winner, loser) = key(first) <= key(second) ? (first, second) : (second, first)
        var version = winner
        version.version.uuid = .timeOrdered()
        version.version.previousVersionUUIDs = [winner.uuid, loser.uuid]
        version.version.nextVersionUUIDs = []
        version.version.effectiveDate = max(first.effectiveDate, second.effectiveDate)
        version.version.createdDate = Date()
        version.version.updatedDate = Date()
        self.taskID = taskID
        occurrence = winner.taskOccurrenceIndex
        kept = winner.uuid
        superseded = loser.uuid
        self.version = version
    }

    /// The live stored outcome for a task version's occurrence, if any.
    static func storedLive(_ task: UUID, _ occurrence: Int, in tx: any CarePlanReader) throws -> Outcome? {
        try tx.liveOutcome(taskUUID: task, occurrence: occurrence)
    }

    static func taskID(_ task: UUID, _ records: [RevisionRecord], in tx: any CarePlanReader) throws -> String {
        for record in records {
            for case .task(let sent) in record.entities where sent.uuid == task { return sent.id }
        }
        return try tx.fetchTasks(EntityQuery(versions: .history, uuids: [task])).first?.id ?? task.uuidString
    }
}
