import CareStore
import FHIR
import Foundation

/// Something of a Timing the store cannot hold exactly, and what was done instead.
public struct TimingLoss: Sendable, Hashable, CustomStringConvertible {
    /// Where in the Timing (`repeat.frequencyMax`, `code`, `repeat.when[1]`).
    public var path: String
    /// What was done instead.
    public var message: String

    /// A loss at `path`.
    public init(_ path: String, _ message: String) {
        self.path = path
        self.message = message
    }

    public var description: String { "\(path): \(message)" }
}

/// A Timing as schedule elements, with what could not be kept.
public struct ScheduledTiming: Sendable {
    /// The elements; empty when nothing could be scheduled (see `unschedulable`).
    public var elements: [ScheduleElement]
    /// What could not be kept exactly.
    public var losses: [TimingLoss]
    /// Why the Timing gives no schedule at all (an unknown code, free text), when it does not.
    public var unschedulable: String?

    /// The elements as a schedule (nil when unschedulable).
    public var schedule: Schedule? { elements.isEmpty ? nil : try? Schedule(elements: elements) }
}

/// Turns an R4 Timing into CareKit schedule elements in the patient's time zone.
///
/// - `event[]` become one-off occurrences (a `repeat` beside them is reported, not used);
/// - `repeat` gives repeating elements: one per time of day (`timeOfDay`, or `when` ± `offset`
///   through the site table), one weekly element per `dayOfWeek` and time, an interval of
///   `period`/`frequency` for hours and minutes; with no clock time, `frequency` all-day
///   occurrences per period (the patient does it n times that day, at any time);
/// - `code` (`BID`, `Q4H`...) means the site table's rule;
/// - `bounds` and `count` end the schedule (whichever comes first); FHIR's inclusive period end
///   becomes CareKit's exclusive end.
///
/// Ranges (`frequencyMax`, `periodMax`, `countMax`, `durationMax`, `boundsRange`) keep their
/// minimum; every such approximation is listed in `losses`.
public struct TimingConverter: Sendable {
    /// The site's timing tables.
    public var tables: TimingTables
    /// The patient's time zone.
    public var timeZone: TimeZone
    /// The window of a timed occurrence when the Timing gives no `duration` (CareKit's one hour).
    public var defaultDuration: ScheduleElement.Duration

    /// A converter in `timeZone`.
    public init(tables: TimingTables = .standard, timeZone: TimeZone, defaultDuration: ScheduleElement.Duration = .hour) {
        self.tables = tables
        self.timeZone = timeZone
        self.defaultDuration = defaultDuration
    }

    /// CareKit's calendar (Gregorian, weeks from Sunday) in the patients' time zone.
    var calendar: Calendar { Schedule.calendar(timeZone) }

    /// Converts `timing`; `anchor` is where a rule starts when `boundsPeriod.start` does not say
    /// (the care plan's period start, the prescription's date, or the import time).
    public func convert(_ timing: R4.Timing, anchor: Date, text: String? = nil, targetValues: [OutcomeValue] = []) -> ScheduledTiming {
        var run = Run(converter: self, calendar: calendar, text: text, targetValues: targetValues)
        return run.convert(timing, anchor: anchor)
    }

    /// "As needed": an all-day occurrence every day from `start` (give the task `impactsAdherence: false`).
    public func asNeeded(start: Date, end: Date? = nil, text: String? = "As needed") -> ScheduledTiming {
        let element = ScheduleElement(start: calendar.startOfDay(for: start), end: end, interval: DateComponents(day: 1),
                                      text: text, duration: .allDay, calendar: calendar)
        return ScheduledTiming(elements: [element], losses: [])
    }

    struct Run {
        let converter: TimingConverter
        let calendar: Calendar
        let text: String?
        let targetValues: [OutcomeValue]
        var losses: [TimingLoss] = []

        mutating func loss(_ path: String, _ message: String) { losses.append(TimingLoss(path, message)) }

