import Foundation

/// One occurrence of a task version, with the outcome recorded for it, if any (CareKit's `OCKEvent`).
public struct TaskEvent: Sendable, Hashable {
    /// The task version, shared by all its events (an event copy is a retain, not a task copy).
    private let taskBox: Shared<CareTask>
    /// The task version the occurrence belongs to.
    public var task: CareTask { taskBox.value }
    /// When the occurrence is due.
    public var scheduleEvent: ScheduleEvent
    /// What the patient recorded for it, if anything.
    public var outcome: Outcome?

    /// An event of `task`.
    public init(task: CareTask, scheduleEvent: ScheduleEvent, outcome: Outcome?) {
        self.init(taskBox: Shared(task), scheduleEvent: scheduleEvent, outcome: outcome)
    }

    init(taskBox: Shared<CareTask>, scheduleEvent: ScheduleEvent, outcome: Outcome?) {
        self.taskBox = taskBox
        self.scheduleEvent = scheduleEvent
        self.outcome = outcome
    }

    public static func == (a: TaskEvent, b: TaskEvent) -> Bool {
        a.task == b.task && a.scheduleEvent == b.scheduleEvent && a.outcome == b.outcome
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(task.uuid)
        hasher.combine(scheduleEvent)
    }

    /// The occurrence number within the task version's schedule.
    public var occurrence: Int { scheduleEvent.occurrence }
}

extension CareTask {
    /// The events of a task's versions in a range. Each version numbers occurrences from its own
    /// schedule's start and keeps those whose window starts in
    /// `[effectiveDate, next version's effectiveDate)`; a deleted version ends the task.
    /// `versions` are the versions of one task (any order); `outcomes` are matched by task
    /// version uuid and occurrence.
    public static func events(of versions: [CareTask], from start: Date, to end: Date, outcomes: [Outcome] = []) -> [TaskEvent] {
        let index = OutcomeIndex(outcomes)
        var result: [TaskEvent] = []
        appendEvents(of: versions.sorted { $0.effectiveDate < $1.effectiveDate }, from: start, to: end, outcomes: index, into: &result)
        return result
    }

    /// Appends the events of one task's versions (sorted by effective date) to `result`.
    static func appendEvents(of ordered: some RandomAccessCollection<CareTask>, from start: Date, to end: Date,
                             outcomes: OutcomeIndex, into result: inout [TaskEvent]) {
        var i = ordered.startIndex
        while i != ordered.endIndex {
            let version = ordered[i]
            let next = ordered.index(after: i)
            defer { i = next }
            if version.isDeleted { continue }
            let validFrom = version.effectiveDate
            let validUntil = next != ordered.endIndex ? ordered[next].effectiveDate : Date.distantFuture
            guard validFrom < end, validUntil > start else { continue }
            let box = Shared(version)
            for event in version.schedule.events(from: start, to: end) where event.start >= validFrom && event.start < validUntil {
                result.append(TaskEvent(taskBox: box, scheduleEvent: event, outcome: outcomes[version.uuid, event.occurrence]))
            }
        }
    }
}

/// An immutable value shared by reference, so that copies of what holds it stay cheap.
final class Shared<Value: Sendable>: Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// Outcomes by task version and occurrence (the live ones).
struct OutcomeIndex {
    private var byTask: [UUID: [Int: Outcome]] = [:]

    init(_ outcomes: [Outcome]) {
        for outcome in outcomes where !outcome.isDeleted {
            byTask[outcome.taskUUID, default: [:]][outcome.taskOccurrenceIndex] = outcome
        }
    }

    subscript(task: UUID, occurrence: Int) -> Outcome? {
        byTask[task]?[occurrence]
    }
}

/// How an event's completion is scored (CareKit's adherence aggregators).
public enum AdherenceAggregator: Sendable {
    /// 1 when an outcome exists, else 0.
    case outcomeExists
    /// 1 when the outcome's values reach every target value (or, with no targets, when an outcome
    /// exists), else 0. CareKit's default.
    case compareTargetValues
    /// The share of target values reached (1 or 0 without targets, by outcome existence).
    case percentOfTargetValuesMet

    /// The completion of one event, from 0 to 1.
    public func completion(of event: TaskEvent) -> Double {
        guard let outcome = event.outcome, !outcome.values.isEmpty || event.scheduleEvent.element.targetValues.isEmpty else { return 0 }
        let targets = event.scheduleEvent.element.targetValues
        if case .outcomeExists = self { return 1 }
        guard !targets.isEmpty else { return 1 }
        let met = targets.enumerated().filter { index, target in
            AdherenceAggregator.value(for: target, at: index, in: outcome.values).map { AdherenceAggregator.reaches($0, target) } ?? false
        }.count
        switch self {
        case .percentOfTargetValuesMet: return Double(met) / Double(targets.count)
        default: return met == targets.count ? 1 : 0
        }
    }

    /// The outcome value answering a target: the one of the same kind, else the one at the same position.
    static func value(for target: OutcomeValue, at index: Int, in values: [OutcomeValue]) -> OutcomeValue? {
        if let kind = target.kind { return values.first { $0.kind == kind } }
        return index < values.count ? values[index] : nil
    }

    /// Whether a value matches or exceeds a target: numbers compare, other types must be equal.
    static func reaches(_ value: OutcomeValue, _ target: OutcomeValue) -> Bool {
        if let v = value.value.numericValue, let t = target.value.numericValue { return v >= t }
        return value.value == target.value
    }
}

