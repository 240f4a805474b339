import Foundation

/// One repeating rule of a schedule (CareKit's `OCKScheduleElement`): occurrences start at `start`
/// and every `interval` after it, in the element's own calendar and time zone, before `end`.
public struct ScheduleElement: Sendable, Hashable {
    /// How long each occurrence lasts.
    public enum Duration: Sendable, Hashable {
        /// The whole local day of the occurrence.
        case allDay
        /// A fixed number of seconds from the occurrence's start.
        case seconds(Double)

        /// CareKit's default: one hour.
        public static let hour = Duration.seconds(3600)
    }

    /// The first occurrence.
    public var start: Date
    /// Occurrences start before this date (exclusive); nil for an open-ended element.
    public var end: Date?
    /// The time between occurrences; only year, month, weekOfYear, day, hour, minute and second count.
    public var interval: DateComponents
    /// Shown instead of the clock time ("Before bed").
    public var text: String?
    /// How long each occurrence lasts (an hour, all day, or a length of time).
    public var duration: Duration
    /// Values an outcome should reach (a dose, a step count).
    public var targetValues: [OutcomeValue]
    /// The calendar (and time zone) in which intervals accumulate and days begin.
    public var calendar: Calendar

    /// An element: its first occurrence at `start`, then one every `interval` in its calendar until
    /// `end`.
    public init(start: Date, end: Date? = nil, interval: DateComponents, text: String? = nil,
                duration: Duration = .hour, targetValues: [OutcomeValue] = [], calendar: Calendar) {
        self.start = start
        self.end = end
        self.interval = ScheduleElement.normalized(interval)
        self.text = text
        self.duration = duration
        self.targetValues = targetValues
        self.calendar = calendar
    }

    /// The components CareKit persists; zero means unset.
    static let intervalComponents: [Calendar.Component] = [.year, .month, .weekOfYear, .day, .hour, .minute, .second]

    static func normalized(_ interval: DateComponents) -> DateComponents {
        var result = DateComponents()
        for component in intervalComponents {
            if let value = interval.value(for: component), value != 0 { result.setValue(value, for: component) }
        }
        return result
    }

    /// At most how many occurrences start in one day: 86,400 over the interval's seconds when
    /// it is shorter than a day, else one (what bounds the events a task can make a page compute).
    public var maximumOccurrencesPerDay: Int {
        if [.year, .month, .weekOfYear, .day].contains(where: { (interval.value(for: $0) ?? 0) > 0 }) { return 1 }
        let seconds = (interval.hour ?? 0) * 3600 + (interval.minute ?? 0) * 60 + (interval.second ?? 0)
        guard seconds > 0 else { return Int.max }
        return (86_400 + seconds - 1) / seconds
    }

    /// The interval scaled by `k` (for jumping k occurrences at once).
    func interval(times k: Int) -> DateComponents {
        var result = DateComponents()
        for component in ScheduleElement.intervalComponents {
            if let value = interval.value(for: component) { result.setValue(value * k, for: component) }
        }
        return result
    }
}

/// Why a schedule cannot be stored.
public enum ScheduleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A schedule needs at least one element.
    case noElements
    /// An element repeats every zero units of time.
    case zeroInterval(element: Int)
    /// An element's interval goes back in time.
    case backwardsInterval(element: Int)
    /// An element ends before it starts.
    case endBeforeStart(element: Int)
    /// An element lasts less than nothing.
    case negativeDuration(element: Int)
    /// Two elements start at the same time (CareKit numbers events by start, so one would hide the
    /// other).
    case sameStart(element: Int, otherElement: Int)
    /// A start, end, interval or duration beyond 10,000 years (no calendar computes events there).
    case outOfRange(element: Int)
    /// A convenience constructor was given a clock time outside 00:00...23:59.
    case invalidClockTime(hour: Int, minutes: Int)
    /// A convenience constructor was given a weekday outside 1 (Sunday) ... 7 (Saturday).
    case invalidWeekday(Int)

    public var description: String {
        switch self {
        case .noElements: "a schedule needs at least one element"
        case .zeroInterval(let e): "schedule element \(e): the interval has no non-zero component (events would never advance)"
        case .backwardsInterval(let e): "schedule element \(e): the interval goes backwards in time"
        case .endBeforeStart(let e): "schedule element \(e): end is not after start"
        case .negativeDuration(let e): "schedule element \(e): negative duration"
        case .sameStart(let e, let other): "schedule elements \(other) and \(e) start at the same time, so their events have no defined order"
        case .outOfRange(let e): "schedule element \(e): a start, end, interval or duration beyond 10,000 years"
        case .invalidClockTime(let h, let m): "\(h):\(m < 10 && m >= 0 ? "0" : "")\(m) is not a clock time (hours 0...23, minutes 0...59)"
        case .invalidWeekday(let d): "weekday \(d) is not a day of the week (1 = Sunday ... 7 = Saturday)"
        }
    }
}

