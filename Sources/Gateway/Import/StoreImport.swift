import CareStore
import Foundation
import Mapping

/// What an import did (or, in a dry run, would do) to one store entry.
public struct ImportChange: Sendable, Hashable, CustomStringConvertible {
    /// Created, updated, left unchanged, ended, or deleted (tombstoned).
    public enum Action: String, Sendable {
        /// A new entry.
        case create
        /// A new version of an entry.
        case update
        /// Left as it was.
        case unchanged
        /// Ended: a version whose schedule stops.
        case end
        /// Deleted: a tombstone.
        case delete
    }
    /// What was done.
    public var action: Action
    /// The kind of entry.
    public var type: EntityType
    /// The entry's id.
    public var id: String
    /// Why, or what changed, when there is more to say.
    public var detail: String?

    public var description: String { "\(action.rawValue) \(type.rawValue) \(id)\(detail.map { " (\($0))" } ?? "")" }
}

/// One patient's part of an import: written in one transaction, or not at all.
public struct PatientImport: Sendable {
    /// The patient, by the store's id.
    public var patientID: String
    /// What the import did to the patient's entries.
    public var changes: [ImportChange] = []
    /// Why the patient's transaction was refused (nothing of it was written).
    public var failure: String?
}

/// Writes mapped batches into the care store, one transaction per patient, versioned as CareKit
/// does: new entries are added; changed ones get a new version that takes effect after the
/// newest recorded outcome (history is never rewritten); unchanged ones are left alone, so
/// importing the same data twice changes nothing; ended ones get a tombstone. What a patient
/// needs is read, decided and written in one write transaction, so an import racing another
/// writer never plans from a state that has changed under it.
public struct StoreImport: Sendable {
    /// The store written to.
    public let store: any CarePlanStore
    /// The patients' time zone.
    public let timeZone: TimeZone
    /// The import's time: new versions take effect from it (or after the newest outcome).
    public let now: Date

    /// An importer into `store`.
    public init(store: any CarePlanStore, timeZone: TimeZone, now: Date = Date()) {
        self.store = store
        self.timeZone = timeZone
        self.now = now
    }

    /// CareKit's calendar (Gregorian, weeks from Sunday) in the patients' time zone.
    var calendar: Calendar { Schedule.calendar(timeZone) }

    /// Applies one patient's batch (or, with `dryRun`, only works out what would change).
    public func apply(_ batch: PatientBatch, dryRun: Bool, notes: inout [ImportNote]) -> PatientImport {
        var result = PatientImport(patientID: batch.patientID)
        do {
            func plan(_ reader: any CarePlanReader) throws -> Plan {
                var plan = Plan(importer: self, store: reader, batch: batch)
                try plan.build(notes: &notes)
                return plan
            }
            if dryRun {
                result.changes = try store.read { try plan($0).changes }
            } else {
                result.changes = try store.write { tx in try write(batch, in: tx, notes: &notes) }
            }
        } catch {
            result.failure = "\(error)"
            result.changes = []
        }
        return result
    }

    /// Applies several patients' batches in one commit, each patient in a savepoint of its own:
    /// a patient that fails keeps nothing, the others are stored (an import of thousands of small
    /// patients need not wait for the disk after each). Each patient's result with the notes its
    /// plan made, in order; a dry run reads each alone.
    public func apply(_ batches: [PatientBatch], dryRun: Bool) -> [(imported: PatientImport, notes: [ImportNote])] {
        guard !dryRun, batches.count > 1 else {
            return batches.map { batch in
                var notes: [ImportNote] = []
                let imported = apply(batch, dryRun: dryRun, notes: &notes)
                return (imported, notes)
            }
        }
        /// A patient's failure, with the notes its plan made before it.
        struct Failure: Error {
            var cause: any Error
            var notes: [ImportNote]
        }
        let bodies = batches.map { batch in
            { (tx: any CarePlanWriter) throws -> (changes: [ImportChange], notes: [ImportNote]) in
                var notes: [ImportNote] = []
                do {
                    return (try write(batch, in: tx, notes: &notes), notes)
                } catch {
                    throw Failure(cause: error, notes: notes)
                }
            }
        }
        return zip(batches, store.writeGroup(bodies)).map { batch, result in
            var imported = PatientImport(patientID: batch.patientID)
            switch result {
            case .success(let done):
                imported.changes = done.changes
                return (imported, done.notes)
            case .failure(let failure as Failure):
                imported.failure = "\(failure.cause)"
                return (imported, failure.notes)
            case .failure(let error):
                imported.failure = "\(error)"
                return (imported, [])
            }
        }
    }

