import Foundation
import Testing
@testable import CareStore

let newYork = TimeZone(identifier: "America/New_York")!
let berlin = TimeZone(identifier: "Europe/Berlin")!

/// A local wall time in a zone: `local("2026-03-08 08:00", newYork)`. For times that occur twice,
/// the first (daylight) one.
func local(_ text: String, _ zone: TimeZone) -> Date {
    let parts = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    var components = DateComponents(year: parts[0], month: parts[1], day: parts[2], hour: parts.count > 3 ? parts[3] : 0,
                                     minute: parts.count > 4 ? parts[4] : 0)
    components.timeZone = zone
    return Schedule.calendar(zone).date(from: components)!
}

/// "2026-03-08 03:30" for a date in a zone.
func wall(_ date: Date, _ zone: TimeZone) -> String {
    let c = Schedule.calendar(zone).dateComponents([.year, .month, .day, .hour, .minute], from: date)
    return String(format: "%04d-%02d-%02d %02d:%02d", c.year!, c.month!, c.day!, c.hour!, c.minute!)
}

func element(_ start: Date, every interval: DateComponents, zone: TimeZone, end: Date? = nil,
             duration: ScheduleElement.Duration = .hour, targets: [OutcomeValue] = []) -> ScheduleElement {
    ScheduleElement(start: start, end: end, interval: interval, duration: duration, targetValues: targets, calendar: Schedule.calendar(zone))
}

@Suite("Schedules and events")
struct ScheduleEventTests {
    @Test("daily at 08:00 keeps the local time across both New York daylight-saving changes")
    func dailyAcrossDST() throws {
        let schedule = try Schedule.dailyAtTime(hour: 8, minutes: 0, start: local("2026-03-06", newYork), timeZone: newYork)
        let spring = schedule.events(from: local("2026-03-06", newYork), to: local("2026-03-11", newYork))
        #expect(spring.map { wall($0.start, newYork) } == ["2026-03-06 08:00", "2026-03-07 08:00", "2026-03-08 08:00", "2026-03-09 08:00", "2026-03-10 08:00"])
        #expect(spring.map(\.occurrence) == [0, 1, 2, 3, 4])
        #expect(spring[2].start.timeIntervalSince(spring[1].start) == 23 * 3600)
        let fall = schedule.events(from: local("2026-10-31", newYork), to: local("2026-11-03", newYork))
        #expect(fall.map { wall($0.start, newYork) } == ["2026-10-31 08:00", "2026-11-01 08:00", "2026-11-02 08:00"])
        #expect(fall[1].start.timeIntervalSince(fall[0].start) == 25 * 3600)
        #expect(fall.first?.occurrence == 239)
    }

    @Test("a wall time in the spring-forward gap moves to 03:30 and stays there, as CareKit accumulates (New York and Berlin)")
    func gapTimeAccumulates() throws {
        for (zone, days) in [(newYork, ["2026-03-06", "2026-03-07", "2026-03-08", "2026-03-09", "2026-03-10"]),
                             (berlin, ["2026-03-27", "2026-03-28", "2026-03-29", "2026-03-30", "2026-03-31"])] {
            let schedule = try Schedule.dailyAtTime(hour: 2, minutes: 30, start: local(days[0], zone), timeZone: zone)
            let events = schedule.events(from: local(days[0], zone), to: local(days[4], zone).addingTimeInterval(86400))
            #expect(events.map { wall($0.start, zone) } == [days[0] + " 02:30", days[1] + " 02:30", days[2] + " 03:30", days[3] + " 03:30", days[4] + " 03:30"])
            // Asked for later days alone, the numbering and the drifted time are the same.
            let later = schedule.events(from: local(days[3], zone), to: local(days[4], zone).addingTimeInterval(86400))
            #expect(later.map(\.occurrence) == [3, 4])
            #expect(later.map { wall($0.start, zone) } == [days[3] + " 03:30", days[4] + " 03:30"])
            // Months later the drift persists.
            let summer = schedule.events(from: local("2026-07-01", zone), to: local("2026-07-02", zone))
            #expect(summer.map { wall($0.start, zone) } == ["2026-07-01 03:30"])
        }
    }