/// A task's schedule: the union of its elements' occurrences, numbered from 0 in time order
/// (CareKit's `OCKSchedule`).
public struct Schedule: Sendable, Hashable {
    /// The elements, in the order given; their events merge into one numbering.
    public private(set) var elements: [ScheduleElement]
    /// Each element's occurrence series, kept across queries: the clamps found so far never
    /// change, so later queries on the same schedule skip finding them again.
    let series: SeriesCache

    /// A schedule of valid elements; see `ScheduleError` for what is refused.
    public init(elements: [ScheduleElement]) throws(ScheduleError) {
        try Schedule.validate(elements)
        self.elements = elements
        self.series = SeriesCache(elements)
    }

    public static func == (a: Schedule, b: Schedule) -> Bool { a.elements == b.elements }
    public func hash(into hasher: inout Hasher) { hasher.combine(elements) }

    /// The earliest element start.
    public var startDate: Date? { elements.map(\.start).min() }

    /// The latest element end, or nil when any element is open-ended.
    public var endDate: Date? {
        let ends = elements.map(\.end)
        if ends.contains(where: { $0 == nil }) { return nil }
        return ends.compactMap { $0 }.max()
    }

    static func validate(_ elements: [ScheduleElement]) throws(ScheduleError) {
        guard !elements.isEmpty else { throw .noElements }
        for (i, element) in elements.enumerated() {
            if !element.isWithinRange { throw .outOfRange(element: i) }
            let values = ScheduleElement.intervalComponents.compactMap { element.interval.value(for: $0) }
            if values.allSatisfy({ $0 == 0 }) { throw .zeroInterval(element: i) }
            if values.contains(where: { $0 < 0 }) {
                // Mixed signs could still move forward; CareKit schedules never use them.
                throw .backwardsInterval(element: i)
            }
            if let end = element.end, end <= element.start { throw .endBeforeStart(element: i) }
            if case .seconds(let s) = element.duration, s < 0 { throw .negativeDuration(element: i) }
            for j in 0..<i where elements[j].start == element.start {
                throw .sameStart(element: i, otherElement: j)
            }
        }
    }

    // MARK: Convenience constructors