        mutating func convert(_ timing: R4.Timing, anchor: Date) -> ScheduledTiming {
            let r = timing.repeat
            if let outOfRange = TimingLimits.outOfRange(r) {
                return ScheduledTiming(elements: [], losses: losses, unschedulable: outOfRange)
            }
            let duration = occurrenceDuration(r)
            let (start, boundsEnd) = bounds(r, anchor: anchor)
            var end = boundsEnd

            if !timing.event.isEmpty {
                if r != nil || timing.code != nil {
                    loss(r != nil ? "repeat" : "code", "the Timing lists events; they are its occurrences, and the rule beside them is not used")
                }
                var elements: [ScheduleElement] = []
                for (i, event) in timing.event.enumerated() {
                    let at = event.start(in: converter.timeZone)
                    if elements.contains(where: { $0.start == at }) {
                        loss("event[\(i)]", "the same time as an earlier event; kept once")
                        continue
                    }
                    elements.append(element(at, end: at.addingTimeInterval(1), interval: DateComponents(day: 1), duration: duration ?? converter.defaultDuration))
                }
                return ScheduledTiming(elements: elements.sorted { $0.start < $1.start }, losses: losses)
            }

            let fromCode = timing.repeat.map { r in r.frequency == nil && r.period == nil && r.timeOfDay.isEmpty && r.when.isEmpty && r.dayOfWeek.isEmpty } ?? true
            guard var rule = rule(timing) else {
                let reason: String
                if let code = timing.code {
                    let codes = code.coding.compactMap(\.code)
                    reason = "no schedule for timing code \(codes.isEmpty ? "(none)" : codes.joined(separator: ", "))\(code.text.map { " (\"\($0)\")" } ?? "") in the site table"
                } else {
                    reason = "the Timing has no events, no repeat rule and no code"
                }
                return ScheduledTiming(elements: [], losses: losses, unschedulable: reason)
            }
            // A fractional number of days or weeks: count in hours instead.
            if ["d", "wk"].contains(rule.periodUnit), rule.period != rule.period.rounded(), rule.daysOfWeek.isEmpty {
                rule.period *= rule.periodUnit == "d" ? 24 : 168
                rule.periodUnit = "h"
            }
            if let countMax = r?.countMax {
                if let count = r?.count {
                    loss("repeat.countMax", "\(count) to \(countMax) occurrences; the store stops after \(count)")
                } else {
                    loss("repeat.countMax", "countMax without count (tim-8); ignored")
                }
            }
            var elements = build(rule, start: start, end: end, duration: duration, fromCode: fromCode && timing.code != nil)
            if var count = r?.count, !elements.isEmpty {
                if count > TimingLimits.maximumCount {
                    loss("repeat.count", "\(count) occurrences; the store stops after \(TimingLimits.maximumCount), the most a schedule is expanded to here")
                    count = TimingLimits.maximumCount
                }
                end = countEnd(elements, count: count, end: end)
                elements = elements.map { var e = $0; e.end = end; return e }.filter { end == nil || $0.start < end! }
            }
            return ScheduledTiming(elements: elements, losses: losses)
        }

        func element(_ start: Date, end: Date?, interval: DateComponents, duration: ScheduleElement.Duration) -> ScheduleElement {
            ScheduleElement(start: start, end: end, interval: interval, text: text, duration: duration, targetValues: targetValues, calendar: calendar)
        }

        // MARK: Reading the Timing

        mutating func occurrenceDuration(_ r: R4.Timing.Repeat?) -> ScheduleElement.Duration? {
            guard let r, let value = r.duration else {
                if r?.durationMax != nil { loss("repeat.durationMax", "durationMax without duration (tim-7); ignored") }
                return nil
            }
            guard let unit = r.durationUnit, let seconds = TimingRule.seconds(in: unit) else {
                loss("repeat.duration", "duration without a durationUnit (tim-1); the default window is used")
                return nil
            }
            if value.double < 0 {
                loss("repeat.duration", "negative duration (tim-4); the default window is used")
                return nil
            }
            if let max = r.durationMax {
                loss("repeat.durationMax", "each occurrence lasts \(value) to \(max) \(unit); the store keeps \(value) \(unit)")
            }
            return .seconds(value.double * seconds)
        }

