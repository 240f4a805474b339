import CareStore
import Foundation

/// The checks that keep a device inside its own patient's data, run before anything of a push
/// is stored: its vector claims no knowledge the gateway never gave out and names no other
/// patient's processes; every version it sends, and every version it links to, is its
/// patient's own (or new, in the same push).
enum SyncScope {
    /// Checks a push; returns the scope of each version it sends or links to that the store
    /// holds (the rest of the merge reads them from here instead of looking them up again).
    static func check(_ records: [RevisionRecord], deviceKnowledge: KnowledgeVector, patientID: String,
                      knowledge: KnowledgeVector, in tx: any CarePlanReader) throws -> [UUID: VersionScope] {
        guard let gateway = try tx.knowledgeVector().first?.id else { return [:] }
        if deviceKnowledge.clock(for: gateway) > knowledge.clock(for: gateway) {
            throw SyncError.refused(record: nil, entity: nil, field: "knowledgeVector",
                                    reason: "claims clock \(deviceKnowledge.clock(for: gateway)) of the gateway's process, which has given this patient's devices only \(knowledge.clock(for: gateway))")
        }
        try checkSize(deviceKnowledge, record: nil)
        var stamps: [KnowledgeVector] = []
        for (i, record) in records.enumerated() {
            let stamp: KnowledgeVector
            do { stamp = try KnowledgeVector(processes: record.knowledgeVector) } catch {
                throw SyncError.refused(record: i, entity: nil, field: "knowledgeVector", reason: "\(error)")
            }
            guard stamp.isCovered(by: deviceKnowledge) else {
                throw SyncError.refused(record: i, entity: nil, field: "knowledgeVector", reason: "is ahead of the device's own knowledge vector")
            }
            stamps.append(stamp)
        }
        let processes = Set(deviceKnowledge.clocks.keys).subtracting([gateway])
        for (process, owner) in try tx.processOwners(Array(processes)) where owner != patientID {
            throw SyncError.refused(record: nil, entity: nil, field: "knowledgeVector",
                                    reason: "names process \(process.uuidString), which writes another patient's data")
        }
        return try checkEntities(records, patientID: patientID, in: tx)
    }

    /// Refuses a vector naming more processes than a patient may have, the gateway's beside them
    /// (`SyncBounds`), before anything is read for it. A device's vector covers its patient's
    /// knowledge (or the push is told to pull first), so this bounds the patient's too.
    static func checkSize(_ vector: KnowledgeVector, record: Int?) throws {
        guard vector.clocks.count <= SyncBounds.processesPerPatient + 1 else {
            throw SyncError.refused(record: record, entity: nil, field: "knowledgeVector",
                                    reason: "names \(vector.clocks.count) processes; a vector names at most \(SyncBounds.processesPerPatient + 1)")
        }
    }

    /// A device's records with the links the gateway keeps itself: successors (`nextVersionUUIDs`)
    /// are never taken from a device (they follow from the versions that name their previous
    /// ones), and each record's versions come after the versions of it they replace. A version
    /// naming itself, or versions naming each other, are refused.
    static func ordered(_ records: [RevisionRecord]) throws -> [RevisionRecord] {
        try records.enumerated().map { i, record in
            var waiting = record.entities.map { entity -> CareEntity in
                var entity = entity
                entity.version.nextVersionUUIDs = []
                return entity
            }
            for entity in waiting where entity.version.previousVersionUUIDs.contains(entity.version.uuid) {
                throw SyncError.refused(record: i, entity: name(entity), field: "previousVersionUUIDs", reason: "names the version itself")
            }
            // Each pass places the versions whose previous versions in this record are placed.
            var placed: [CareEntity] = []
            var pending = Set(waiting.map(\.version.uuid))
            while !waiting.isEmpty {
                let ready = waiting.filter { pending.isDisjoint(with: $0.version.previousVersionUUIDs) }
                guard !ready.isEmpty else {
                    throw SyncError.refused(record: i, entity: name(waiting[0]), field: "previousVersionUUIDs",
                                            reason: "versions of this record name each other as previous versions")
                }
                placed += ready
                pending.subtract(ready.map(\.version.uuid))
                waiting.removeAll { !pending.contains($0.version.uuid) }
            }
            return RevisionRecord(entities: placed, knowledgeVector: record.knowledgeVector)
        }
    }

    static func name(_ entity: CareEntity) -> String { "\(entity.entityType.rawValue) \"\(entity.version.id)\"" }

