import CareStore
import Foundation
import JSON
import NIOCore
import PostgresNIO

extension PostgresSession {
    /// Versions of one kind matching a query (`VersionSelect`, as SQLite's store reads them),
    /// each with its patient.
    func fetchScoped(kind: String, _ query: EntityQuery, includeTombstones: Bool = false) throws -> [(entity: CareEntity, patientID: String?)] {
        let select = VersionSelect(kind: kind, query, includeTombstones: includeTombstones, withJSON: true, dialect: .postgres)
        var binds = PostgresBindings(capacity: select.arguments.count)
        for value in select.arguments {
            switch value {
            case .text(let text): binds.append(text)
            case .double(let number): binds.append(number)
            case .uuid(let uuid): binds.append(uuid)
            case .texts(let texts): binds.append(texts)
            case .uuids(let uuids): binds.append(uuids)
            }
        }
        return try self.query(PostgresQuery(unsafeSQL: select.sql, binds: binds)).map { row in
            let (_, kind, next, patient, json) = try row.decode((UUID, String, [UUID]?, String?, ByteBuffer).self)
            var entity = try CareKitJSON.decode(storedKind: kind, value: JSONValue.parse(Array(buffer: json)))
            if let next { entity.version.nextVersionUUIDs = next }
            return (entity, patient)
        }
    }
}

extension PostgresCarePlanStore {
    /// Versions of one kind matching a query, in one read-only snapshot.
    func fetch<Entity>(_ kind: String, _ query: EntityQuery, _ cast: (CareEntity) -> Entity?) throws(StoreError) -> [Entity] {
        do {
            return try database.transaction(readOnly: true) { session in try session.fetchScoped(kind: kind, query).compactMap { cast($0.entity) } }
        } catch {
            throw PostgresCarePlanStore.storeError(error, database)
        }
    }

    public func fetchPatients(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Patient] {
        try fetch("patient", query) { if case .patient(let e) = $0 { e } else { nil } }
    }

    public func fetchCarePlans(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [CarePlan] {
        try fetch("carePlan", query) { if case .carePlan(let e) = $0 { e } else { nil } }
    }

    public func fetchContacts(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Contact] {
        try fetch("contact", query) { if case .contact(let e) = $0 { e } else { nil } }
    }

    public func fetchTasks(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [CareTask] {
        try fetch("task", query) { if case .task(let e) = $0 { e } else { nil } }
    }

    public func fetchOutcomes(_ query: EntityQuery = EntityQuery()) throws(StoreError) -> [Outcome] {
        try fetch("outcome", query) { if case .outcome(let e) = $0 { e } else { nil } }
    }
}