    /// A calendar in a time zone, as CareKit builds them (gregorian, Sunday first).
    public static func calendar(_ timeZone: TimeZone) -> Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        calendar.firstWeekday = 1
        calendar.minimumDaysInFirstWeek = 1
        return calendar
    }

    /// Every day at a clock time, from the day of `start` (CareKit's `dailyAtTime`). Throws for a
    /// clock time outside 00:00...23:59 or an `end` not after the first occurrence.
    public static func dailyAtTime(hour: Int, minutes: Int, start: Date, end: Date? = nil, text: String? = nil,
                                   duration: ScheduleElement.Duration = .hour, targetValues: [OutcomeValue] = [],
                                   timeZone: TimeZone) throws(ScheduleError) -> Schedule {
        let calendar = calendar(timeZone)
        let first = try clockTime(hour, minutes, on: calendar.startOfDay(for: start), calendar)
        let element = ScheduleElement(start: first, end: end, interval: DateComponents(day: 1), text: text,
                                      duration: duration, targetValues: targetValues, calendar: calendar)
        return try Schedule(elements: [element])
    }

    /// Every week on a weekday (1 = Sunday ... 7 = Saturday) at a clock time, from the first such
    /// day on or after `start` (CareKit's `weeklyAtTime`). Throws for a weekday or clock time out
    /// of range or an `end` not after the first occurrence.
    public static func weeklyAtTime(weekday: Int, hours: Int, minutes: Int, start: Date, end: Date? = nil,
                                    text: String? = nil, duration: ScheduleElement.Duration = .hour,
                                    targetValues: [OutcomeValue] = [], timeZone: TimeZone) throws(ScheduleError) -> Schedule {
        guard (1...7).contains(weekday) else { throw .invalidWeekday(weekday) }
        let calendar = calendar(timeZone)
        let startDay = calendar.startOfDay(for: start)
        let ahead = (weekday - calendar.component(.weekday, from: startDay) + 7) % 7
        let day = calendar.date(byAdding: .day, value: ahead, to: startDay) ?? startDay
        let first = try clockTime(hours, minutes, on: day, calendar)
        let element = ScheduleElement(start: first, end: end, interval: DateComponents(weekOfYear: 1), text: text,
                                      duration: duration, targetValues: targetValues, calendar: calendar)
        return try Schedule(elements: [element])
    }

    /// Every day, all day, from the day of `start`. Throws when `end` is not after that day's start.
    public static func allDay(start: Date, end: Date? = nil, text: String? = nil, targetValues: [OutcomeValue] = [],
                              timeZone: TimeZone) throws(ScheduleError) -> Schedule {
        let calendar = calendar(timeZone)
        let element = ScheduleElement(start: calendar.startOfDay(for: start), end: end, interval: DateComponents(day: 1),
                                      text: text, duration: .allDay, targetValues: targetValues, calendar: calendar)
        return try Schedule(elements: [element])
    }

    /// The clock time `hour:minutes` on `day` (a start of day), checked.
    static func clockTime(_ hour: Int, _ minutes: Int, on day: Date, _ calendar: Calendar) throws(ScheduleError) -> Date {
        guard (0...23).contains(hour), (0...59).contains(minutes) else { throw .invalidClockTime(hour: hour, minutes: minutes) }
        return calendar.date(bySettingHour: hour, minute: minutes, second: 0, of: day) ?? day
    }

    /// "As needed": an all-day element every day. Give the task `impactsAdherence: false`.
    public static func asNeeded(start: Date, end: Date? = nil, text: String? = "As needed", timeZone: TimeZone) throws(ScheduleError) -> Schedule {
        try allDay(start: start, end: end, text: text, timeZone: timeZone)
    }
}

/// One occurrence of a task: its window and its number in the schedule (CareKit's `OCKScheduleEvent`).
public struct ScheduleEvent: Sendable, Hashable {
    /// The window's start: the occurrence time, or the start of the local day for all-day elements.
    public var start: Date
    /// The window's end.
    public var end: Date
    /// The occurrence number in the whole schedule (all elements merged, in time order, from 0).
    public var occurrence: Int
    /// Which element the event comes from.
    public var elementIndex: Int
    /// The element, shared with the schedule's other events.
    private let elementBox: Shared<ScheduleElement>
    /// The element the event comes from.
    public var element: ScheduleElement { elementBox.value }

    /// An event of `element`, its `occurrence` in the schedule's numbering.
    public init(start: Date, end: Date, occurrence: Int, elementIndex: Int, element: ScheduleElement) {
        self.init(start: start, end: end, occurrence: occurrence, elementIndex: elementIndex, elementBox: Shared(element))
    }

    init(start: Date, end: Date, occurrence: Int, elementIndex: Int, elementBox: Shared<ScheduleElement>) {
        self.start = start
        self.end = end
        self.occurrence = occurrence
        self.elementIndex = elementIndex
        self.elementBox = elementBox
    }

    public static func == (a: ScheduleEvent, b: ScheduleEvent) -> Bool {
        a.start == b.start && a.end == b.end && a.occurrence == b.occurrence && a.elementIndex == b.elementIndex && a.element == b.element
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(start)
        hasher.combine(occurrence)
        hasher.combine(elementIndex)
    }
}