    @Test("Berlin's fall-back day: 02:30 happens twice, the first is used, the next day is 02:30 again")
    func berlinFallBack() throws {
        let schedule = try Schedule.dailyAtTime(hour: 2, minutes: 30, start: local("2026-10-24", berlin), timeZone: berlin)
        let events = schedule.events(from: local("2026-10-24", berlin), to: local("2026-10-27", berlin))
        #expect(events.map { wall($0.start, berlin) } == ["2026-10-24 02:30", "2026-10-25 02:30", "2026-10-26 02:30"])
        #expect(berlin.secondsFromGMT(for: events[1].start) == 7200)
        #expect(events[2].start.timeIntervalSince(events[1].start) == 25 * 3600)
    }

    @Test("all-day windows follow the local day: 23 hours in spring, 25 in the fall")
    func allDayWindows() throws {
        let schedule = try Schedule.allDay(start: local("2026-03-01", newYork), timeZone: newYork)
        let spring = schedule.events(from: local("2026-03-08", newYork), to: local("2026-03-08 12:00", newYork))
        #expect(spring.count == 1)
        #expect(spring[0].start == local("2026-03-08", newYork))
        #expect(spring[0].end.timeIntervalSince(spring[0].start) == 23 * 3600 - 1)
        #expect(spring[0].occurrence == 7)
        let fall = schedule.events(from: local("2026-11-01 10:00", newYork), to: local("2026-11-01 11:00", newYork))
        #expect(fall.count == 1)
        #expect(fall[0].end.timeIntervalSince(fall[0].start) == 25 * 3600 - 1)
    }

    @Test("a monthly series from the 31st drifts to the 28th and stays there")
    func monthlyFrom31st() throws {
        let schedule = try Schedule(elements: [element(local("2026-01-31 09:00", newYork), every: DateComponents(month: 1), zone: newYork)])
        let events = schedule.events(from: local("2026-01-01", newYork), to: local("2026-07-01", newYork))
        #expect(events.map { wall($0.start, newYork) } == ["2026-01-31 09:00", "2026-02-28 09:00", "2026-03-28 09:00", "2026-04-28 09:00", "2026-05-28 09:00", "2026-06-28 09:00"])
        let june = schedule.events(from: local("2026-06-01", newYork), to: local("2026-07-01", newYork))
        #expect(june.map(\.occurrence) == [5])
        #expect(schedule.event(occurrence: 5)?.start == local("2026-06-28 09:00", newYork))
        #expect(schedule.event(occurrence: 12)?.start == local("2027-01-28 09:00", newYork))
        // From the 15th there is no drift (the fast path).
        let mid = try Schedule(elements: [element(local("2026-01-15 09:00", newYork), every: DateComponents(month: 1), zone: newYork)])
        #expect(mid.events(from: local("2027-03-01", newYork), to: local("2027-04-01", newYork)).map { ($0.occurrence, wall($0.start, newYork)) }.first! == (14, "2027-03-15 09:00"))
    }

    @Test("several elements merge into one numbering in time order")
    func severalElements() throws {
        let morning = element(local("2026-05-01 08:00", newYork), every: DateComponents(day: 1), zone: newYork)
        let evening = element(local("2026-05-01 20:00", newYork), every: DateComponents(day: 1), zone: newYork)
        let weekly = element(local("2026-05-04 12:00", newYork), every: DateComponents(weekOfYear: 1), zone: newYork, duration: .seconds(1800))
        let schedule = try Schedule(elements: [evening, morning, weekly])
        let may4 = schedule.events(from: local("2026-05-04", newYork), to: local("2026-05-05", newYork))
        #expect(may4.map { wall($0.start, newYork) } == ["2026-05-04 08:00", "2026-05-04 12:00", "2026-05-04 20:00"])
        #expect(may4.map(\.occurrence) == [6, 7, 8])
        #expect(may4.map(\.elementIndex) == [1, 2, 0])
        // Every occurrence number agrees with event(occurrence:).
        let all = schedule.events(from: local("2026-05-01", newYork), to: local("2026-06-01", newYork))
        #expect(all.map(\.occurrence) == Array(0..<all.count))
        for k in [0, 1, 5, 8, 9, 30, all.count - 1] {
            #expect(schedule.event(occurrence: k) == all[k])
        }
    }