    /// Every version sent and every version linked to is the patient's, and every task within
    /// `SyncBounds`; returns the stored ones' scopes. A link to another patient's version is
    /// refused in the same words as a link to no version at all: no answer tells a device
    /// whether a uuid exists outside its patient's data.
    static func checkEntities(_ records: [RevisionRecord], patientID: String, in tx: any CarePlanReader) throws -> [UUID: VersionScope] {
        /// Each version sent: its kind, and its place in the push.
        var sent: [UUID: (type: EntityType, position: Int)] = [:]
        var linked: [UUID] = []
        for entity in records.flatMap(\.entities) {
            sent[entity.version.uuid] = (entity.entityType, sent.count)
            linked.append(entity.version.uuid)
            linked += entity.version.previousVersionUUIDs
            if let parent = parentLink(entity) { linked.append(parent.uuid) }
        }
        let stored = try tx.scopes(of: linked)
        /// The kind of a version of this patient's that is stored, or sent before `position`.
        func own(_ uuid: UUID, before position: Int) -> EntityType? {
            if let scope = stored[uuid] { return scope.patientID == patientID ? scope.type : nil }
            guard let sent = sent[uuid], sent.position < position else { return nil }
            return sent.type
        }
        func family(_ type: EntityType) -> EntityType { type == .healthKitTask ? .task : type }
        for (i, record) in records.enumerated() {
            for entity in record.entities {
                func refuse(_ field: String, _ reason: String) -> SyncError { .refused(record: i, entity: name(entity), field: field, reason: reason) }
                let position = sent[entity.version.uuid]!.position
                if let scope = stored[entity.version.uuid], scope.patientID != patientID {
                    throw refuse("uuid", "\(entity.version.uuid.uuidString) is a version outside this patient's data")
                }
                if case .patient = entity, entity.version.id != patientID {
                    throw refuse("id", "a device writes its own patient only (\"\(patientID)\")")
                }
                if case .task(let task) = entity { try checkSchedule(task.schedule, refuse) }
                for previous in entity.version.previousVersionUUIDs {
                    guard let type = own(previous, before: position), family(type) == family(entity.entityType) else {
                        throw refuse("previousVersionUUIDs", "\(previous.uuidString) names no earlier \(entity.entityType.rawValue) version of this patient's that the gateway holds or this request sends")
                    }
                }
                guard let parent = parentLink(entity) else { continue }
                guard let type = stored[parent.uuid] == nil ? sent[parent.uuid]?.type : own(parent.uuid, before: position) else {
                    throw refuse(parent.field, "\(parent.uuid.uuidString) names no version of this patient's that the gateway holds or this request sends")
                }
                guard parent.types.contains(type) else { throw refuse(parent.field, "\(parent.uuid.uuidString) is a \(type.rawValue), not a \(parent.types[0].rawValue)") }
            }
        }
        return stored
    }

    /// A device's task schedule within `SyncBounds`: a page, report or sync of the patient
    /// computes its events, so their number a day is bounded.
    static func checkSchedule(_ schedule: Schedule, _ refuse: (String, String) -> SyncError) throws {
        guard schedule.elements.count <= SyncBounds.scheduleElements else {
            throw refuse("schedule", "has \(schedule.elements.count) elements; a task has at most \(SyncBounds.scheduleElements)")
        }
        let perDay = schedule.elements.reduce(0) { $0 &+ min($1.maximumOccurrencesPerDay, Int(Int32.max)) }
        guard perDay <= SyncBounds.occurrencesPerDay else {
            throw refuse("schedule", "has up to \(perDay) occurrences a day; a task has at most \(SyncBounds.occurrencesPerDay) (one every 15 minutes)")
        }
    }

    /// The version an entity links to as its parent, the field, and the kinds it may be.
    static func parentLink(_ entity: CareEntity) -> (field: String, uuid: UUID, types: [EntityType])? {
        switch entity {
        case .patient: nil
        case .carePlan(let plan): plan.patientUUID.map { ("patientUUID", $0, [.patient]) }
        case .contact(let contact): contact.carePlanUUID.map { ("carePlanUUID", $0, [.carePlan]) }
        case .task(let task): task.carePlanUUID.map { ("carePlanUUID", $0, [.carePlan]) }
        case .outcome(let outcome): ("taskUUID", outcome.taskUUID, [.task, .healthKitTask])
        }
    }
}

/// What one device may cost the gateway: the sizes a push is held to, so that no device can make
/// every later sync, page or report of its patient slow or large (a vector of 20,000 invented
/// processes made each of a patient's syncs take a second; a task every second, a page 13 s).
public enum SyncBounds {
    /// Device processes a patient's knowledge may hold (a CareKit install writes with one: the
    /// patient's devices and reinstalls over years). A device's vector is its patient's knowledge,
    /// so a vector names at most these and the gateway's own.
    public static let processesPerPatient = 256
    /// Elements of a device task's schedule (a week of four doses a day is 28).
    public static let scheduleElements = 64
    /// Occurrences a day of a device task, every element together: one every 15 minutes.
    public static let occurrencesPerDay = 96
}