    /// Plans one patient's batch against what `tx` holds and applies it there; returns the changes.
    func write(_ batch: PatientBatch, in tx: any CarePlanWriter, notes: inout [ImportNote]) throws -> [ImportChange] {
        var plan = Plan(importer: self, store: tx, batch: batch)
        try plan.build(notes: &notes)
        if !plan.operations.isEmpty { try tx.apply(plan.operations, for: batch.patientID) }
        try tx.keep(batch.questionnaires.map { storedQuestionnaire($0, of: batch.patientID) })
        return plan.changes
    }

    /// A survey task's form as the store keeps it, beside the patient's care plan.
    func storedQuestionnaire(_ form: MappedQuestionnaire, of patientID: String) -> StoredQuestionnaire {
        StoredQuestionnaire(patientID: patientID, url: form.canonical.url, version: form.canonical.version, digest: form.digest,
                            title: form.title, resource: form.json, storedAt: now)
    }

    /// The operations for one patient, worked out against what the store holds.
    struct Plan {
        let importer: StoreImport
        /// The transaction the plan reads in (and is then applied in).
        let store: any CarePlanReader
        let batch: PatientBatch
        var operations: [StoreOperation] = []
        var changes: [ImportChange] = []
        /// Store uuids of entries by id, as they will be after this plan.
        var patientUUID: UUID?
        var planUUIDs: [String: UUID] = [:]
        var tasksByID: [String: CareTask] = [:]

        init(importer: StoreImport, store: any CarePlanReader, batch: PatientBatch) {
            self.importer = importer
            self.store = store
            self.batch = batch
        }

        mutating func change(_ action: ImportChange.Action, _ type: EntityType, _ id: String, _ detail: String? = nil) {
            changes.append(ImportChange(action: action, type: type, id: id, detail: detail))
        }

