import CareStore
import Foundation

/// One row of the dashboard's patient list: the patient's plans and tasks, adherence over the
/// last 7 and 30 days, their devices' last sync, and the last push to the EHR of their outcomes.
public struct PatientOverview: Sendable {
    public var patient: Patient
    public var plans: Int
    public var tasks: Int
    public var last7Days: Adherence
    public var last30Days: Adherence
    public var devices: Int
    public var lastSync: Date?
    /// The latest delivery to the EHR of an outcome of the last 30 days (`withLastPushes`).
    public var lastPush: Date?
    /// The outcomes of the last 30 days (by `Outcome.scopedID`, as the outbox names them), whose
    /// pushes `withLastPushes` looks up.
    var recentOutcomeIDs: [String] = []

    /// One page of the list by name, `size` rows (pages count from 1; past the last, the last):
    /// every patient is read for the order, and only the page's plans, tasks and events after.
    public static func page(_ number: Int, size: Int = 50, in store: any CarePlanReader, devices: [Device], now: Date) throws(PageError) -> PatientListPage {
        let patients = try sortedPatients(in: store)
        let pages = max(1, (patients.count + size - 1) / size)
        let number = min(max(number, 1), pages)
        let slice = Array(patients.dropFirst((number - 1) * size).prefix(size))
        return PatientListPage(rows: try rows(of: slice, in: store, devices: devices, now: now), number: number, pages: pages, total: patients.count, size: size)
    }

    static func sortedPatients(in store: any CarePlanReader) throws(PageError) -> [Patient] {
        try PageError.reading { try store.fetchPatients(EntityQuery()) }.sorted { ($0.name.displayName, $0.id) < ($1.name.displayName, $1.id) }
    }

    /// These patients' rows: their plans, tasks and the last 30 days' events, read for them alone.
    static func rows(of patients: [Patient], in store: any CarePlanReader, devices: [Device], now: Date) throws(PageError) -> [PatientOverview] {
        guard !patients.isEmpty else { return [] }
        let scope = EntityQuery(patientIDs: patients.map(\.id))
        let plans = try PageError.reading { try store.fetchCarePlans(scope) }
        let tasks = try PageError.reading { try store.fetchTasks(scope) }
        let events = try PageError.reading { try store.events(from: now.addingTimeInterval(-30 * 86_400), to: now, tasks: scope) }
        let patientOfPlan = Dictionary(plans.map { ($0.uuid, $0.patientUUID) }, uniquingKeysWith: { a, _ in a })
        func patientOf(_ task: CareTask) -> UUID? { task.carePlanUUID.flatMap { patientOfPlan[$0] ?? nil } }
        let eventsByPatient = Dictionary(grouping: events.filter { patientOf($0.task) != nil }) { patientOf($0.task)! }
        let plansByPatient = Dictionary(plans.compactMap { plan in plan.patientUUID.map { ($0, 1) } }, uniquingKeysWith: +)
        let tasksByPatient = Dictionary(tasks.compactMap { task in patientOf(task).map { ($0, 1) } }, uniquingKeysWith: +)
        let devicesByPatient = Dictionary(grouping: devices.filter { $0.revokedAt == nil }, by: \.patientID)
        let weekAgo = now.addingTimeInterval(-7 * 86_400)
        return patients.map { patient in
            let own = eventsByPatient[patient.uuid] ?? []
            let ownDevices = devicesByPatient[patient.id] ?? []
            return PatientOverview(patient: patient, plans: plansByPatient[patient.uuid] ?? 0, tasks: tasksByPatient[patient.uuid] ?? 0,
                                   last7Days: Adherence(events: own.filter { $0.scheduleEvent.start >= weekAgo }),
                                   last30Days: Adherence(events: own), devices: ownDevices.count,
                                   lastSync: ownDevices.compactMap(\.lastSyncAt).max(),
                                   recentOutcomeIDs: own.compactMap { $0.outcome.map { Outcome.scopedID(patientID: patient.id, outcomeID: $0.id) } })
        }
    }

    /// The rows with their last push, from one outbox lookup of their outcomes (after the
    /// store read the rows came from: reads do not nest).
    public static func withLastPushes(_ rows: [PatientOverview], from outbox: any Outbox) throws(PageError) -> [PatientOverview] {
        let ids = rows.flatMap(\.recentOutcomeIDs)
        let pushed = ids.isEmpty ? [:] : try PageError.reading { try outbox.lastPushed(entityIDs: ids) }
        return rows.map { row in
            var row = row
            row.lastPush = row.recentOutcomeIDs.compactMap { pushed[$0] }.max()
            return row
        }
    }
}

/// One page of the patient list: its rows, which page of how many, and how many patients in all.
public struct PatientListPage: Sendable {
    public var rows: [PatientOverview]
    public var number: Int
    public var pages: Int
    public var total: Int
    public var size: Int
}

/// What a patient's dashboard page shows: the last 30 days' summary (charts and outcomes),
/// today's events as the CareKit app lists them, this week's rings, contacts, every version of
/// each task, and the patient's devices.
public struct PatientDashboard: Sendable {
    public var summary: PatientCareSummary
    public var today: [TaskEvent]
    /// The calendar week around today, one adherence per day.
    public var week: [(day: Date, adherence: Adherence)]
    public var now: Date
    public var contacts: [Contact]
    /// Every version of the patient's tasks, by task id, newest first.
    public var taskVersions: [CareTask]
    public var devices: [Device]
    /// The latest accesses to this patient's data, oldest first (set by whoever reads the trail).
    public var accesses: [ChainedAuditEntry] = []
    /// `calendar` in the patient's own time zone: their days and clock times, wherever the gateway runs.
    public var calendar: Calendar