// MARK: Occurrence arithmetic

/// The occurrence series of a schedule's elements, shared by copies of the schedule.
final class SeriesCache: @unchecked Sendable {
    let all: [OccurrenceSeries]
    let elements: [Shared<ScheduleElement>]
    init(_ elements: [ScheduleElement]) {
        all = elements.map(OccurrenceSeries.init)
        self.elements = elements.map(Shared.init)
    }
}

/// Exact occurrence times of one element. CareKit accumulates: each start is the previous one plus
/// the interval, so a clamp (a wall time in a daylight-saving gap, the 31st in a short month)
/// shifts every later occurrence for good. Between clamps, adding k intervals at once gives the
/// same dates as adding one k times, so the series is kept as segments that each start at a
/// clamp and are computed by jumping. Clamps can only happen at daylight-saving transitions and
/// at month ends, so finding them is cheap.
final class OccurrenceSeries {
    let element: ScheduleElement
    let calendar: Calendar
    /// For intervals of hours, minutes and seconds only: Foundation adds those as elapsed time.
    let absoluteStep: TimeInterval?
    /// Intervals mixing calendar units and clock units are accumulated step by step.
    let isMixed: Bool
    /// An estimate of one interval in seconds, to guess where to jump.
    let nominalStep: TimeInterval
    /// Whether a clamp can change the day of month (month or year intervals).
    let keepsDay: Bool
    /// Days per step for intervals of days and weeks only (the common case), else nil.
    let dayStep: Int?

    struct Segment {
        let index: Int
        let start: Date
        let wallTime: Int
        let day: Int
        /// The start's local day number (days since 1970 in local time), seconds into that day,
        /// and those seconds as a whole number (the wall time a clamp would change).
        let localDay: Double
        let localWall: Double

        init(index: Int, start: Date, calendar: Calendar) {
            self.index = index
            self.start = start
            let local = start.timeIntervalSince1970 + Double(calendar.timeZone.secondsFromGMT(for: start))
            localDay = (local / 86400).rounded(.down)
            localWall = local - localDay * 86400
            wallTime = Int(localWall)
            day = Segment.dayOfMonth(localDay: Int(localDay))
        }

        /// The Gregorian day of month of a day number (days since 1970-01-01), by civil-date
        /// arithmetic rather than a `Calendar` lookup (schedules are Gregorian, as CareKit's are).
        static func dayOfMonth(localDay: Int) -> Int {
            let z = localDay + 719_468
            let era = (z >= 0 ? z : z - 146_096) / 146_097
            let dayOfEra = z - era * 146_097
            let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
            let monthIndex = (5 * dayOfYear + 2) / 153
            return dayOfYear - (153 * monthIndex + 2) / 5 + 1
        }
    }
    /// Segments found so far, and the date up to which no further clamp exists.
    private var segments: [Segment]
    private var explored: Date
    private let lock = NSLock()

    init(_ element: ScheduleElement) {
        self.element = element
        self.calendar = element.calendar
        let i = element.interval
        let calendarUnits = (i.year ?? 0) != 0 || (i.month ?? 0) != 0 || (i.weekOfYear ?? 0) != 0 || (i.day ?? 0) != 0
        let clockSeconds = Double((i.hour ?? 0) * 3600 + (i.minute ?? 0) * 60 + (i.second ?? 0))
        absoluteStep = calendarUnits ? nil : clockSeconds
        isMixed = calendarUnits && clockSeconds != 0
        nominalStep = Double(i.year ?? 0) * 365.2425 * 86400 + Double(i.month ?? 0) * 30.436875 * 86400
            + Double(i.weekOfYear ?? 0) * 7 * 86400 + Double(i.day ?? 0) * 86400 + clockSeconds
        keepsDay = (i.year ?? 0) != 0 || (i.month ?? 0) != 0
        dayStep = (calendarUnits && !keepsDay && clockSeconds == 0) ? (i.day ?? 0) + 7 * (i.weekOfYear ?? 0) : nil
        segments = [Segment(index: 0, start: element.start, calendar: element.calendar)]
        explored = element.start
    }