        mutating func build(notes: inout [ImportNote]) throws {
            var adds: [CareEntity] = []
            var updates: [CareEntity] = []
            /// The entry against its current version: created, unchanged, or a new version that
            /// takes effect no earlier than the current one (nor `notBefore`, worked out only
            /// for an update). Returns the version in effect once the plan is applied.
            func reconcile(_ entity: CareEntity, sameAs: (CareEntity) -> Bool = { _ in false }, notBefore: () throws -> Date? = { nil },
                           detail: (Date?) -> String? = { _ in nil }) throws -> CareEntity {
                let type = entity.entityType, id = entity.version.id
                guard let existing = try current(type, id) else {
                    adds.append(entity)
                    change(.create, type, id)
                    return entity
                }
                if Fingerprint.of(existing) == Fingerprint.of(entity) || sameAs(existing) {
                    change(.unchanged, type, id)
                    return existing
                }
                let after = try notBefore()
                var next = entity
                next.version.effectiveDate = [entity.version.effectiveDate, existing.version.effectiveDate, after].compactMap { $0 }.max()!
                updates.append(next)
                change(.update, type, id, detail(after))
                return next
            }
            // The patient.
            patientUUID = try store.fetchPatients(scoped(EntityQuery(ids: [batch.patientID]))).first?.uuid
            if let patient = batch.patient { patientUUID = try reconcile(.patient(patient)).version.uuid }
            // Care plans, and which of them the store held before.
            var heldPlans: Set<String> = []
            for mapped in batch.carePlans {
                var plan = mapped.plan
                plan.patientUUID = patientUUID
                planUUIDs[plan.id] = try reconcile(.carePlan(plan)).version.uuid
                if changes.last?.action != .create { heldPlans.insert(plan.id) }
            }
            // Tasks: a changed task takes effect after its newest recorded outcome, never rewriting history.
            for mapped in batch.tasks {
                var task = mapped.task
                guard let planUUID = try planUUID(mapped.carePlanID) else {
                    notes.append(ImportNote(kind: .error, resource: mapped.source.reference, path: nil, origin: mapped.source.origin,
                                            message: "task \(task.id): its care plan \(mapped.carePlanID) is neither imported nor in the store"))
                    continue
                }
                task.carePlanUUID = planUUID
                let calendar = importer.calendar
                // An activity new to a plan the store held (the plan's own resource gave it)
                // starts when it appears, not at the plan's start (decades of missed days for a
                // task that did not exist), unless its own timing says where it starts.
                if mapped.startsAtAnchor, mapped.source.reference.hasPrefix("CarePlan/"), heldPlans.contains(mapped.carePlanID),
                   try current(.task, task.id) == nil {
                    task.version.effectiveDate = max(task.version.effectiveDate, calendar.startOfDay(for: importer.now))
                }
                let placed = try reconcile(.task(task), sameAs: { existing in
                    if case .task(let old) = existing { Fingerprint.sameTask(old, task, calendar: calendar) } else { false }
                }, notBefore: { try dayAfterLatestOutcome(task.id) }, detail: { after in
                    after.map { "from \(ISO8601DateFormatter().string(from: $0)), after the recorded outcomes" }
                })
                if case .task(let t) = placed { tasksByID[task.id] = t }
            }
            // Contacts.
            for mapped in batch.contacts {
                var contact = mapped.contact
                if let planID = mapped.carePlanID { contact.carePlanUUID = try planUUID(planID) }
                _ = try reconcile(.contact(contact))
            }
            // Outcomes: matched to a task of this patient by code, and to the nearest occurrence.
            var outcomeAdds: [CareEntity] = []
            var taken: Set<String> = []
            // One query for the outcomes already imported, one for the patient's stored tasks.
            let known = batch.outcomes.isEmpty ? [] : Set(try store.fetchOutcomes(scoped(EntityQuery(ids: batch.outcomes.map(\.source.reference)))).map(\.id))
            if !batch.outcomes.isEmpty { try loadStoredTasks() }
            // This import's tasks by group, the first by id of each: looked up for every outcome.
            var importedByGroup: [String: CareTask] = [:]
            for task in tasksByID.values.sorted(by: { $0.id < $1.id }) {
                if let group = task.version.groupIdentifier, importedByGroup[group] == nil { importedByGroup[group] = task }
            }
            for var mapped in batch.outcomes {
                let id = mapped.source.reference
                if known.contains(id) {
                    change(.unchanged, .outcome, id)
                    continue
                }
                guard let task = taskRecording(mapped.taskGroups, imported: importedByGroup) else {
                    notes.append(ImportNote(kind: .skipped, resource: id, path: nil, origin: mapped.source.origin,
                                            message: "no task of this patient records \(mapped.taskGroups.joined(separator: " or ")); the result is not imported"))
                    continue
                }
                // Its date and values are worked out now that it has a task (see `MappingEngine.defersUnrecordedOutcomes`).
                if !mapped.isComplete {
                    let (complete, completionNotes) = mapped.completed()
                    notes += completionNotes
                    guard let complete else { continue }
                    mapped = complete
                }
                guard let event = nearestEvent(task, to: mapped.date) else {
                    notes.append(ImportNote(kind: .skipped, resource: id, path: nil, origin: mapped.source.origin,
                                            message: "task \(task.id) has no occurrence within a day of \(ISO8601DateFormatter().string(from: mapped.date))"))
                    continue
                }
                let key = "\(task.uuid)#\(event.occurrence)"
                let recorded = try store.fetchOutcomes(scoped(EntityQuery(versions: .inEffect(DateInterval(start: event.start, end: event.start.addingTimeInterval(1))), taskIDs: [task.id])))
                    .contains { $0.taskOccurrenceIndex == event.occurrence }
                if taken.contains(key) || recorded {
                    notes.append(ImportNote(kind: .skipped, resource: id, path: nil, origin: mapped.source.origin,
                                            message: "task \(task.id) occurrence \(event.occurrence) already has an outcome"))
                    continue
                }
                taken.insert(key)
                var outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: event.occurrence, values: mapped.values,
                                      effectiveDate: max(event.start, task.effectiveDate), id: id, timezone: importer.timeZone)
                outcome.version.remoteID = mapped.source.reference
                outcome.version.userInfo = mapped.recorded().userInfo
                outcome.version.source = VersionInfo.importedFromEHR
                outcomeAdds.append(.outcome(outcome))
                change(.create, .outcome, id, "task \(task.id) occurrence \(event.occurrence)")
            }
            // Parents first: a new contact or task may belong to a plan version this import makes
            // (an updated plan), and an updated task to a new plan.
            for level in [[EntityType.patient], [.carePlan], [.task, .healthKitTask, .contact]] {
                let added = adds.filter { level.contains($0.entityType) }, updated = updates.filter { level.contains($0.entityType) }
                if !added.isEmpty { operations.append(.add(added)) }
                if !updated.isEmpty { operations.append(.update(updated)) }
            }
            if !outcomeAdds.isEmpty { operations.append(.add(outcomeAdds)) }
            // Ends: tombstones after the newest recorded outcome.
            for end in batch.ends {
                guard try current(end.type, end.id) != nil else { continue }
                var date = importer.now
                if end.type == .task || end.type == .healthKitTask, let after = try dayAfterLatestOutcome(end.id) { date = max(date, after) }
                operations.append(.delete(end.type, ids: [end.id], at: date))
                change(end.delete ? .delete : .end, end.type, end.id, end.reason)
            }
        }

