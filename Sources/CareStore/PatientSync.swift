import Foundation
import JSON

/// A patient's versions that a device's knowledge does not cover: what a CareKit pull sends.
public struct PatientVersions: Sendable {
    /// A version's successors as they stood at a pull's revision: those written after it
    /// (`newer`) are left out, so the list as of a revision is the same whenever and wherever it
    /// is worked out (an instance that keeps no list serves the same later pages as the one that
    /// does). Nil when none is left: an outcome superseded later is still current in the list.
    public static func successors(_ next: [UUID]?, notIn newer: Set<UUID>) -> [UUID]? {
        guard let next else { return nil }
        let kept = newer.isEmpty ? next : next.filter { !newer.contains($0) }
        return kept.isEmpty ? nil : kept
    }

    /// In apply order (parents before children). Outcomes are sent only as current versions
    /// (tips or tombstones): a device never receives two live outcomes for one occurrence.
    public var versions: [StoredVersion]
    /// The patient's knowledge as of `revision`: the catch-up vector once everything up to it is sent.
    public var knowledge: KnowledgeVector
    /// The store revision this answer was read up to (a pull's pages all read up to the first's).
    public var revision: Int

    /// An answer read up to `revision`.
    public init(versions: [StoredVersion], knowledge: KnowledgeVector, revision: Int) {
        self.versions = versions
        self.knowledge = knowledge
        self.revision = revision
    }
}

/// Decoding stored versions.
extension Sequence<StoredVersion> {
    /// The versions decoded (tests and tools; pulls send the stored JSON as it is).
    public func entities() throws(CareKitJSONError) -> [CareEntity] {
        try map { v throws(CareKitJSONError) in try v.entity() }
    }
}

/// Where a stored version belongs: its kind and its patient (nil for a version outside every
/// patient's data, such as a task without a care plan imported from a file).
public struct VersionScope: Sendable, Hashable {
    /// The kind of entity.
    public var type: EntityType
    /// The patient whose data it is; nil for data of no patient.
    public var patientID: String?

    /// A scope.
    public init(type: EntityType, patientID: String?) {
        self.type = type
        self.patientID = patientID
    }
}

/// Knowledge is kept per patient. The store's own process (`knowledgeVector()`) stamps the
/// versions the gateway writes with their revision; a patient's knowledge is that process's
/// clock at the patient's newest such version, merged with the stamps of the versions the
/// patient's devices sent. So another patient's activity never moves a patient's vector.
public protocol PatientSyncReader {
    /// The patient's knowledge vector, counting versions up to `revision` (all when nil).
    func patientKnowledge(_ patientID: String, upTo revision: Int?) throws(StoreError) -> KnowledgeVector
    /// The patient's versions not covered by `since`, up to `revision` (the newest when nil).
    func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector, upTo revision: Int?) throws(StoreError) -> PatientVersions
    /// The scope of each of these versions that the store holds.
    func scopes(of uuids: [UUID]) throws(StoreError) -> [UUID: VersionScope]
    /// The patient whose data each of these sync processes has written.
    func processOwners(_ processes: [UUID]) throws(StoreError) -> [UUID: String]
    /// Whether a device is enrolled for the patient and not revoked. A push asks inside its own
    /// write transaction, so a device revoked while its push waited merges nothing.
    func isEnrolled(deviceID: String, patientID: String) throws(StoreError) -> Bool
}

extension PatientSyncReader {
    /// The patient's knowledge vector now.
    public func patientKnowledge(_ patientID: String) throws(StoreError) -> KnowledgeVector { try patientKnowledge(patientID, upTo: nil) }
    /// The patient's versions not covered by `since`, up to the newest.
    public func patientVersions(_ patientID: String, notCoveredBy since: KnowledgeVector) throws(StoreError) -> PatientVersions {
        try patientVersions(patientID, notCoveredBy: since, upTo: nil)
    }
}

/// A store that takes devices' records for one patient at a time.
public protocol PatientSyncWriter: PatientSyncReader {
    /// Stores a device's revision records for its patient: new versions are added as in
    /// `merge`, stamped with their record's vector and scoped to the patient (also those without
    /// a parent), and the vector's processes not yet owned are bound to the patient.
    @discardableResult
    func mergeDeviceRecords(_ records: [RevisionRecord], patientID: String, deviceKnowledge: KnowledgeVector) throws(StoreError) -> Int
}

/// A version as the store keeps it: its CareKit JSON object (v4, successors filled in) and what
/// orders it, read without decoding: a pull sends thousands of versions as they are stored.
public struct StoredVersion: Sendable {
    /// The kind of entity.
    public var type: EntityType
    /// The version's uuid.
    public var uuid: UUID
    /// When the version starts to apply.
    public var effectiveDate: Date
    /// The version's CareKit JSON object, as stored.
    public var json: [UInt8]

    /// A stored version.
    public init(type: EntityType, uuid: UUID, effectiveDate: Date, json: [UInt8]) {
        self.type = type
        self.uuid = uuid
        self.effectiveDate = effectiveDate
        self.json = json
    }

    /// The version decoded.
    public func entity() throws(CareKitJSONError) -> CareEntity {
        let value: JSONValue
        do { value = try JSONValue.parse(json) } catch { throw CareKitJSONError(path: "", message: "\(error)") }
        return try CareKitJSON.decode(type, from: value)
    }
}