    static func wallTime(_ date: Date, _ calendar: Calendar) -> Int {
        let offset = calendar.timeZone.secondsFromGMT(for: date)
        let local = Int((date.timeIntervalSince1970 + Double(offset)).rounded(.down))
        return ((local % 86400) + 86400) % 86400
    }

    /// The last jumps computed, by segment and steps (a jump from an older segment past a clamp
    /// differs from the accumulated date, so the segment is part of the key).
    private var recent: [(segment: Int, steps: Int, date: Date)] = []
    private let recentLock = NSLock()



    /// A day-and-week jump computed from the local day and wall time with a few offset lookups
    /// (far cheaper than `Calendar`): the earliest instant whose local time is the wanted one,
    /// as Foundation picks for repeated times. Nil when no instant has that local time (a gap).
    private func dayJump(_ segment: Segment, _ steps: Int, days: Int) -> Date? {
        let zone = calendar.timeZone
        let local = (segment.localDay + Double(steps * days)) * 86400 + segment.localWall
        let before = Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: local - 86400)))
        let after = Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: local + 86400)))
        var best: Double?
        for offset in before == after ? [before] : [before, after] {
            let candidate = local - offset
            if Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: candidate))) == offset {
                best = min(best ?? candidate, candidate)
            }
        }
        return best.map { Date(timeIntervalSince1970: $0) }
    }

    private func jump(_ segment: Segment, _ steps: Int) -> Date {
        if steps == 0 { return segment.start }
        recentLock.lock()
        if let hit = recent.first(where: { $0.segment == segment.index && $0.steps == steps }) {
            recentLock.unlock()
            return hit.date
        }
        recentLock.unlock()
        let date: Date
        if let days = dayStep, let fast = dayJump(segment, steps, days: days) {
            date = fast
        } else {
            date = calendar.date(byAdding: element.interval(times: steps), to: segment.start)!
        }
        recentLock.lock()
        if recent.count >= 4 { recent.removeFirst() }
        recent.append((segment.index, steps, date))
        recentLock.unlock()
        return date
    }

    /// The segments known to cover everything up to `horizon` (finding clamps as needed).
    private func segments(through horizon: Date) -> [Segment] {
        lock.lock()
        defer { lock.unlock() }
        if explored < horizon { explore(through: horizon) }
        return segments
    }

    /// Finds clamps up to `horizon`, appending segments. Called with the lock held.
    private func explore(through horizon: Date) {
        while explored < horizon {
            let segment = segments[segments.count - 1]
            let limit = max(horizon, explored.addingTimeInterval(nominalStep * 2))
            if let clamp = firstClamp(after: segment, from: explored, through: limit) {
                let date = jump(segment, clamp - segment.index)
                segments.append(Segment(index: clamp, start: date, calendar: calendar))
                explored = date
            } else {
                explored = limit
            }
        }
    }

    /// Daylight-saving transitions and occurrences examined while looking for clamps (what
    /// exploring a series costs; tests check it stays in proportion to the occurrences).
    private(set) var probes = 0

    /// Intervals longer than this have fewer occurrences than a time zone has transitions (a
    /// few a year), so clamps are looked for occurrence by occurrence.
    static let longStep: TimeInterval = 60 * 86400

    /// The first occurrence index after `segment` (at a date in (from, through]) where a jump lands
    /// on a clamped time or day, or nil.
    private func firstClamp(after segment: Segment, from: Date, through: Date) -> Int? {
        var found = nominalStep > OccurrenceSeries.longStep
            ? firstMovedOccurrence(after: segment, from: from, through: through)
            : firstMovedAtTransition(after: segment, from: from, through: through)
        // The day of month in a shorter month.
        if keepsDay && segment.day > 28 {
            var k = segment.index + 1
            while k <= segment.index + 13 {
                let date = jump(segment, k - segment.index)
                if date > through.addingTimeInterval(nominalStep) { break }
                if calendar.component(.day, from: date) != segment.day { found = min(found ?? k, k); break }
                k += 1
            }
        }
        return found
    }

    /// Wall times in a daylight-saving gap, found by checking the occurrences next to each
    /// transition: the first one whose wall time differs from the segment's.
    private func firstMovedAtTransition(after segment: Segment, from: Date, through: Date) -> Int? {
        var transition = calendar.timeZone.nextDaylightSavingTimeTransition(after: from.addingTimeInterval(-nominalStep))
        while let t = transition, t <= through.addingTimeInterval(nominalStep) {
            probes += 1
            let estimate = segment.index + Int(t.timeIntervalSince(segment.start) / nominalStep)
            for k in max(segment.index + 1, estimate - 1)...max(segment.index + 1, estimate + 1) {
                let date = jump(segment, k - segment.index)
                if OccurrenceSeries.wallTime(date, calendar) != segment.wallTime { return k }
            }
            transition = calendar.timeZone.nextDaylightSavingTimeTransition(after: t)
        }
        return nil
    }

    /// The same for intervals of months or years: every occurrence in the range is checked, since
    /// walking the transitions of the thousands of years a few occurrences can span costs more.
    private func firstMovedOccurrence(after segment: Segment, from: Date, through: Date) -> Int? {
        var k = segment.index + max(1, Int(from.timeIntervalSince(segment.start) / nominalStep) - 1)
        while true {
            probes += 1
            let date = jump(segment, k - segment.index)
            if date > through.addingTimeInterval(nominalStep) { return nil }
            if OccurrenceSeries.wallTime(date, calendar) != segment.wallTime { return k }
            k += 1
        }
    }

    /// The start of occurrence `k`, exactly as CareKit accumulates it.
    func start(_ k: Int) -> Date {
        if k == 0 { return element.start }
        if let step = absoluteStep { return element.start.addingTimeInterval(step * Double(k)) }
        if isMixed { return mixedAdvance(to: k, until: Date(timeIntervalSinceReferenceDate: .greatestFiniteMagnitude)).date }
        let known = segments(through: element.start.addingTimeInterval(nominalStep * Double(k + 2) * 1.1))
        var segment = known[0]
        for s in known where s.index <= k { segment = s }
        return jump(segment, k - segment.index)
    }

    /// The furthest occurrence of a mixed interval accumulated so far, to go on from.
    private var mixedReached: (k: Int, date: Date)?

    /// Accumulates a mixed interval up to occurrence `k`, or to the first occurrence starting at or
    /// after `limit`, whichever comes first. Days and weeks with clock time step by a fixed number
    /// of seconds while the zone's offset stays the same, so those stretches are jumped and only
    /// the step across each transition is accumulated (ten thousand years of a 25-hour interval
    /// would otherwise take millions of steps).
    private func mixedAdvance(to k: Int, until limit: Date) -> (k: Int, date: Date) {
        lock.lock()
        defer { lock.unlock() }
        var (index, date) = mixedReached.flatMap { $0.k <= k && $0.date < limit ? $0 : nil } ?? (0, element.start)
        let i = element.interval
        let fixedStep = (i.year ?? 0) == 0 && (i.month ?? 0) == 0 ? nominalStep : nil
        while index < k && date < limit {
            probes += 1
            if let step = fixedStep {
                // Whole steps that stay before the next transition and before `limit`.
                let bound = min(calendar.timeZone.nextDaylightSavingTimeTransition(after: date) ?? .distantFuture, limit)
                var n = Int(min((bound.timeIntervalSince(date) / step).rounded(.up), Double(k - index) + 1)) - 1
                while n > 0 && date.addingTimeInterval(step * Double(n)) >= bound { n -= 1 }
                if n > 0 { date = date.addingTimeInterval(step * Double(n)); index += n; continue }
            }
            date = calendar.date(byAdding: element.interval, to: date)!
            index += 1
        }
        if index > mixedReached?.k ?? 0 { mixedReached = (index, date) }
        return (index, date)
    }

    /// How many occurrences start before `t` (not limited by `end`).
    func countStarts(before t: Date) -> Int {
        guard t > element.start else { return 0 }
        if let step = absoluteStep {
            var n = Int((t.timeIntervalSince(element.start) / step).rounded(.up))
            while n > 0 && element.start.addingTimeInterval(step * Double(n - 1)) >= t { n -= 1 }
            while element.start.addingTimeInterval(step * Double(n)) < t { n += 1 }
            return n
        }
        if isMixed {
            // Past the reach no occurrence exists, so none is counted or accumulated.
            return mixedAdvance(to: lastWithinReach + 1, until: t).k
        }
        let known = segments(through: t)
        var position = 0
        for (i, s) in known.enumerated() where s.start < t { position = i }
        let segment = known[position]
        let nextIndex = position + 1 < known.count ? known[position + 1].index : Int.max
        // Within the segment, find the last occurrence before t by estimate and correction.
        var n = segment.index + max(0, Int((t.timeIntervalSince(segment.start) / nominalStep).rounded(.down)))
        n = min(n, nextIndex - 1)
        while n > segment.index && jump(segment, n - segment.index) >= t { n -= 1 }
        while n + 1 < nextIndex && jump(segment, n + 1 - segment.index) < t { n += 1 }
        return n + 1
    }

    /// Whether occurrence `k` exists: it starts before the element's `end` (exclusive). Asked of
    /// one occurrence, not by counting them all up to `end`, which for an end millennia away
    /// would walk every daylight-saving change on the way.
    func exists(_ k: Int) -> Bool {
        guard isWithinReach(k) else { return false }
        guard let end = element.end else { return true }
        return start(k) < end
    }

    /// Whether occurrence `k` starts, by its nominal step, within `Schedule.occurrenceReach` of
    /// the element's start. Later ones are not looked for and never computed: a device naming
    /// occurrence 1,214,748,364 of a daily task had the store walk every daylight-saving change
    /// of three million years, and ten thousand years of them per outcome is still seconds a push.
    func isWithinReach(_ k: Int) -> Bool { k <= lastWithinReach }

    /// The last occurrence within `Schedule.occurrenceReach`, by the nominal step.
    var lastWithinReach: Int { Int(min(Schedule.occurrenceReach / nominalStep, 1e15)) }

    /// The window of an occurrence starting at `start`.
    func window(_ start: Date) -> (start: Date, end: Date) {
        switch element.duration {
        case .seconds(let s):
            return (start, start.addingTimeInterval(s))
        case .allDay:
            let day = calendar.startOfDay(for: start)
            let next = calendar.date(byAdding: .day, value: 1, to: day)!
            return (day, next.addingTimeInterval(-1))
        }
    }

    /// How many events of this element have a window starting before `t`.
    func countWindows(before t: Date) -> Int {
        var bound = t
        if case .allDay = element.duration {
            // The day's window starts before t exactly when the occurrence is before the next midnight.
            let day = calendar.startOfDay(for: t)
            bound = day == t ? t : calendar.date(byAdding: .day, value: 1, to: day)!
        }
        // Occurrences from `end` on do not exist.
        return countStarts(before: element.end.map { min($0, bound) } ?? bound)
    }

    /// The longest a window can reach back before its occurrence starts or extend after it.
    var reach: TimeInterval {
        switch element.duration {
        case .seconds(let s): max(s, 0)
        case .allDay: 26 * 3600
        }
    }
}

