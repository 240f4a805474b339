import Foundation

/// One occurrence of a task version, with the outcome recorded for it, if any (CareKit's `OCKEvent`).
public struct TaskEvent: Sendable, Hashable {
    /// The task version the occurrence belongs to.
    public var task: CareTask
    public var scheduleEvent: ScheduleEvent
    public var outcome: Outcome?

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
        let ordered = versions.sorted { $0.effectiveDate < $1.effectiveDate }
        var outcomeByKey: [String: Outcome] = [:]
        for outcome in outcomes where !outcome.isDeleted {
            outcomeByKey["\(outcome.taskUUID.uuidString)#\(outcome.taskOccurrenceIndex)"] = outcome
        }
        var result: [TaskEvent] = []
        for (i, version) in ordered.enumerated() where !version.isDeleted {
            let validFrom = version.effectiveDate
            let validUntil = i + 1 < ordered.count ? ordered[i + 1].effectiveDate : Date.distantFuture
            guard validFrom < end, validUntil > start else { continue }
            for event in version.schedule.events(from: start, to: end) where event.start >= validFrom && event.start < validUntil {
                result.append(TaskEvent(task: version, scheduleEvent: event,
                                        outcome: outcomeByKey["\(version.uuid.uuidString)#\(event.occurrence)"]))
            }
        }
        return result
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