    @Test("occurrence numbers from any range agree with the listing from the schedule's start: 48 all-day elements, timed, long windows reaching back, across daylight saving")
    func numbersFromAnyRange() throws {
        let start = local("2026-03-01", newYork)
        let allDay = (0..<48).map { element(start.addingTimeInterval(Double($0)), every: DateComponents(day: 1), zone: newYork, duration: .allDay) }
        let timed = [element(local("2026-03-01 08:00", newYork), every: DateComponents(hour: 7), zone: newYork, duration: .seconds(5 * 3600)),
                     element(local("2026-03-02 02:30", newYork), every: DateComponents(day: 2), zone: newYork, duration: .seconds(40 * 3600))]
        for elements in [allDay, timed, Array(allDay.prefix(3)) + timed] {
            let schedule = try Schedule(elements: elements)
            let all = schedule.events(from: start, to: local("2026-03-15", newYork))
            #expect(all.map(\.occurrence) == Array(0..<all.count))
            for offset in stride(from: 0.0, to: 12 * 86_400, by: 37_123) {
                let from = start.addingTimeInterval(offset)
                for event in schedule.events(from: from, to: from.addingTimeInterval(86_400)) {
                    #expect(all[event.occurrence] == event, "from \(wall(from, newYork)): \(event.occurrence)")
                }
            }
        }
    }

    @Test("an end is checked against the occurrence asked for: occurrences past it do not exist, with one element or several, near or millennia away")
    func endChecksTheOccurrence() throws {
        let start = local("2026-05-01 09:00", newYork)
        let end = local("2026-05-04 09:00", newYork)
        let pill = element(start, every: DateComponents(day: 1), zone: newYork, end: end)
        let walk = element(local("2026-05-01 17:00", newYork), every: DateComponents(day: 1), zone: newYork, end: end)
        let one = try Schedule(elements: [pill])
        #expect(one.events(from: start, to: start.addingTimeInterval(10 * 86_400)).count == 3)
        #expect(one.event(occurrence: 2)?.start == local("2026-05-03 09:00", newYork) && one.event(occurrence: 3) == nil)
        let two = try Schedule(elements: [pill, walk])
        #expect(two.events(from: start, to: start.addingTimeInterval(10 * 86_400)).map(\.occurrence) == Array(0..<6))
        #expect(two.event(occurrence: 5) != nil && two.event(occurrence: 6) == nil)
        // An end 6,000 years on: a week near the start is listed without walking to the end.
        let farEnd = start.addingTimeInterval(6_000 * 365.25 * 86_400)
        let farSchedule = try Schedule(elements: (0..<21).map { element(start.addingTimeInterval(Double($0) * 60), every: DateComponents(day: 1), zone: newYork, end: farEnd) })
        #expect(farSchedule.events(from: start, to: start.addingTimeInterval(7 * 86_400)).count == 7 * 21)
        // And an occurrence of it is found without counting to that end (which took 864,000
        // daylight-saving probes, seconds per outcome a device pushes).
        #expect(farSchedule.event(occurrence: 100).map { wall($0.start, newYork) } == "2026-05-05 09:16")
        let probes = farSchedule.series.all.map(\.probes).reduce(0, +)
        #expect(probes < 21 * 20, "\(probes) transitions examined")
    }

