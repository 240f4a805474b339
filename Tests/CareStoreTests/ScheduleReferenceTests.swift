import Foundation
import Testing
@testable import CareStore

/// A small deterministic generator, so failures reproduce.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Events against a step-by-step reference")
struct ScheduleReferenceTests {
    /// CareKit's rule, done the slow way: accumulate from the start, one interval at a time.
    func referenceStarts(_ element: ScheduleElement, until end: Date) -> [Date] {
        var starts: [Date] = []
        var date = element.start
        while date < end && (element.end == nil || date < element.end!) {
            starts.append(date)
            date = element.calendar.date(byAdding: element.interval, to: date)!
        }
        return starts
    }

    @Test("an interval of thousands of years explores its few occurrences, not every daylight-saving change between them")
    func longIntervalExploresOccurrences() throws {
        let calendar = Schedule.calendar(TimeZone(identifier: "Australia/Lord_Howe")!)
        let start = calendar.date(from: DateComponents(year: 2026, month: 11, day: 24))!
        // What a Timing of 22 a day every 3,422,982 days (no periodUnit: days) becomes, per element.
        let element = ScheduleElement(start: start, interval: DateComponents(day: 3_422_982), duration: .allDay, calendar: calendar)
        let series = OccurrenceSeries(element)
        #expect(series.countStarts(before: start.addingTimeInterval(200 * 365.25 * 86400)) == 1)
        #expect(series.start(1) == calendar.date(byAdding: .day, value: 3_422_982, to: start))
        #expect(series.probes < 20, "\(series.probes) transitions and occurrences examined")
        // Every two years of a daily series, by contrast, examines each transition once.
        let daily = OccurrenceSeries(ScheduleElement(start: start, interval: DateComponents(day: 1), calendar: calendar))
        #expect(daily.countStarts(before: start.addingTimeInterval(730 * 86400)) == 730)
        #expect((4...8).contains(daily.probes), "\(daily.probes)")
    }

    @Test("a mixed interval (days and hours) jumps between daylight-saving changes and agrees with accumulation for 60 years")
    func mixedIntervalJumps() throws {
        for zone in ["America/New_York", "Australia/Lord_Howe"].map({ TimeZone(identifier: $0)! }) {
            let calendar = Schedule.calendar(zone)
            let start = calendar.date(from: DateComponents(year: 2026, month: 3, day: 7, hour: 1, minute: 30))!
            let element = ScheduleElement(start: start, interval: DateComponents(day: 1, hour: 1), calendar: calendar)
            let reference = referenceStarts(element, until: start.addingTimeInterval(60 * 365.25 * 86400))
            let series = OccurrenceSeries(element)
            for k in stride(from: reference.count - 1, through: 0, by: -997) {
                #expect(series.start(k) == reference[k], "\(zone.identifier) occurrence \(k)")
                #expect(series.countStarts(before: reference[k].addingTimeInterval(1)) == k + 1, "\(zone.identifier) count before \(k)")
            }
            // To the reach, 200 years: steps across transitions only, not one per occurrence.
            let far = OccurrenceSeries(element)
            let last = far.countStarts(before: Date(timeIntervalSinceReferenceDate: 1e12))
            #expect(!far.isWithinReach(last) && far.isWithinReach(last - 1))
            let again = OccurrenceSeries(element)
            #expect(again.start(last - 1) == far.start(last - 1) && again.start(last - 1) > start.addingTimeInterval(199 * 365.25 * 86400))
            #expect(far.probes < 2_000 && last > 70_000, "\(far.probes) steps for \(last) occurrences")
        }
    }

    @Test("random elements in five time zones agree with accumulation, occurrence by occurrence")
    func randomElements() throws {
        var rng = SplitMix64(state: 20261121)
        let zones = ["America/New_York", "Europe/Berlin", "Australia/Sydney", "Australia/Lord_Howe", "Asia/Kolkata"].map { TimeZone(identifier: $0)! }
        let intervals = [DateComponents(day: 1), DateComponents(day: 2), DateComponents(weekOfYear: 1), DateComponents(weekOfYear: 2),
                         DateComponents(month: 1), DateComponents(month: 3), DateComponents(year: 1), DateComponents(hour: 8), DateComponents(minute: 90),
                         DateComponents(day: 1, hour: 1), DateComponents(minute: 30, weekOfYear: 1), DateComponents(month: 1, hour: 2)]
        var checked = 0
        var clamped = 0
        for _ in 0..<300 {
            let zone = zones.randomElement(using: &rng)!
            let calendar = Schedule.calendar(zone)
            // Starts cluster on DST-prone hours and month ends.
            let day = [1, 15, 28, 29, 30, 31].randomElement(using: &rng)!
            let month = Int.random(in: 1...12, using: &rng)
            let hour = [0, 1, 2, 3, 8, 23].randomElement(using: &rng)!
            var components = DateComponents(year: 2025, month: month, day: min(day, 28), hour: hour, minute: [0, 15, 30].randomElement(using: &rng)!)
            components.day = day
            guard let start = calendar.date(from: components) else { continue }
            let interval = intervals.randomElement(using: &rng)!
            let allDay = Int.random(in: 0..<4, using: &rng) == 0
            let end: Date? = Bool.random(using: &rng) ? start.addingTimeInterval(Double.random(in: 30...900, using: &rng) * 86400) : nil
            let element = ScheduleElement(start: start, end: end, interval: interval, duration: allDay ? .allDay : .seconds(1800), calendar: calendar)
            let schedule = try Schedule(elements: [element])
            let horizon = start.addingTimeInterval(3 * 365 * 86400)
            let reference = referenceStarts(element, until: horizon)
            let series = OccurrenceSeries(element)
            // Count the elements where jumping naively would be wrong: those exercise clamps.
            if reference.indices.contains(where: { k in calendar.date(byAdding: element.interval(times: k), to: start)! != reference[k] }) {
                clamped += 1
            }
            for k in stride(from: 0, to: reference.count, by: max(1, reference.count / 40)) {
                #expect(series.start(k) == reference[k], "\(zone.identifier) \(interval) from \(start): occurrence \(k)")
                let probe = reference[k].addingTimeInterval(1)
                #expect(series.countStarts(before: probe) == k + 1, "\(zone.identifier) \(interval) from \(start): count before occurrence \(k)")
                checked += 1
            }
            // A random range, queried cold, gives the reference's events with their numbers.
            let from = start.addingTimeInterval(Double.random(in: 0...(2 * 365 * 86400), using: &rng))
            let to = from.addingTimeInterval(Double.random(in: 3600...(20 * 86400), using: &rng))
            let series2 = OccurrenceSeries(element)
            let expected = reference.enumerated().filter { _, s in
                let w = series2.window(s)
                return w.end >= from && w.start < to
            }.map { ($0.offset, series2.window($0.element).start) }
            let actual = schedule.events(from: from, to: to).map { ($0.occurrence, $0.start) }
            #expect(actual.map(\.0) == expected.map(\.0), "\(zone.identifier) \(interval) from \(start): range \(from)–\(to)")
            #expect(actual.map(\.1) == expected.map(\.1))
        }
        #expect(checked > 3000)
        #expect(clamped >= 20, "only \(clamped) elements crossed a clamp")
    }
}
