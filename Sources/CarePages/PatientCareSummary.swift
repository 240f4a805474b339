import CareCharts
import CareStore
import Foundation
import Mapping

/// What a patient's pages show, read from the store in one snapshot: the patient, their plans
/// and tasks, each day's adherence, and every outcome of the range with its values.
///
/// Adherence is the store's (`Adherence.daily`, CareKit's default aggregator: an event counts as
/// done when its outcome reaches the targets, or has a value when there are none).
///
/// ```swift
/// let summary = try store.read { try PatientCareSummary(patientID: "maria-lopez", range: week, calendar: calendar, in: $0) }
/// summary.days.map(\.adherence.value)   // [0.75, 1, nil, …]
/// ```
public struct PatientCareSummary: Sendable {
    public struct Day: Sendable {
        public var start: Date
        public var adherence: Adherence
    }

    /// One outcome as the report's table lists it.
    public struct RecordedOutcome: Sendable {
        public var event: Date
        public var taskID: String
        public var taskTitle: String
        public var values: [OutcomeValue]
    }

    public var patient: Patient
    public var carePlans: [CarePlan]
    public var tasks: [CareTask]
    public var range: DateInterval
    public var calendar: Calendar
    /// One entry per calendar day of the range.
    public var days: [Day]
    /// Every event of the range (done or not), in event order.
    public var events: [TaskEvent]
    /// The events' outcomes that carry values, in event order.
    public var outcomes: [RecordedOutcome]
    /// Tasks that record numbers (measurements), with their values over the range.
    public var measured: [MeasuredTask]
    /// Survey tasks, with their scores over the range and their latest answers.
    public var surveys: [SurveyHistory]

    public init(patientID: String, range: DateInterval, calendar: Calendar, in store: any CarePlanReader) throws(PageError) {
        try self.init(patient: try Self.patient(patientID, in: store), range: range, calendar: calendar, in: store)
    }

    /// The patient with this id, or `.noSuchPatient`.
    static func patient(_ patientID: String, in store: any CarePlanReader) throws(PageError) -> Patient {
        guard let patient = try PageError.reading({ try store.fetchPatients(EntityQuery(ids: [patientID])) }).first else {
            throw .noSuchPatient(patientID)
        }
        return patient
    }

    /// The summary of a patient already read (the dashboard reads them first for their time zone).
    init(patient: Patient, range: DateInterval, calendar: Calendar, in store: any CarePlanReader) throws(PageError) {
        let patientID = patient.id
        let plans: [CarePlan] = try PageError.reading { try store.fetchCarePlans(EntityQuery(patientIDs: [patientID])) }
        let taskQuery = EntityQuery(patientIDs: [patientID], carePlanIDs: plans.map(\.id))
        let tasks: [CareTask] = plans.isEmpty ? [] : try PageError.reading { try store.fetchTasks(taskQuery) }
        let events: [TaskEvent] = plans.isEmpty ? [] : try PageError.reading { try store.events(from: range.start, to: range.end, tasks: taskQuery) }
        self.patient = patient
        self.carePlans = plans
        self.tasks = tasks
        self.range = range
        self.calendar = calendar
        self.events = events
        self.days = Adherence.daily(events: events, from: range.start, to: range.end, calendar: calendar).map { Day(start: $0.day, adherence: $0.adherence) }
        self.outcomes = events.compactMap { event in
            guard let outcome = event.outcome, !outcome.values.isEmpty else { return nil }
            return RecordedOutcome(event: event.scheduleEvent.start, taskID: event.task.id, taskTitle: event.task.title ?? event.task.id, values: outcome.values)
        }
        // A survey's numbers are its answers and scores, read against its form (`surveys`).
        let surveyTasks = tasks.filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }
        self.measured = Self.measurements(of: tasks.filter { $0.version.userInfo?[SurveyTask.questionnaireKey] == nil }, in: outcomes)
        self.surveys = try SurveyHistory.histories(of: surveyTasks, patientID: patientID, outcomes: outcomes, calendar: calendar, in: store)
    }

    /// The numeric values of each task over the range, per value kind, worked out once: tasks in
    /// plan order, only those whose outcomes carry numbers.
    static func measurements(of tasks: [CareTask], in outcomes: [RecordedOutcome]) -> [MeasuredTask] {
        var byTask: [String: [Measurement]] = [:]
        let tasksByID = Dictionary(tasks.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        for outcome in outcomes {
            for value in outcome.values {
                guard let number = value.value.numericValue else { continue }
                let kind = tasksByID[outcome.taskID].map { seriesName(of: value, task: $0) } ?? value.kind ?? outcome.taskTitle
                var series = byTask[outcome.taskID, default: []]
                if let i = series.firstIndex(where: { $0.kind == kind }) {
                    series[i].values.append((outcome.event, number))
                } else {
                    series.append(Measurement(kind: kind, units: value.units, values: [(outcome.event, number)]))
                }
                byTask[outcome.taskID] = series
            }
        }
        return tasks.compactMap { task in
            byTask[task.id].map { series in
                MeasuredTask(task: task, series: series.map { m in
                    var m = m
                    m.target = target(of: task, kind: m.kind)
                    return m
                })
            }
        }
    }

    /// The name a value's series goes by: its kind, or the task's title when it has none or its
    /// kind is the task's own code (a weight task's `29463-7` reads as "Weight check").
    static func seriesName(of value: OutcomeValue, task: CareTask) -> String {
        guard let kind = value.kind, kind != task.groupIdentifier else { return task.title ?? task.id }
        return kind
    }

    /// Where a task's values of `kind` should be: its schedule's numeric target values of that
    /// series (see `seriesName`), lowest to highest.
    static func target(of task: CareTask, kind: String) -> ClosedRange<Double>? {
        let targets = task.schedule.elements.flatMap(\.targetValues).filter { seriesName(of: $0, task: task) == kind }.compactMap(\.value.numericValue)
        guard let low = targets.min(), let high = targets.max() else { return nil }
        return low...high
    }
}

extension PatientCareSummary {
    /// One kind of value a task records (`systolic`; the task's title when values have no kind).
    public struct Measurement: Sendable {
        public var kind: String
        public var units: String?
        public var values: [(date: Date, value: Double)]
        /// The task's target range for this kind, from its schedule's target values.
        public var target: ClosedRange<Double>?
        /// How a survey's score reads (its form's bands), lowest first.
        public var bands: [CartesianChart.Band] = []
    }

    /// A task whose outcomes carry numbers, and its series.
    public struct MeasuredTask: Sendable {
        public var task: CareTask
        public var series: [Measurement]
    }
}

/// Why a page cannot be made.
public enum PageError: Error, Sendable, CustomStringConvertible {
    case noSuchPatient(String)
    case store(StoreError)

    public var description: String {
        switch self {
        case .noSuchPatient(let id): "no patient \(id) in the store"
        case .store(let error): "\(error)"
        }
    }

    /// Runs a store read, its error as a page's. (The body's errors are untyped: closures do not
    /// infer typed throws; the store's are all `StoreError`.)
    static func reading<T>(_ body: () throws -> T) throws(PageError) -> T {
        do { return try body() } catch let error as StoreError { throw .store(error) } catch {
            throw .store(.database(path: "", message: "\(error)"))
        }
    }
}