    @Test("an occurrence number more than 200 years on names no event, and none is computed (a device's 1,214,748,364 walked every daylight-saving change of three million years)")
    func occurrenceBeyondReach() throws {
        let start = local("2026-05-01 08:00", newYork)
        let daily = try Schedule(elements: [element(start, every: DateComponents(day: 1), zone: newYork)])
        #expect(daily.event(occurrence: 1_214_748_364) == nil)
        #expect(daily.event(occurrence: Int.max) == nil)
        #expect(daily.series.all[0].probes == 0, "\(daily.series.all[0].probes) transitions examined")
        // A year's occurrence is still found, and exploring reaches only that far.
        #expect(daily.event(occurrence: 365).map { wall($0.start, newYork) } == "2027-05-01 08:00")
        #expect((1...4).contains(daily.series.all[0].probes), "\(daily.series.all[0].probes)")
        // The last occurrence within reach costs a lookup per transition on the way, no more.
        let days = Int(Schedule.occurrenceReach / 86_400)
        #expect(daily.event(occurrence: days - 1) != nil && daily.event(occurrence: days + 1) == nil)
        #expect(daily.series.all[0].probes < 500, "\(daily.series.all[0].probes)")
        // The same reach for clock and calendar intervals alike.
        let hourly = OccurrenceSeries(element(start, every: DateComponents(hour: 1), zone: newYork))
        #expect(hourly.isWithinReach(days * 24 - 1) && !hourly.isWithinReach(days * 24 + 1))
        let weekly = OccurrenceSeries(element(start, every: DateComponents(weekOfYear: 1), zone: newYork))
        #expect(weekly.isWithinReach(days / 7 - 1) && !weekly.isWithinReach(days / 7 + 1))
    }

    @Test("all-day and timed elements on the same day: the day window comes first")
    func allDayAndTimed() throws {
        let day = element(local("2026-05-01", newYork), every: DateComponents(day: 1), zone: newYork, duration: .allDay)
        let pill = element(local("2026-05-01 09:00", newYork), every: DateComponents(day: 1), zone: newYork)
        let schedule = try Schedule(elements: [pill, day])
        let events = schedule.events(from: local("2026-05-02 10:00", newYork), to: local("2026-05-02 11:00", newYork))
        #expect(events.map(\.occurrence) == [2, 3])
        #expect(events.map(\.elementIndex) == [1, 0])
        #expect(events[0].start == local("2026-05-02", newYork))
    }

    @Test("a range keeps events ending at or after its start and starting before its end")
    func rangeRules() throws {
        let schedule = try Schedule.dailyAtTime(hour: 8, minutes: 0, start: local("2026-05-01", newYork), timeZone: newYork)
        let eight = local("2026-05-02 08:00", newYork)
        #expect(schedule.events(from: eight.addingTimeInterval(1800), to: eight.addingTimeInterval(7200)).count == 1)
        #expect(schedule.events(from: eight.addingTimeInterval(3600), to: eight.addingTimeInterval(7200)).count == 1)
        #expect(schedule.events(from: eight.addingTimeInterval(3601), to: eight.addingTimeInterval(7200)).isEmpty)
        #expect(schedule.events(from: eight.addingTimeInterval(-3600), to: eight).isEmpty)
    }

    @Test("element end is exclusive, and hour intervals are elapsed time across daylight saving")
    func endAndHours() throws {
        let start = local("2026-03-07 22:00", newYork)
        let every8h = try Schedule(elements: [element(start, every: DateComponents(hour: 8), zone: newYork, end: local("2026-03-09 06:00", newYork))])
        let events = every8h.events(from: start, to: local("2026-03-10", newYork))
        #expect(events.map { wall($0.start, newYork) } == ["2026-03-07 22:00", "2026-03-08 07:00", "2026-03-08 15:00", "2026-03-08 23:00"])
        #expect(every8h.event(occurrence: 4) == nil)
    }

