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

    /// Every version sent and every version linked to is the patient's; returns the stored ones' scopes.
    static func checkEntities(_ records: [RevisionRecord], patientID: String, in tx: any CarePlanReader) throws -> [UUID: VersionScope] {
        var sent: [UUID: EntityType] = [:]
        var linked: [UUID] = []
        for record in records {
            for entity in record.entities {
                sent[entity.version.uuid] = entity.entityType
                linked.append(entity.version.uuid)
                linked += entity.version.previousVersionUUIDs
                if let parent = parentLink(entity) { linked.append(parent.uuid) }
            }
        }
        let stored = try tx.scopes(of: linked)
        for (i, record) in records.enumerated() {
            for entity in record.entities {
                let name = "\(entity.entityType.rawValue) \"\(entity.version.id)\""
                func refuse(_ field: String, _ reason: String) -> SyncError { .refused(record: i, entity: name, field: field, reason: reason) }
                if let scope = stored[entity.version.uuid], scope.patientID != patientID {
                    throw refuse("uuid", "\(entity.version.uuid.uuidString) is a version outside this patient's data")
                }
                if case .patient = entity, entity.version.id != patientID {
                    throw refuse("id", "a device writes its own patient only (\"\(patientID)\")")
                }
                for previous in entity.version.previousVersionUUIDs {
                    if let scope = stored[previous], scope.patientID != patientID {
                        throw refuse("previousVersionUUIDs", "\(previous.uuidString) is a version outside this patient's data")
                    }
                }
                guard let parent = parentLink(entity) else { continue }
                let type = stored[parent.uuid]?.type ?? sent[parent.uuid]
                guard let type else { throw refuse(parent.field, "\(parent.uuid.uuidString) names no version the gateway holds or this request sends") }
                guard parent.types.contains(type) else { throw refuse(parent.field, "\(parent.uuid.uuidString) is a \(type.rawValue), not a \(parent.types[0].rawValue)") }
                if let scope = stored[parent.uuid], scope.patientID != patientID {
                    throw refuse(parent.field, "\(parent.uuid.uuidString) is a version outside this patient's data")
                }
            }
        }
        return stored
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
