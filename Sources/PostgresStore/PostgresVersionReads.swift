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

extension PostgresCarePlanStore.Transaction {
    /// Versions of one kind matching a query.
    func fetch<Entity>(_ kind: String, _ query: EntityQuery, _ cast: (CareEntity) -> Entity?) throws(StoreError) -> [Entity] {
        try run { try session.fetchScoped(kind: kind, query).compactMap { cast($0.entity) } }
    }

    func fetchPatients(_ query: EntityQuery) throws(StoreError) -> [Patient] {
        try fetch("patient", query) { if case .patient(let e) = $0 { e } else { nil } }
    }

    func fetchCarePlans(_ query: EntityQuery) throws(StoreError) -> [CarePlan] {
        try fetch("carePlan", query) { if case .carePlan(let e) = $0 { e } else { nil } }
    }

    func fetchContacts(_ query: EntityQuery) throws(StoreError) -> [Contact] {
        try fetch("contact", query) { if case .contact(let e) = $0 { e } else { nil } }
    }

    func fetchTasks(_ query: EntityQuery) throws(StoreError) -> [CareTask] {
        try fetch("task", query) { if case .task(let e) = $0 { e } else { nil } }
    }

    func fetchOutcomes(_ query: EntityQuery) throws(StoreError) -> [Outcome] {
        try fetch("outcome", query) { if case .outcome(let e) = $0 { e } else { nil } }
    }

    /// The events of the matching tasks in a range, worked out as on every backend (`EventWindow`).
    func events(from start: Date, to end: Date, tasks: EntityQuery) throws(StoreError) -> [TaskEvent] {
        try run {
            try EventWindow(start: start, end: end, tasks: tasks).events(
                taskVersions: { try session.fetchScoped(kind: "task", $0, includeTombstones: true) },
                outcomes: { try session.fetchScoped(kind: "outcome", $0).map(\.entity) })
        }
    }
}

extension PostgresCarePlanStore.Transaction {
    /// Entities (of one patient, or of none) with more than one current version: what merges of
    /// concurrent edits left for someone to resolve. Every entity's when `entities` is nil.
    func conflicts(among entities: [(type: EntityType, id: String)]?, of patientID: String?) throws(StoreError) -> [(EntityType, String)] {
        try run {
            let rows: [PostgresRow]
            if let entities {
                guard !entities.isEmpty else { return [] }
                let pairs = Set(entities.map { [VersionWriter<PostgresVersionRows>.kind($0.type), $0.id] }).sorted { $0.joined() < $1.joined() }
                rows = try session.query("""
                    SELECT v.kind, v.id FROM unnest(\(pairs.map { $0[0] })::text[], \(pairs.map { $0[1] })::text[]) AS wanted(kind, id)
                    JOIN entity_version v ON v.kind = wanted.kind AND v.id = wanted.id AND v.patient_id IS NOT DISTINCT FROM \(patientID)
                    WHERE v.next_uuids IS NULL GROUP BY v.kind, v.id HAVING count(*) > 1 ORDER BY v.kind COLLATE "C", v.id COLLATE "C"
                    """)
            } else {
                rows = try session.query("""
                    SELECT kind, id FROM entity_version WHERE next_uuids IS NULL GROUP BY kind, id, patient_id HAVING count(*) > 1
                    ORDER BY kind COLLATE "C", id COLLATE "C"
                    """)
            }
            return try rows.map { row in
                let (kind, id) = try row.decode((String, String).self)
                return (EntityType(rawValue: kind) ?? .task, id)
            }
        }
    }

    /// The live outcome of one occurrence of a task version.
    func liveOutcome(taskUUID: UUID, occurrence: Int) throws(StoreError) -> Outcome? {
        try run {
            let query = EntityQuery(versions: .latest, uuids: try session.query("""
                SELECT uuid FROM entity_version
                WHERE kind = 'outcome' AND parent_uuid = \(taskUUID) AND occurrence = \(occurrence) AND next_uuids IS NULL AND deleted_date IS NULL
                """).map { try $0.decode(UUID.self) })
            guard !(query.uuids ?? []).isEmpty else { return nil }
            return try session.fetchScoped(kind: "outcome", query).compactMap { if case .outcome(let o) = $0.entity { o } else { nil } }.first
        }
    }

    /// How many outcomes have a current version (tombstones included), as an export counts them.
    func currentOutcomeCount() throws(StoreError) -> Int {
        try run { try session.query("SELECT count(*) FROM entity_version WHERE kind = 'outcome' AND next_uuids IS NULL").first?.decode(Int.self) ?? 0 }
    }