    @Test("invalid schedules are refused with the element named")
    func invalidSchedules() {
        let start = local("2026-05-01 08:00", newYork)
        #expect(throws: ScheduleError.zeroInterval(element: 0)) { try Schedule(elements: [element(start, every: DateComponents(day: 0), zone: newYork)]) }
        #expect(throws: ScheduleError.backwardsInterval(element: 0)) { try Schedule(elements: [element(start, every: DateComponents(day: -1), zone: newYork)]) }
        #expect(throws: ScheduleError.endBeforeStart(element: 0)) { try Schedule(elements: [element(start, every: DateComponents(day: 1), zone: newYork, end: start)]) }
        #expect(throws: ScheduleError.sameStart(element: 1, otherElement: 0)) {
            try Schedule(elements: [element(start, every: DateComponents(day: 1), zone: newYork), element(start, every: DateComponents(hour: 12), zone: newYork)])
        }
        #expect(throws: ScheduleError.noElements) { try Schedule(elements: []) }
        #expect(ScheduleError.sameStart(element: 1, otherElement: 0).description.contains("start at the same time"))
        // Only the components CareKit persists count: nanoseconds alone are no interval.
        #expect(throws: ScheduleError.zeroInterval(element: 0)) { try Schedule(elements: [element(start, every: DateComponents(nanosecond: 5), zone: newYork)]) }
    }

    @Test("weekly on a weekday starts on the first such day")
    func weekly() throws {
        // 2026-05-01 is a Friday; weekday 2 is Monday.
        let schedule = try Schedule.weeklyAtTime(weekday: 2, hours: 7, minutes: 30, start: local("2026-05-01", newYork), timeZone: newYork)
        let events = schedule.events(from: local("2026-05-01", newYork), to: local("2026-05-19", newYork))
        #expect(events.map { wall($0.start, newYork) } == ["2026-05-04 07:30", "2026-05-11 07:30", "2026-05-18 07:30"])
    }

    @Test("the day of month from a day number agrees with Foundation's Gregorian calendar, leap days and centuries included")
    func dayOfMonthArithmetic() {
        var utc = Calendar(identifier: .gregorian)
        utc.timeZone = TimeZone(identifier: "UTC")!
        // 1900-01-01 to 2199-12-31, every day of a sample of years, and every 7th day elsewhere.
        var mismatches: [Int] = []
        for day in stride(from: -25_567, through: 84_005, by: 1) where day % 7 == 0 || (10_957...11_322).contains(day) || (47_482...47_847).contains(day) {
            let expected = utc.component(.day, from: Date(timeIntervalSince1970: Double(day) * 86_400))
            if OccurrenceSeries.Segment.dayOfMonth(localDay: day) != expected { mismatches.append(day) }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
        #expect(OccurrenceSeries.Segment.dayOfMonth(localDay: 11_016) == 29)  // 2000-02-29
        #expect(OccurrenceSeries.Segment.dayOfMonth(localDay: 47_541) == 1)   // 2100-03-01 (2100 is no leap year)
    }
}

@Suite("Task versions and adherence")
struct TaskEventTests {
    let planUUID = UUID()