        /// A query of this patient's entries only: ids are unique within a patient.
        func scoped(_ query: EntityQuery) -> EntityQuery {
            var query = query
            query.patientIDs = [batch.patientID]
            return query
        }

        /// This patient's current version of an entry in the store, by type and id.
        func current(_ type: EntityType, _ id: String) throws -> CareEntity? {
            let query = scoped(EntityQuery(ids: [id]))
            return switch type {
            case .patient: try store.fetchPatients(query).first.map(CareEntity.patient)
            case .carePlan: try store.fetchCarePlans(query).first.map(CareEntity.carePlan)
            case .contact: try store.fetchContacts(query).first.map(CareEntity.contact)
            case .task, .healthKitTask: try store.fetchTasks(query).first.map(CareEntity.task)
            case .outcome: try store.fetchOutcomes(query).first.map(CareEntity.outcome)
            }
        }

        /// The uuid of a care plan version tasks can point to: imported now or in the store.
        func planUUID(_ id: String) throws -> UUID? {
            if let uuid = planUUIDs[id] { return uuid }
            return try store.fetchCarePlans(scoped(EntityQuery(ids: [id]))).first?.uuid
        }

        /// The start of the day after the task's newest live outcome, when it has any.
        func dayAfterLatestOutcome(_ taskID: String) throws -> Date? {
            let outcomes = try store.fetchOutcomes(scoped(EntityQuery(taskIDs: [taskID])))
            guard !outcomes.isEmpty else { return nil }
            var latest: Date?
            for outcome in outcomes {
                guard let task = try store.fetchTasks(EntityQuery(versions: .history, uuids: [outcome.taskUUID])).first,
                      let event = task.schedule.event(occurrence: outcome.taskOccurrenceIndex) else { continue }
                latest = max(latest ?? event.start, event.start)
            }
            guard let latest else { return nil }
            return importer.calendar.date(byAdding: .day, value: 1, to: importer.calendar.startOfDay(for: latest))
        }