        /// The first instant and the exclusive end from `bounds[x]` (and the anchor).
        mutating func bounds(_ r: R4.Timing.Repeat?, anchor: Date) -> (Date, Date?) {
            guard let r else { return (anchor, nil) }
            if let period = r.boundsPeriod {
                let start = period.start.map { $0.start(in: converter.timeZone) } ?? anchor
                var end: Date?
                if let e = period.end {
                    // FHIR's end is inclusive: the whole last day, or the last instant.
                    let first = e.start(in: converter.timeZone)
                    switch e.precision {
                    case .year: end = calendar.date(byAdding: .year, value: 1, to: first)
                    case .month: end = calendar.date(byAdding: .month, value: 1, to: first)
                    case .day: end = calendar.date(byAdding: .day, value: 1, to: first)
                    case .second: end = first.addingTimeInterval(1)
                    }
                }
                return (start, end)
            }
            if let d = r.boundsDuration {
                return (anchor, add(d, to: anchor, path: "repeat.boundsDuration"))
            }
            if let range = r.boundsRange {
                guard let low = range.low else {
                    loss("repeat.boundsRange", "a range without a low value; the schedule is open-ended")
                    return (anchor, nil)
                }
                let high = range.high.map { " to \($0.value?.description ?? "?") \($0.code ?? $0.unit ?? "")" } ?? ""
                loss("repeat.boundsRange", "the schedule lasts \(low.value?.description ?? "?")\(high) \(low.code ?? low.unit ?? ""); the store keeps the lower bound")
                return (anchor, add(low, to: anchor, path: "repeat.boundsRange.low"))
            }
            return (anchor, nil)
        }

        /// `anchor` plus a time quantity (calendar months and years for `mo` and `a`).
        mutating func add(_ q: R4.Quantity, to anchor: Date, path: String) -> Date? {
            guard let value = q.value?.double, let unit = q.code ?? q.unit else {
                loss(path, "a duration without value or unit; the schedule is open-ended")
                return nil
            }
            switch unit {
            case "mo", "month", "months":
                if value == value.rounded() { return calendar.date(byAdding: .month, value: Int(value), to: anchor) }
            case "a", "year", "years":
                if value == value.rounded() { return calendar.date(byAdding: .year, value: Int(value), to: anchor) }
            case "d", "day", "days":
                if value == value.rounded() { return calendar.date(byAdding: .day, value: Int(value), to: anchor) }
            case "wk", "week", "weeks":
                if value == value.rounded() { return calendar.date(byAdding: .day, value: Int(value) * 7, to: anchor) }
            default: break
            }
            guard let seconds = TimingRule.seconds(in: unit) else {
                loss(path, "unit '\(unit)' is not a time; the schedule is open-ended")
                return nil
            }
            return anchor.addingTimeInterval(value * seconds)
        }