    /// The scope (kind and patient) of each of these versions the store holds.
    func scopes(of uuids: [UUID]) throws(StoreError) -> [UUID: VersionScope] {
        try run {
            var result: [UUID: VersionScope] = [:]
            for row in try session.query("SELECT uuid, kind, patient_id, json FROM entity_version WHERE uuid = ANY(\(Array(Set(uuids))))") {
                let (uuid, kind, patient, json) = try row.decode((UUID, String, String?, ByteBuffer).self)
                // Only a task's HealthKit link is read from its JSON, in place: nothing is decoded.
                let type: EntityType = kind == "task"
                    ? (json.withUnsafeReadableBytes { CareKitJSON.mentionsHealthKitLinkage($0) } ? .healthKitTask : .task)
                    : EntityType(rawValue: kind) ?? .task
                result[uuid] = VersionScope(type: type, patientID: patient)
            }
            return result
        }
    }

    /// The patient whose data each of these sync processes has written.
    func processOwners(_ processes: [UUID]) throws(StoreError) -> [UUID: String] {
        try run {
            var owners: [UUID: String] = [:]
            for row in try session.query("SELECT process, patient_id FROM sync_process WHERE process = ANY(\(Array(Set(processes))))") {
                let (process, patient) = try row.decode((UUID, String).self)
                owners[process] = patient
            }
            return owners
        }
    }
}

extension PostgresCarePlanStore.Transaction {
    /// The versions written after `revision` (the store's `seq`: PostgreSQL numbers each
    /// patient's versions on its own clock, and the whole store in writing order), in that order.
    func changes(since revision: Int, limit: Int?) throws(StoreError) -> StoreChanges {
        try run {
            let rows = try session.query("""
                SELECT kind, json, next_uuids, seq FROM entity_version WHERE seq > \(revision) ORDER BY seq LIMIT \(limit ?? Int(Int32.max))
                """)
            let entities = try rows.map(PostgresVersionRows.entity)
            let latest = try rows.last.map { try $0.makeRandomAccess()[3].decode(Int.self) } ?? revision
            return StoreChanges(entities: entities, revision: latest)
        }
    }

    /// The store's own sync process, at the newest version written.
    func knowledgeVector() throws(StoreError) -> [RevisionRecord.Process] {
        try run {
            let id = try PostgresVersionRows(session: session).processID()
            let clock = try session.query("SELECT max(seq) FROM entity_version").first?.decode(Int?.self) ?? 0
            return [RevisionRecord.Process(id: id, clock: clock ?? 0)]
        }
    }

    /// Every kind's versions matching `versions`, patients first, outcomes last, in one snapshot.
    func allEntities(versions: VersionFilter) throws(StoreError) -> [CareEntity] {
        try run {
            try ["patient", "carePlan", "contact", "task", "outcome"].flatMap { kind in
                try session.fetchScoped(kind: kind, EntityQuery(versions: versions)).map(\.entity)
            }
        }
    }

    /// The outcomes' current versions in export order (effective date, id, then writing order),
    /// read a thousand at a time in one snapshot, so an export of any size holds one page.
    func forEachCurrentOutcome(_ body: (Outcome) throws -> Void) throws {
        var after: (effective: Double, id: String, seq: Int)?
        while true {
            let rows: [PostgresRow] = if let after {
                try session.query("""
                    SELECT kind, json, next_uuids, effective_date, id, seq FROM entity_version
                    WHERE kind = 'outcome' AND next_uuids IS NULL
                      AND (effective_date, id COLLATE "C", seq) > (\(after.effective), \(after.id) COLLATE "C", \(after.seq))
                    ORDER BY effective_date, id COLLATE "C", seq LIMIT 1000
                    """)
            } else {
                try session.query("""
                    SELECT kind, json, next_uuids, effective_date, id, seq FROM entity_version WHERE kind = 'outcome' AND next_uuids IS NULL
                    ORDER BY effective_date, id COLLATE "C", seq LIMIT 1000
                    """)
            }
            for row in rows {
                if case .outcome(let outcome) = try PostgresVersionRows.entity(row) { try body(outcome) }
            }
            guard rows.count == 1000, let last = rows.last else { return }
            let columns = last.makeRandomAccess()
            after = (try columns[3].decode(Double.self), try columns[4].decode(String.self), try columns[5].decode(Int.self))
        }
    }
}