        /// This patient's stored tasks by group, loaded once per batch.
        var storedByGroup: [String: CareTask] = [:]

        mutating func loadStoredTasks() throws {
            let plans = try store.fetchCarePlans(scoped(EntityQuery())).map(\.id)
            guard !plans.isEmpty else { return }
            for task in try store.fetchTasks(scoped(EntityQuery(carePlanIDs: plans))).sorted(by: { $0.id > $1.id }) {
                if let group = task.version.groupIdentifier { storedByGroup[group] = task }
            }
        }

        /// This patient's task whose group is one of `groups`: of those imported now, the first
        /// by id; else one in the store.
        func taskRecording(_ groups: [String], imported: [String: CareTask]) -> CareTask? {
            if let found = groups.compactMap({ imported[$0] }).min(by: { $0.id < $1.id }) { return found }
            return groups.lazy.compactMap { storedByGroup[$0] }.first
        }

        /// The occurrence whose window holds `date`, else the nearest start within a day.
        func nearestEvent(_ task: CareTask, to date: Date) -> ScheduleEvent? {
            let events = task.schedule.events(from: date.addingTimeInterval(-86_400), to: date.addingTimeInterval(86_400))
                .filter { $0.start >= task.effectiveDate }
            if let holding = events.first(where: { $0.start <= date && date < $0.end }) { return holding }
            return events.min { abs($0.start.timeIntervalSince(date)) < abs($1.start.timeIntervalSince(date)) }
        }
    }
}

/// Compares entries by what they say, not by version bookkeeping (uuids, dates, the source's hash).
enum Fingerprint {
    static func of(_ entity: CareEntity) -> [UInt8] {
        var version = entity.version
        version.uuid = UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        version.effectiveDate = Date(timeIntervalSinceReferenceDate: 0)
        version.createdDate = nil
        version.updatedDate = nil
        version.previousVersionUUIDs = []
        version.nextVersionUUIDs = []
        version.schemaVersion = nil
        version.userInfo = version.userInfo?.filter { !["caregate.hash", "caregate.versionId", "caregate.source"].contains($0.key) }
        var normalized: CareEntity
        switch entity {
        case .patient(var e): e.version = version; normalized = .patient(e)
        case .carePlan(var e): e.version = version; e.patientUUID = nil; normalized = .carePlan(e)
        case .contact(var e): e.version = version; e.carePlanUUID = nil; normalized = .contact(e)
        case .task(var e): e.version = version; e.carePlanUUID = nil; normalized = .task(e)
        case .outcome(var e): e.version = version; normalized = .outcome(e)
        }
        return CareKitJSON.bytes(normalized)
    }

    /// The same task apart from where its schedule starts: each new element starts at an
    /// occurrence of the old one (a schedule anchored at the import time moves with each import).
    static func sameTask(_ old: CareTask, _ new: CareTask, calendar: Calendar) -> Bool {
        guard old.schedule.elements.count == new.schedule.elements.count else { return false }
        var a = old, b = new
        for (i, (x, y)) in zip(old.schedule.elements, new.schedule.elements).enumerated() {
            guard x.interval == y.interval, x.duration == y.duration, x.text == y.text, x.end == y.end, x.targetValues.map(\.value) == y.targetValues.map(\.value),
                  y.start >= x.start, let single = try? Schedule(elements: [x]) else { return false }
            let onSeries = single.events(from: y.start.addingTimeInterval(-86_400), to: y.start.addingTimeInterval(86_400)).contains {
                if case .allDay = x.duration { return calendar.isDate($0.start, inSameDayAs: y.start) }
                return $0.start == y.start
            }
            guard onSeries else { return false }
            _ = i
        }
        a.schedule = old.schedule
        b.schedule = old.schedule
        b.version.effectiveDate = a.version.effectiveDate
        return Fingerprint.of(.task(a)) == Fingerprint.of(.task(b))
    }
}