/// Adherence over some events: completed over expected.
public struct Adherence: Sendable, Hashable {
    /// The events that count toward adherence.
    public var expected: Int
    /// The summed completion of those events.
    public var completed: Double

    /// Completed over expected, or nil when no events were expected.
    public var value: Double? { expected == 0 ? nil : completed / Double(expected) }

    /// Adherence of events, leaving out tasks whose `impactsAdherence` is false.
    public init(events: [TaskEvent], aggregator: AdherenceAggregator = .compareTargetValues) {
        let counted = events.filter { $0.task.impactsAdherence }
        expected = counted.count
        completed = counted.reduce(0) { $0 + aggregator.completion(of: $1) }
    }

    /// Adherence per local day from `start` to `end` (each event counts on the day its window starts).
    public static func daily(events: [TaskEvent], from start: Date, to end: Date, calendar: Calendar,
                             aggregator: AdherenceAggregator = .compareTargetValues) -> [(day: Date, adherence: Adherence)] {
        var days: [(Date, Adherence)] = []
        var day = calendar.startOfDay(for: start)
        while day < end {
            let next = calendar.date(byAdding: .day, value: 1, to: day)!
            let todays = events.filter { $0.scheduleEvent.start >= day && $0.scheduleEvent.start < next }
            days.append((day, Adherence(events: todays, aggregator: aggregator)))
            day = next
        }
        return days
    }

    /// Adherence per task id over all the events given.
    public static func perTask(events: [TaskEvent], aggregator: AdherenceAggregator = .compareTargetValues) -> [String: Adherence] {
        Dictionary(grouping: events, by: { $0.task.id }).mapValues { Adherence(events: $0, aggregator: aggregator) }
    }
}

/// The events of the tasks a query matches in a range, worked out the same way whatever
/// holds the versions: a backend hands over its task versions (tombstones too) and the outcomes
/// in effect, and the window turns them into events in time order.
public struct EventWindow: Sendable {
    /// The window's start.
    public var start: Date
    /// The window's end (not included).
    public var end: Date
    /// Which tasks.
    public var tasks: EntityQuery

    /// The events of `tasks` from `start` to `end`.
    public init(start: Date, end: Date, tasks: EntityQuery) {
        self.start = start
        self.end = end
        self.tasks = tasks
    }

    /// Events of one patient worked out at once, at most: a page's month of a patient's tasks
    /// is a few thousand (the dashboard's overview reads every patient's, each within this).
    public static let maximumEvents = 1_000_000

    /// The events, from `taskVersions` (versions with their patients, ordered by id, patient,
    /// then effective date, tombstones included) and `outcomes` (the outcomes in effect).
    public func events(taskVersions: (EntityQuery) throws -> [(entity: CareEntity, patientID: String?)],
                       outcomes: (EntityQuery) throws -> [CareEntity]) throws -> [TaskEvent] {
        // Versions whose span touches the range, widened by a day for windows reaching back.
        let widened = DateInterval(start: start.addingTimeInterval(-26 * 3600), end: end)
        var taskQuery = tasks
        taskQuery.versions = .inEffect(widened)
        let scoped = try taskVersions(taskQuery)
        let versions = scoped.compactMap { if case .task(let t) = $0.entity { t } else { nil } }
        let patients = scoped.map(\.patientID)
        try Self.checkEventCount(versions, patients: patients, days: end.timeIntervalSince(start) / 86_400 + 2)
        guard !versions.isEmpty else { return [] }
        var outcomeQuery = EntityQuery(versions: .inEffect(widened))
        outcomeQuery.taskIDs = Array(Set(versions.map(\.id)))
        outcomeQuery.patientIDs = tasks.patientIDs
        let index = OutcomeIndex(try outcomes(outcomeQuery).compactMap { if case .outcome(let o) = $0 { o } else { nil } })
        var events: [TaskEvent] = []
        var runStart = 0
        while runStart < versions.count {
            var runEnd = runStart + 1
            while runEnd < versions.count && versions[runEnd].id == versions[runStart].id && patients[runEnd] == patients[runStart] { runEnd += 1 }
            CareTask.appendEvents(of: versions[runStart..<runEnd], from: start, to: end, outcomes: index, into: &events)
            runStart = runEnd
        }
        // Time order; ties by task id (already the order within each run), then occurrence.
        let order = events.indices.sorted { a, b in
            let (x, y) = (events[a].scheduleEvent.start, events[b].scheduleEvent.start)
            return x != y ? x < y : a < b
        }
        return order.map { events[$0] }
    }

    /// Refuses a range in which one patient's tasks could give more than `maximumEvents` events
    /// (each version's elements at their most a day, over the range's days), before any is
    /// worked out: a task every second over years is a clear error, not an allocation failure.
    static func checkEventCount(_ versions: [CareTask], patients: [String?], days: Double) throws {
        var perDay: [String?: Double] = [:]
        for (version, patient) in zip(versions, patients) {
            for element in version.schedule.elements { perDay[patient, default: 0] += Double(min(element.maximumOccurrencesPerDay, maximumEvents)) }
        }
        guard let most = perDay.values.max() else { return }
        let estimated = most * max(days, 1)
        if estimated > Double(maximumEvents) {
            throw StoreError.tooManyEvents(estimated: estimated >= Double(Int.max) ? Int.max : Int(estimated), limit: maximumEvents)
        }
    }
}