        /// The rule of `repeat`, or of `code` through the site table.
        mutating func rule(_ timing: R4.Timing) -> TimingRule? {
            let codeRule: TimingRule? = timing.code.flatMap { code in
                code.coding.compactMap { $0.code.flatMap { converter.tables.codes[$0] } }.first
                    ?? code.text.flatMap { converter.tables.codes[$0.uppercased()] }
            }
            guard let r = timing.repeat, r.frequency != nil || r.period != nil || !r.timeOfDay.isEmpty || !r.when.isEmpty || !r.dayOfWeek.isEmpty else {
                if let codeRule { return codeRule }
                if timing.code != nil { return nil }
                if timing.repeat != nil {
                    loss("repeat", "bounds, count or duration without frequency or period: once a day, at any time")
                    return TimingRule()
                }
                return nil
            }
            if let code = timing.code, codeRule == nil || (r.timeOfDay.count + r.when.count > 0 && codeRule!.timesOfDay.count != r.timeOfDay.count + r.when.count) {
                // A code that says the same as the rule (BID beside two `when` times) is not a loss.
                loss("code", "the repeat rule is used; the code \(code.coding.compactMap(\.code).joined(separator: ", ")) beside it is not")
            }
            var rule = TimingRule()
            rule.frequency = r.frequency ?? 1
            if let max = r.frequencyMax {
                loss("repeat.frequencyMax", "\(rule.frequency) to \(max) times per period; the store schedules \(rule.frequency)")
            }
            if let period = r.period {
                if period.double <= 0 {
                    loss("repeat.period", "a period of \(period) (tim-5); one \(r.periodUnit ?? "d") is used")
                } else {
                    rule.period = period.double
                }
            }
            if let unit = r.periodUnit {
                if TimingRule.seconds(in: unit) != nil { rule.periodUnit = unit } else { loss("repeat.periodUnit", "unknown unit '\(unit)'; days are used") }
            } else if r.period != nil {
                loss("repeat.period", "a period without periodUnit (tim-2); days are used")
            }
            if let max = r.periodMax {
                loss("repeat.periodMax", "every \(r.period?.description ?? "1") to \(max) \(rule.periodUnit); the store repeats every \(r.period?.description ?? "1") \(rule.periodUnit)")
            }
            for (i, t) in r.timeOfDay.enumerated() {
                if t.second != t.second.rounded(.down) || t.second != 0 {
                    loss("repeat.timeOfDay[\(i)]", "\(t) is kept to the minute")
                }
                rule.timesOfDay.append(t.hour * 60 + t.minute)
            }
            if !r.when.isEmpty {
                if !r.timeOfDay.isEmpty {
                    loss("repeat.when", "timeOfDay and when together (tim-10); the times of day are used")
                } else {
                    for (i, code) in r.when.enumerated() {
                        guard let base = converter.tables.eventTimes[code] else {
                            loss("repeat.when[\(i)]", "no clock time for '\(code)' in the site table; left out")
                            continue
                        }
                        var minutes = base
                        if let offset = r.offset, offset != 0 {
                            if TimingTables.mealCodes.contains(code) {
                                loss("repeat.offset", "an offset with '\(code)' (tim-9); the meal time itself is used")
                            } else {
                                minutes += TimingTables.offsetIsBefore(code) ? -offset : offset
                            }
                        }
                        rule.timesOfDay.append(((minutes % 1440) + 1440) % 1440)
                    }
                }
            } else if let offset = r.offset {
                loss("repeat.offset", "an offset of \(offset) min without when (tim-9); ignored")
            }
            let weekdays = ["sun": 1, "mon": 2, "tue": 3, "wed": 4, "thu": 5, "fri": 6, "sat": 7]
            for (i, day) in r.dayOfWeek.enumerated() {
                if let d = weekdays[day] { rule.daysOfWeek.append(d) } else { loss("repeat.dayOfWeek[\(i)]", "unknown day '\(day)'; left out") }
            }
            rule.timesOfDay = Array(Set(rule.timesOfDay)).sorted()
            rule.daysOfWeek = Array(Set(rule.daysOfWeek)).sorted()
            if !rule.timesOfDay.isEmpty, r.frequency != nil, rule.frequency != rule.timesOfDay.count, rule.daysOfWeek.isEmpty,
               ["d"].contains(rule.periodUnit) {
                loss("repeat.frequency", "\(rule.frequency) per \(rule.periodUnit) but \(rule.timesOfDay.count) times of day; the times of day are used")
            }
            if !rule.daysOfWeek.isEmpty, r.frequency != nil, rule.periodUnit == "wk", rule.frequency != rule.daysOfWeek.count {
                loss("repeat.frequency", "\(rule.frequency) per week but \(rule.daysOfWeek.count) days of week; the days are used")
            }
            return rule
        }

        // MARK: Building elements

        /// The first instant at `minutes` after midnight on or after `start`, on a day `matching`.
        func first(at minutes: Int?, from start: Date, matching weekday: Int? = nil) -> Date {
            var day = calendar.startOfDay(for: start)
            for _ in 0..<400 {
                if weekday == nil || calendar.component(.weekday, from: day) == weekday {
                    let at = minutes.map { calendar.date(bySettingHour: $0 / 60, minute: $0 % 60, second: 0, of: day) ?? day } ?? day
                    // All-day occurrences count from the day the schedule starts.
                    if minutes == nil || at >= start { return at }
                }
                day = calendar.date(byAdding: .day, value: 1, to: day)!
            }
            return start
        }