    @Test("a version change mid-series: each version numbers its own events and is clipped to its span; a tombstone ends the task")
    func versionChange() throws {
        var v1 = CareTask(id: "walk", title: "Walk", carePlanUUID: planUUID,
                          schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: local("2026-03-01", newYork), timeZone: newYork))
        v1.effectiveDate = local("2026-03-01", newYork)
        var v2 = CareTask(id: "walk", title: "Walk later", carePlanUUID: planUUID,
                          schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: local("2026-03-05", newYork), timeZone: newYork))
        v2.effectiveDate = local("2026-03-05", newYork)
        var v3 = v2
        v3.uuid = UUID()
        v3.effectiveDate = local("2026-03-07", newYork)
        v3.deletedDate = v3.effectiveDate
        let events = CareTask.events(of: [v3, v1, v2], from: local("2026-03-03", newYork), to: local("2026-03-09", newYork))
        #expect(events.map { wall($0.scheduleEvent.start, newYork) } == ["2026-03-03 08:00", "2026-03-04 08:00", "2026-03-05 09:00", "2026-03-06 09:00"])
        #expect(events.map(\.occurrence) == [2, 3, 0, 1])
        #expect(events.map { $0.task.uuid } == [v1.uuid, v1.uuid, v2.uuid, v2.uuid])
    }

    @Test("adherence per day and per task: target values compared, as-needed tasks excluded")
    func adherence() throws {
        let start = local("2026-05-01", newYork)
        let target = OutcomeValue(.double(500), kind: "dose", units: "mg")
        var pill = CareTask(id: "metformin", title: "Metformin", carePlanUUID: planUUID,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, targetValues: [target], timeZone: newYork))
        pill.effectiveDate = start
        var prn = CareTask(id: "prn", title: "Nitroglycerin", carePlanUUID: planUUID,
                           schedule: try Schedule.asNeeded(start: start, timeZone: newYork), impactsAdherence: false)
        prn.effectiveDate = start
        let outcomes = [
            Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 0, values: [OutcomeValue(.double(500), kind: "dose")]),
            Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.double(250), kind: "dose")]),
            Outcome(taskUUID: prn.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.boolean(true))]),
        ]
        let end = local("2026-05-04", newYork)
        let events = CareTask.events(of: [pill], from: start, to: end, outcomes: outcomes)
            + CareTask.events(of: [prn], from: start, to: end, outcomes: outcomes)
        let days = Adherence.daily(events: events, from: start, to: end, calendar: Schedule.calendar(newYork))
        #expect(days.map(\.adherence.value) == [1, 0, 0])
        #expect(days.map(\.adherence.expected) == [1, 1, 1])
        let halfCredit = Adherence.daily(events: events, from: start, to: end, calendar: Schedule.calendar(newYork), aggregator: .outcomeExists)
        #expect(halfCredit.map(\.adherence.value) == [1, 1, 0])
        let perTask = Adherence.perTask(events: events)
        #expect(perTask["metformin"]?.value == 1.0 / 3.0)
        #expect(perTask["prn"]?.value == nil)
        #expect(Adherence(events: []).value == nil)
    }
}

@Suite("Schedule constructors")
struct ScheduleConstructorTests {
    let zone = TimeZone(identifier: "America/New_York")!

    @Test("an end not after the start, a clock time or a weekday out of range are thrown, not trapped or looped on")
    func invalidArguments() throws {
        let start = local("2026-05-01", zone)
        #expect(throws: ScheduleError.endBeforeStart(element: 0)) { try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, end: start, timeZone: zone) }
        #expect(throws: ScheduleError.endBeforeStart(element: 0)) { try Schedule.allDay(start: start, end: start.addingTimeInterval(-60), timeZone: zone) }
        #expect(throws: ScheduleError.endBeforeStart(element: 0)) {
            try Schedule.weeklyAtTime(weekday: 2, hours: 7, minutes: 30, start: start, end: local("2026-05-02", zone), timeZone: zone)
        }
        #expect(throws: ScheduleError.invalidWeekday(8)) { try Schedule.weeklyAtTime(weekday: 8, hours: 7, minutes: 0, start: start, timeZone: zone) }
        #expect(throws: ScheduleError.invalidWeekday(0)) { try Schedule.weeklyAtTime(weekday: 0, hours: 7, minutes: 0, start: start, timeZone: zone) }
        #expect(throws: ScheduleError.invalidClockTime(hour: 24, minutes: 0)) { try Schedule.dailyAtTime(hour: 24, minutes: 0, start: start, timeZone: zone) }
        #expect(throws: ScheduleError.invalidClockTime(hour: 8, minutes: -1)) { try Schedule.dailyAtTime(hour: 8, minutes: -1, start: start, timeZone: zone) }
        #expect(ScheduleError.invalidClockTime(hour: 8, minutes: 5).description == "8:05 is not a clock time (hours 0...23, minutes 0...59)")
        // Valid arguments still work, every weekday of the week.
        for weekday in 1...7 {
            let schedule = try Schedule.weeklyAtTime(weekday: weekday, hours: 7, minutes: 0, start: start, timeZone: zone)
            let first = try #require(schedule.events(from: start, to: local("2026-05-08", zone)).first)
            #expect(Schedule.calendar(zone).component(.weekday, from: first.start) == weekday)
        }
    }
}