extension Schedule {
    /// The events whose window ends at or after `start` and starts before `end`, in occurrence order.
    public func events(from start: Date, to end: Date) -> [ScheduleEvent] {
        guard start < end else { return [] }
        let series = self.series.all
        var found: [(start: Date, end: Date, element: Int, k: Int)] = []
        for (index, s) in series.enumerated() {
            var k = s.countStarts(before: start.addingTimeInterval(-s.reach))
            while s.exists(k) {
                let occurrenceStart = s.start(k)
                let window = s.window(occurrenceStart)
                if window.start >= end { break }
                if window.end >= start { found.append((window.start, window.end, index, k)) }
                k += 1
            }
        }
        let boxes = self.series.elements
        found.sort { $0.start != $1.start ? $0.start < $1.start : $0.element < $1.element }
        // The merged number of an event is the number of windows (of every element) before it in
        // (start, element) order. Every window starting at or after `start` is in `found`, so for
        // those it is the windows starting before `start`, counted once, plus the event's rank
        // among them; only windows reaching back before `start` are counted element by element.
        let before = series.reduce(0) { $0 + $1.countWindows(before: start) }
        var rank = 0
        return found.map { e in
            var occurrence: Int
            if e.start >= start {
                occurrence = before + rank
                rank += 1
            } else {
                occurrence = e.k
                for (index, other) in series.enumerated() where index != e.element {
                    occurrence += other.countWindows(before: e.start)
                    if index < e.element && other.countWindows(before: e.start.addingTimeInterval(0.001)) > other.countWindows(before: e.start) {
                        occurrence += 1
                    }
                }
            }
            return ScheduleEvent(start: e.start, end: e.end, occurrence: occurrence, elementIndex: e.element, elementBox: boxes[e.element])
        }
    }

