import CareStore
import Foundation

/// What the gateway derives from the EHR and a device never sets: where an entity came from
/// (`remoteID`, `source`) and the gateway's own `userInfo` entries (`caregate.*`: the FHIR
/// resource, its hash and version). A device's versions are stored without them, whatever it
/// sends (CareKit copies them into a new version it makes from one it pulled, so they are dropped,
/// not refused); the gateway reads them from the versions it wrote itself
/// (`EntityQuery.gatewayWrittenOnly`). So a device cannot point the EHR export, the refresh or
/// the outbox at another patient's resources.
public enum GatewayOwnedFields {
    /// The `userInfo` keys the gateway owns start with this.
    public static let userInfoPrefix = "caregate."

    /// The version without the fields the gateway owns.
    public static func stripped(_ entity: CareEntity) -> CareEntity {
        var stripped = entity
        stripped.version.remoteID = nil
        stripped.version.source = nil
        if let info = stripped.version.userInfo {
            let kept = info.filter { !$0.key.hasPrefix(userInfoPrefix) }
            stripped.version.userInfo = kept.isEmpty ? nil : kept
        }
        return stripped
    }

    /// A device's stripped record with its outcome versions' `source` naming the device that
    /// pushed them (`Device.versionSource`): what the EHR is told recorded them. Only the gateway
    /// writes it (a device's own `source` is stripped), so a device cannot claim another's.
    static func naming(_ deviceID: String?, in record: RevisionRecord) -> RevisionRecord {
        guard let deviceID else { return record }
        let source = Device.versionSourcePrefix + deviceID
        return RevisionRecord(entities: record.entities.map { entity in
            guard case .outcome(var outcome) = entity else { return entity }
            outcome.version.source = source
            return .outcome(outcome)
        }, knowledgeVector: record.knowledgeVector)
    }

    /// A device's records with every version stripped.
    static func stripped(_ records: [RevisionRecord]) -> [RevisionRecord] {
        records.map { RevisionRecord(entities: $0.entities.map(stripped), knowledgeVector: $0.knowledgeVector) }
    }

    /// By id, the newest version the gateway wrote of each of these ids of these patients: where
    /// what it derived from the EHR is read. Deletions are left out unless `keepingDeleted` (an
    /// ended task's outcomes still name its source).
    static func newestWritten<Entity: VersionedEntity>(ids: [String], patients: [String], keepingDeleted: Bool = false,
                                                       _ fetch: (EntityQuery) throws(StoreError) -> [Entity]) throws(StoreError) -> [String: Entity] {
        var query = EntityQuery(versions: .history, ids: ids, patientIDs: patients)
        query.gatewayWrittenOnly = true
        var newest: [String: Entity] = [:]
        for version in try fetch(query) { newest[version.id] = version }  // a query by id gives each id's versions oldest first
        return keepingDeleted ? newest : newest.filter { !$0.value.isDeleted }
    }
}