    public init(patientID: String, now: Date, calendar: Calendar, devices: [Device], in store: any CarePlanReader) throws(PageError) {
        let patient = try PatientCareSummary.patient(patientID, in: store)
        var calendar = calendar
        calendar.timeZone = patient.timezone
        self.calendar = calendar
        let tomorrow = calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: now))!
        let range = DateInterval(start: calendar.date(byAdding: .day, value: -30, to: tomorrow)!, end: tomorrow)
        summary = try PatientCareSummary(patient: patient, range: range, calendar: calendar, in: store)
        self.now = now
        self.devices = devices.filter { $0.patientID == patientID }
        let planIDs = summary.carePlans.map(\.id)
        let tasks = EntityQuery(patientIDs: [patientID], carePlanIDs: planIDs)
        let week = calendar.dateInterval(of: .weekOfYear, for: now) ?? DateInterval(start: range.start, end: tomorrow)
        // The summary holds the week up to today; only the days after today are read (events
        // overlap a range: those begun by tomorrow are the summary's).
        let laterThisWeek: [TaskEvent] = planIDs.isEmpty || week.end <= tomorrow ? []
            : try PageError.reading { try store.events(from: tomorrow, to: week.end, tasks: tasks) }.filter { $0.scheduleEvent.start >= tomorrow }
        let weekEvents = summary.events.filter { $0.scheduleEvent.start >= week.start && $0.scheduleEvent.start < week.end } + laterThisWeek
        self.week = Adherence.daily(events: weekEvents, from: week.start, to: week.end, calendar: calendar)
        let todayStart = calendar.startOfDay(for: now)
        today = weekEvents.filter { $0.scheduleEvent.start >= todayStart && $0.scheduleEvent.start < tomorrow }
            .sorted { ($0.scheduleEvent.start, $0.task.id) < ($1.scheduleEvent.start, $1.task.id) }
        contacts = planIDs.isEmpty ? [] : try PageError.reading { try store.fetchContacts(tasks) }
        let ids = summary.tasks.map(\.id)
        taskVersions = ids.isEmpty ? [] : try PageError.reading { try store.fetchTasks(EntityQuery(versions: .history, ids: ids, patientIDs: [patientID])) }
            .sorted { $0.id != $1.id ? $0.id < $1.id : $0.effectiveDate > $1.effectiveDate }
    }
}

/// What the outbox page shows: counts, dead letters, the queue's head and the latest pushes,
/// each with the patient and task its outcome belongs to.
public struct OutboxOverview: Sendable {
    public var counts: OutboxCounts
    public var failed: [OutboxItem]
    public var queued: [OutboxItem]
    public var pushed: [OutboxItem]
    /// By outcome version: its patient (id and name) and task title (`naming(in:)`).
    public var owners: [UUID: (patientID: String, patient: String, task: String)] = [:]

    /// At most `limit` items of each state.
    public init(_ outbox: any Outbox, limit: Int = 100) throws(PageError) {
        counts = try PageError.reading { try outbox.outboxCounts() }
        failed = try PageError.reading { try outbox.latestOutbox(state: .failed, limit: limit) }
        queued = try PageError.reading { try outbox.outbox(state: .queued, limit: limit) }
        pushed = try PageError.reading { try outbox.latestOutbox(state: .pushed, limit: limit) }
    }

    /// Finds each item's outcome version, its task, plan and patient (in a store read of its
    /// own: the outbox's reads are done by then).
    public mutating func naming(in store: any CarePlanReader) throws(PageError) {
        owners = try Self.owners(of: (failed + queued + pushed).map(\.versionUUID), in: store)
    }

    /// Each outcome version's patient (id and name) and task title: what a page names an outbox
    /// item by, and whose data an operator's retry touches.
    public static func owners(of versions: [UUID], in store: any CarePlanReader) throws(PageError) -> [UUID: (patientID: String, patient: String, task: String)] {
        guard !versions.isEmpty else { return [:] }
        let outcomes = try PageError.reading { try store.fetchOutcomes(EntityQuery(versions: .history, uuids: versions)) }
        let tasks = try PageError.reading { try store.fetchTasks(EntityQuery(versions: .history, uuids: Array(Set(outcomes.map(\.taskUUID))))) }
        let taskByUUID = Dictionary(tasks.map { ($0.uuid, $0) }, uniquingKeysWith: { a, _ in a })
        let plans = try PageError.reading { try store.fetchCarePlans(EntityQuery(versions: .history, uuids: Array(Set(tasks.compactMap(\.carePlanUUID))))) }
        let patientOfPlan = Dictionary(plans.map { ($0.uuid, $0.patientUUID) }, uniquingKeysWith: { a, _ in a })
        let patients = try PageError.reading { try store.fetchPatients(EntityQuery(versions: .history, uuids: Array(Set(plans.compactMap(\.patientUUID))))) }
        let patientByUUID = Dictionary(patients.map { ($0.uuid, $0) }, uniquingKeysWith: { a, _ in a })
        var owners: [UUID: (patientID: String, patient: String, task: String)] = [:]
        for outcome in outcomes {
            guard let task = taskByUUID[outcome.taskUUID], let plan = task.carePlanUUID, let patientUUID = patientOfPlan[plan] ?? nil,
                  let patient = patientByUUID[patientUUID] else { continue }
            owners[outcome.uuid] = (patient.id, patient.name.displayName, task.title ?? task.id)
        }
        return owners
    }
}