    /// How far after its start a schedule's occurrences are looked for: 200 years. Numbers
    /// beyond name no event (a care plan's tasks do not run for centuries, and each daylight-saving
    /// change on the way costs a lookup).
    public static let occurrenceReach: TimeInterval = 200 * 365.25 * 86400

    /// The event with this occurrence number, or nil when the schedule has no such occurrence
    /// (past its end, or more than `occurrenceReach` after its start).
    public func event(occurrence: Int) -> ScheduleEvent? {
        guard occurrence >= 0, let startDate else { return nil }
        let series = self.series.all
        if series.count == 1 {
            // One element: the occurrence is its own k-th.
            let s = series[0]
            guard s.exists(occurrence) else { return nil }
            let window = s.window(s.start(occurrence))
            return ScheduleEvent(start: window.start, end: window.end, occurrence: occurrence, elementIndex: 0, elementBox: self.series.elements[0])
        }
        func countBefore(_ t: Date) -> Int { series.reduce(0) { $0 + $1.countWindows(before: t) } }
        // Find a time by which more than `occurrence` events have started, then bisect. Nothing
        // starts after the last end (when every element ends), and no further than the reach is
        // searched: counting to an end millennia away would walk every daylight-saving change.
        let earliest = startDate.addingTimeInterval(-26 * 3600)
        let horizon = min(Schedule.occurrenceReach, endDate.map { $0.timeIntervalSince(earliest) + 26 * 3600 } ?? .infinity)
        var span: TimeInterval = 86400
        while countBefore(earliest.addingTimeInterval(span)) <= occurrence {
            if span >= horizon { return nil }
            span = min(span * 2, horizon)
        }
        var low = earliest, high = earliest.addingTimeInterval(span)
        while high.timeIntervalSince(low) > 0.5 {
            let middle = low.addingTimeInterval(high.timeIntervalSince(low) / 2)
            if countBefore(middle) > occurrence { high = middle } else { low = middle }
        }
        return events(from: low.addingTimeInterval(-26 * 3600), to: high.addingTimeInterval(1)).first { $0.occurrence == occurrence }
    }
}

extension ScheduleElement {
    /// Ten thousand years in seconds: how far from 2001 a schedule's dates, and how long its
    /// interval and duration, may be.
    public static let longestSpan = 10_000 * 31_557_600.0

    /// Whether start, end, interval and duration are within 10,000 years, so that event
    /// arithmetic cannot overflow (a start of 1e300 seconds must be refused, not computed).
    var isWithinRange: Bool {
        let span = ScheduleElement.longestSpan
        guard abs(start.timeIntervalSinceReferenceDate) <= span, abs(end?.timeIntervalSinceReferenceDate ?? 0) <= span else { return false }
        if case .seconds(let s) = duration, !(s.isFinite && s <= span) { return false }
        let unitSeconds: [(Calendar.Component, Double)] = [(.year, 31_557_600), (.month, 2_629_800), (.weekOfYear, 604_800), (.day, 86_400),
                                                           (.hour, 3600), (.minute, 60), (.second, 1)]
        return unitSeconds.allSatisfy { component, seconds in abs(Double(interval.value(for: component) ?? 0)) * seconds <= span }
    }
}