        /// Elements for `rule`; `fromCode` when the rule is the site table's reading of `Timing.code`
        /// (its choices, such as the weekday of `WK`, are the site's, not approximations).
        mutating func build(_ rule: TimingRule, start: Date, end: Date?, duration: ScheduleElement.Duration?, fromCode: Bool = false) -> [ScheduleElement] {
            let timed = duration ?? converter.defaultDuration
            let period = Int(rule.period.rounded())
            if rule.period != rule.period.rounded(), ["mo", "a"].contains(rule.periodUnit) {
                loss("repeat.period", "\(rule.period) \(rule.periodUnit) is kept as \(max(1, period)) \(rule.periodUnit)")
            }
            // n all-day occurrences on one day need distinct starts: a second apart (their window is
            // the day either way); never more than the documented limit, whatever n says.
            func allDay(_ day: Date, _ n: Int, interval: DateComponents) -> [ScheduleElement] {
                if n > TimingLimits.maximumPerDay {
                    loss("repeat.frequency", "\(n) times a day; the store schedules \(TimingLimits.maximumPerDay), the most all-day occurrences one day holds here")
                }
                return (0..<min(max(1, n), TimingLimits.maximumPerDay)).map { i in element(day.addingTimeInterval(Double(i)), end: end, interval: interval, duration: .allDay) }
            }
            if !rule.daysOfWeek.isEmpty {
                let weeks = rule.periodUnit == "wk" ? max(1, period) : 1
                if !["d", "wk"].contains(rule.periodUnit) {
                    loss("repeat.dayOfWeek", "days of week with a period in \(rule.periodUnit); weekly on those days")
                }
                var elements: [ScheduleElement] = []
                for day in rule.daysOfWeek {
                    if rule.timesOfDay.isEmpty {
                        let perDay = rule.periodUnit == "d" ? rule.frequency : 1
                        elements += allDay(first(at: nil, from: start, matching: day), perDay, interval: DateComponents(weekOfYear: weeks))
                    } else {
                        for t in rule.timesOfDay {
                            elements.append(element(first(at: t, from: start, matching: day), end: end, interval: DateComponents(weekOfYear: weeks), duration: timed))
                        }
                    }
                }
                return elements
            }
            switch rule.periodUnit {
            case "d":
                let interval = DateComponents(day: max(1, period))
                if rule.timesOfDay.isEmpty { return allDay(first(at: nil, from: start), rule.frequency, interval: interval) }
                return rule.timesOfDay.map { element(first(at: $0, from: start), end: end, interval: interval, duration: timed) }
            case "wk":
                let interval = DateComponents(weekOfYear: max(1, period))
                var days = [calendar.component(.weekday, from: start)]
                if rule.frequency > 1 {
                    guard let table = converter.tables.weeklyDays[rule.frequency] else {
                        loss("repeat.frequency", "\(rule.frequency) times a week has no days in the site table; every day is used")
                        return build(TimingRule(frequency: 1, period: 1, periodUnit: "d", timesOfDay: rule.timesOfDay), start: start, end: end, duration: duration)
                    }
                    days = table
                    loss("repeat.frequency", "\(rule.frequency) times a week on no given days; the site's days are used (\(days.map { Calendar(identifier: .gregorian).shortWeekdaySymbols[$0 - 1] }.joined(separator: ", ")))")
                } else if !fromCode {
                    loss("repeat.period", "\(period == 1 ? "once a week" : "every \(period) weeks") on no given day; the start's weekday is used")
                }
                var elements: [ScheduleElement] = []
                for day in days {
                    if rule.timesOfDay.isEmpty {
                        elements += allDay(first(at: nil, from: start, matching: day), 1, interval: interval)
                    } else {
                        for t in rule.timesOfDay {
                            elements.append(element(first(at: t, from: start, matching: day), end: end, interval: interval, duration: timed))
                        }
                    }
                }
                return elements
            case "mo", "a":
                let unit: Calendar.Component = rule.periodUnit == "mo" ? .month : .year
                if rule.frequency > 1 {
                    let days = Int((Double(max(1, period)) * (unit == .month ? 30.4375 : 365.25) / Double(rule.frequency)).rounded())
                    loss("repeat.frequency", "\(rule.frequency) times per \(max(1, period)) \(rule.periodUnit); every \(days) days is used")
                    return build(TimingRule(frequency: 1, period: Double(days), periodUnit: "d", timesOfDay: rule.timesOfDay), start: start, end: end, duration: duration)
                }
                var interval = DateComponents()
                interval.setValue(max(1, period), for: unit)
                if rule.timesOfDay.isEmpty { return allDay(calendar.startOfDay(for: start), 1, interval: interval) }
                return rule.timesOfDay.map { t in
                    var at = calendar.date(bySettingHour: t / 60, minute: t % 60, second: 0, of: calendar.startOfDay(for: start))!
                    if at < start { at = calendar.date(byAdding: interval, to: at)! }
                    return element(at, end: end, interval: interval, duration: timed)
                }
            default:
                // Hours, minutes, seconds: elapsed time between occurrences.
                let seconds = rule.period * TimingRule.seconds(in: rule.periodUnit)! / Double(max(1, rule.frequency))
                var step = Int(seconds.rounded())
                if step < TimingLimits.shortestInterval {
                    loss("repeat.period", "every \(seconds) s is kept as every \(TimingLimits.shortestInterval) s, the shortest interval scheduled here")
                    step = TimingLimits.shortestInterval
                } else if Double(step) != seconds {
                    loss("repeat.period", "every \(seconds) s is kept as every \(step) s")
                }
                let interval: DateComponents = step % 3600 == 0 ? DateComponents(hour: step / 3600)
                    : step % 60 == 0 ? DateComponents(minute: step / 60) : DateComponents(second: step)
                if rule.timesOfDay.count > 1 {
                    loss("repeat.timeOfDay", "several times of day with an interval of \(step / 60) min; the first time starts the series")
                }
                let begin = rule.timesOfDay.first.map { first(at: $0, from: start) } ?? start
                return [element(begin, end: end, interval: interval, duration: duration ?? converter.defaultDuration)]
            }
        }

        /// The end that stops the merged occurrences after the `count`-th (or the bounds' end, if sooner).
        /// The `count`-th is found by its number, not by listing the ones before it.
        mutating func countEnd(_ elements: [ScheduleElement], count: Int, end: Date?) -> Date? {
            guard count > 0, let schedule = try? Schedule(elements: elements),
                  let last = schedule.event(occurrence: count - 1) else { return end }
            let after = last.start.addingTimeInterval(1)
            return end.map { min($0, after) } ?? after
        }
    }
}

/// How far a Timing is expanded, whatever its numbers say: a legal value such as
/// `frequency: 2147483647` must not make the gateway allocate in proportion to it. What is cut is
/// reported in the loss report; numbers no schedule can hold make the Timing unschedulable.
public enum TimingLimits {
    /// All-day occurrences on one day.
    public static let maximumPerDay = 48
    /// Occurrences a `count` expands to.
    public static let maximumCount = 10_000
    /// The shortest interval between occurrences of an elapsed-time schedule, in seconds.
    public static let shortestInterval = 60
    /// The longest span a period, duration or bound may have: the store's 10,000 years.
    public static let longestSpan = ScheduleElement.longestSpan

    /// Why a repeat rule's numbers cannot make a schedule (a span past 10,000 years, a number
    /// that is not finite), naming the field; nil when they can.
    static func outOfRange(_ r: R4.Timing.Repeat?) -> String? {
        guard let r else { return nil }
        func span(_ value: Double?, _ unit: String?, _ field: String) -> String? {
            guard let value else { return nil }
            let seconds = value * (unit.flatMap(TimingRule.seconds(in:)) ?? 1)
            guard !seconds.isFinite || abs(seconds) > longestSpan else { return nil }
            return "repeat.\(field) \(value) \(unit ?? "") is out of range (at most 10,000 years)"
        }
        func quantity(_ q: R4.Quantity?, _ field: String) -> String? {
            span(q?.value?.double, q?.code ?? q?.unit ?? "s", field)
        }
        let checks: [String?] = [
            span(r.period?.double, r.periodUnit, "period"), span(r.periodMax?.double, r.periodUnit, "periodMax"),
            span(r.duration?.double, r.durationUnit, "duration"), span(r.durationMax?.double, r.durationUnit, "durationMax"),
            quantity(r.boundsDuration, "boundsDuration.value"),
            quantity(r.boundsRange?.low, "boundsRange.low.value"), quantity(r.boundsRange?.high, "boundsRange.high.value"),
            span(r.offset.map(Double.init), "min", "offset"),
        ]
        return checks.compactMap { $0 }.first
    }
}
