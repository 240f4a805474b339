import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// One row of the Timing table: a Timing (FHIR JSON), the events it must give in a window from
/// the anchor (Monday 2 November 2026, 00:00 in New York), and the parts reported as losses.
struct TimingCase: CustomTestStringConvertible, Sendable {
    let name: String
    let timing: String
    let hours: Double
    let events: [String]
    var losses: [String] = []
    var unschedulable = false
    var testDescription: String { name }
}

let newYork = TimeZone(identifier: "America/New_York")!

func local(_ text: String) -> Date {
    var c = Calendar(identifier: .gregorian)
    c.timeZone = newYork
    let p = text.split(whereSeparator: { $0 == "-" || $0 == " " || $0 == ":" }).map { Int($0)! }
    return c.date(from: DateComponents(year: p[0], month: p[1], day: p[2], hour: p.count > 3 ? p[3] : 0, minute: p.count > 4 ? p[4] : 0))!
}

/// An R4 Timing read from JSON through a MedicationRequest's dosage (the reader reads resources).
func timing(_ json: String) throws -> R4.Timing {
    let text = """
        {"resourceType": "MedicationRequest", "status": "active", "intent": "order", "medicationCodeableConcept": {"text": "x"},
         "subject": {"reference": "Patient/p"}, "dosageInstruction": [{"timing": \(json)}]}
        """
    // Lenient: some rows hold codes outside the required value sets on purpose.
    let request = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(text).resource
    return try R4.Timing(request.first("dosageInstruction.timing")!)
}

func render(_ event: ScheduleEvent) -> String {
    let f = DateFormatter()
    f.locale = Locale(identifier: "en_US_POSIX")
    f.timeZone = newYork
    f.dateFormat = "MM-dd HH:mm"
    if case .allDay = event.element.duration {
        f.dateFormat = "MM-dd"
        return f.string(from: event.start) + " all-day"
    }
    if case .seconds(let s) = event.element.duration, s != 3600 {
        return f.string(from: event.start) + " +\(Int(s / 60))m"
    }
    return f.string(from: event.start)
}

let anchor = local("2026-11-02")

let timingCases: [TimingCase] = [
    // Timing.code through the site table.
    TimingCase(name: "BID", timing: #"{"code": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/v3-GTSAbbreviation", "code": "BID"}]}}"#,
               hours: 48, events: ["11-02 08:00", "11-02 20:00", "11-03 08:00", "11-03 20:00"]),
    TimingCase(name: "TID", timing: #"{"code": {"coding": [{"code": "TID"}]}}"#, hours: 24, events: ["11-02 08:00", "11-02 14:00", "11-02 20:00"]),
    TimingCase(name: "QID", timing: #"{"code": {"coding": [{"code": "QID"}]}}"#, hours: 24, events: ["11-02 08:00", "11-02 12:00", "11-02 16:00", "11-02 20:00"]),
    TimingCase(name: "QD", timing: #"{"code": {"coding": [{"code": "QD"}]}}"#, hours: 48, events: ["11-02 08:00", "11-03 08:00"]),
    TimingCase(name: "AM", timing: #"{"code": {"coding": [{"code": "AM"}]}}"#, hours: 24, events: ["11-02 08:00"]),
    TimingCase(name: "PM", timing: #"{"code": {"coding": [{"code": "PM"}]}}"#, hours: 24, events: ["11-02 18:00"]),
    TimingCase(name: "BED", timing: #"{"code": {"coding": [{"code": "BED"}]}}"#, hours: 24, events: ["11-02 21:00"]),
    TimingCase(name: "QOD", timing: #"{"code": {"coding": [{"code": "QOD"}]}}"#, hours: 96, events: ["11-02 08:00", "11-04 08:00"]),
    TimingCase(name: "Q4H", timing: #"{"code": {"coding": [{"code": "Q4H"}]}}"#, hours: 24,
               events: ["11-02 00:00", "11-02 04:00", "11-02 08:00", "11-02 12:00", "11-02 16:00", "11-02 20:00"]),
    TimingCase(name: "Q8H", timing: #"{"code": {"coding": [{"code": "Q8H"}]}}"#, hours: 24, events: ["11-02 00:00", "11-02 08:00", "11-02 16:00"]),
    TimingCase(name: "WK", timing: #"{"code": {"coding": [{"code": "WK"}]}}"#, hours: 24 * 14, events: ["11-02 08:00", "11-09 08:00"]),
    TimingCase(name: "MO", timing: #"{"code": {"coding": [{"code": "MO"}]}}"#, hours: 24 * 40, events: ["11-02 08:00", "12-02 08:00"]),
    TimingCase(name: "JB (weekdays)", timing: #"{"code": {"coding": [{"code": "JB"}]}}"#, hours: 24 * 7,
               events: ["11-02 08:00", "11-03 08:00", "11-04 08:00", "11-05 08:00", "11-06 08:00"]),
    TimingCase(name: "JE (weekend)", timing: #"{"code": {"coding": [{"code": "JE"}]}}"#, hours: 24 * 7, events: ["11-07 08:00", "11-08 08:00"]),
    TimingCase(name: "code text only", timing: #"{"code": {"text": "bid"}}"#, hours: 24, events: ["11-02 08:00", "11-02 20:00"]),
    TimingCase(name: "unknown code", timing: #"{"code": {"coding": [{"system": "http://example.org/local", "code": "AFTER-DIALYSIS"}], "text": "after dialysis"}}"#,
               hours: 24, events: [], unschedulable: true),
    // frequency and period without clock times: n all-day occurrences.
    TimingCase(name: "3 per day, no times", timing: #"{"repeat": {"frequency": 3, "period": 1, "periodUnit": "d"}}"#, hours: 24,
               events: ["11-02 all-day", "11-02 all-day", "11-02 all-day"]),
    TimingCase(name: "1 per day", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}}"#, hours: 48, events: ["11-02 all-day", "11-03 all-day"]),
    TimingCase(name: "frequencyMax", timing: #"{"repeat": {"frequency": 2, "frequencyMax": 4, "period": 1, "periodUnit": "d"}}"#, hours: 24,
               events: ["11-02 all-day", "11-02 all-day"], losses: ["repeat.frequencyMax"]),
    TimingCase(name: "periodMax", timing: #"{"repeat": {"frequency": 1, "period": 3, "periodMax": 5, "periodUnit": "d"}}"#, hours: 24 * 7,
               events: ["11-02 all-day", "11-05 all-day", "11-08 all-day"], losses: ["repeat.periodMax"]),
    TimingCase(name: "every other day", timing: #"{"repeat": {"period": 2, "periodUnit": "d", "timeOfDay": ["09:00:00"]}}"#, hours: 24 * 5,
               events: ["11-02 09:00", "11-04 09:00", "11-06 09:00"]),
    // dayOfWeek: one weekly element per day and time.
    TimingCase(name: "Mon and Thu", timing: #"{"repeat": {"period": 1, "periodUnit": "wk", "dayOfWeek": ["mon", "thu"]}}"#, hours: 24 * 7,
               events: ["11-02 all-day", "11-05 all-day"]),
    TimingCase(name: "Mon/Wed/Fri 09:00", timing: #"{"repeat": {"dayOfWeek": ["mon", "wed", "fri"], "timeOfDay": ["09:00:00"]}}"#, hours: 24 * 7,
               events: ["11-02 09:00", "11-04 09:00", "11-06 09:00"]),
    TimingCase(name: "every 2 weeks on Tue", timing: #"{"repeat": {"period": 2, "periodUnit": "wk", "dayOfWeek": ["tue"], "timeOfDay": ["10:30:00"]}}"#,
               hours: 24 * 28, events: ["11-03 10:30", "11-17 10:30"]),
    TimingCase(name: "twice a day on Sundays", timing: #"{"repeat": {"frequency": 2, "period": 1, "periodUnit": "d", "dayOfWeek": ["sun"]}}"#, hours: 24 * 7,
               events: ["11-08 all-day", "11-08 all-day"]),
    // when and offset through the site's meal and sleep times.
    TimingCase(name: "30 min before breakfast and dinner", timing: #"{"repeat": {"when": ["ACM", "ACV"], "offset": 30}}"#, hours: 24,
               events: ["11-02 07:00", "11-02 18:00"]),
    TimingCase(name: "1 h after lunch", timing: #"{"repeat": {"when": ["PCD"], "offset": 60}}"#, hours: 24, events: ["11-02 13:30"]),
    TimingCase(name: "15 min before bed", timing: #"{"repeat": {"when": ["HS"], "offset": 15}}"#, hours: 24, events: ["11-02 21:45"]),
    TimingCase(name: "30 min after morning", timing: #"{"repeat": {"when": ["MORN"], "offset": 30}}"#, hours: 24, events: ["11-02 08:30"]),
    TimingCase(name: "with meals", timing: #"{"repeat": {"frequency": 2, "period": 1, "periodUnit": "d", "when": ["CM", "CV"]}}"#, hours: 24,
               events: ["11-02 07:30", "11-02 18:30"]),
    TimingCase(name: "offset with a meal (tim-9)", timing: #"{"repeat": {"when": ["CM"], "offset": 15}}"#, hours: 24, events: ["11-02 07:30"], losses: ["repeat.offset"]),
    TimingCase(name: "when with timeOfDay (tim-10)", timing: #"{"repeat": {"when": ["MORN"], "timeOfDay": ["10:00:00"]}}"#, hours: 24,
               events: ["11-02 10:00"], losses: ["repeat.when"]),
    TimingCase(name: "unknown when code", timing: #"{"repeat": {"when": ["ICM"]}}"#, hours: 24, events: ["11-02 all-day"], losses: ["repeat.when[0]"]),
    TimingCase(name: "offset without when (tim-9)", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "offset": 10}}"#, hours: 24,
               events: ["11-02 all-day"], losses: ["repeat.offset"]),
    TimingCase(name: "frequency and times disagree", timing: #"{"repeat": {"frequency": 3, "period": 1, "periodUnit": "d", "timeOfDay": ["08:00:00", "20:00:00"]}}"#,
               hours: 24, events: ["11-02 08:00", "11-02 20:00"], losses: ["repeat.frequency"]),
    // count and bounds.
    TimingCase(name: "count and countMax", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "count": 10, "countMax": 12}}"#, hours: 24 * 15,
               events: (2...11).map { String(format: "11-%02d all-day", $0) }, losses: ["repeat.countMax"]),
    TimingCase(name: "BID, 3 doses", timing: #"{"code": {"coding": [{"code": "BID"}]}, "repeat": {"count": 3}}"#, hours: 24 * 4,
               events: ["11-02 08:00", "11-02 20:00", "11-03 08:00"]),
    TimingCase(name: "twice a day for 7 days", timing: #"{"repeat": {"frequency": 2, "period": 1, "periodUnit": "d", "boundsDuration": {"value": 7, "unit": "days", "system": "http://unitsofmeasure.org", "code": "d"}}}"#,
               hours: 24 * 10, events: (2...8).flatMap { [String(format: "11-%02d all-day", $0), String(format: "11-%02d all-day", $0)] }),
    TimingCase(name: "boundsPeriod with an inclusive end day", timing: #"{"code": {"coding": [{"code": "BID"}]}, "repeat": {"boundsPeriod": {"start": "2026-11-03", "end": "2026-11-04"}}}"#,
               hours: 24 * 5, events: ["11-03 08:00", "11-03 20:00", "11-04 08:00", "11-04 20:00"]),
    TimingCase(name: "boundsPeriod with an inclusive end instant", timing: #"{"code": {"coding": [{"code": "BID"}]}, "repeat": {"boundsPeriod": {"end": "2026-11-03T08:00:00-05:00"}}}"#,
               hours: 24 * 5, events: ["11-02 08:00", "11-02 20:00", "11-03 08:00"]),
    TimingCase(name: "boundsPeriod starting mid-day", timing: #"{"code": {"coding": [{"code": "BID"}]}, "repeat": {"boundsPeriod": {"start": "2026-11-02T12:00:00-05:00"}}}"#,
               hours: 36, events: ["11-02 20:00", "11-03 08:00"]),
    TimingCase(name: "boundsRange", timing: #"{"code": {"coding": [{"code": "QD"}]}, "repeat": {"boundsRange": {"low": {"value": 3, "code": "d", "system": "http://unitsofmeasure.org"}, "high": {"value": 5, "code": "d", "system": "http://unitsofmeasure.org"}}}}"#,
               hours: 24 * 7, events: ["11-02 08:00", "11-03 08:00", "11-04 08:00"], losses: ["repeat.boundsRange"]),
    // Durations.
    TimingCase(name: "30-minute walk", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "timeOfDay": ["17:30:00"], "duration": 30, "durationUnit": "min"}}"#,
               hours: 24, events: ["11-02 17:30 +30m"]),
    TimingCase(name: "durationMax", timing: #"{"repeat": {"timeOfDay": ["17:30:00"], "duration": 30, "durationMax": 45, "durationUnit": "min"}}"#,
               hours: 24, events: ["11-02 17:30 +30m"], losses: ["repeat.durationMax"]),
    TimingCase(name: "duration without unit (tim-1)", timing: #"{"repeat": {"timeOfDay": ["17:30:00"], "duration": 30}}"#, hours: 24,
               events: ["11-02 17:30"], losses: ["repeat.duration"]),
    // Weeks, months, years without days.
    TimingCase(name: "3 times a week", timing: #"{"repeat": {"frequency": 3, "period": 1, "periodUnit": "wk"}}"#, hours: 24 * 7,
               events: ["11-02 all-day", "11-04 all-day", "11-06 all-day"], losses: ["repeat.frequency"]),
    TimingCase(name: "once a week, no day", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "wk", "timeOfDay": ["07:00:00"]}}"#, hours: 24 * 14,
               events: ["11-02 07:00", "11-09 07:00"], losses: ["repeat.period"]),
    TimingCase(name: "twice a month", timing: #"{"repeat": {"frequency": 2, "period": 1, "periodUnit": "mo"}}"#, hours: 24 * 31,
               events: ["11-02 all-day", "11-17 all-day", "12-02 all-day"], losses: ["repeat.frequency"]),
    TimingCase(name: "yearly", timing: #"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "a", "timeOfDay": ["09:00:00"]}}"#, hours: 24 * 400,
               events: ["11-02 09:00", "11-02 09:00"]),
    // Hours and minutes: elapsed time, across the end of daylight saving time.
    TimingCase(name: "every 30 minutes", timing: #"{"repeat": {"frequency": 2, "period": 1, "periodUnit": "h"}}"#, hours: 2,
               events: ["11-02 00:00", "11-02 00:30", "11-02 01:00", "11-02 01:30"]),
    TimingCase(name: "every 8 hours from 06:00", timing: #"{"repeat": {"period": 8, "periodUnit": "h", "timeOfDay": ["06:00:00"]}}"#, hours: 24,
               events: ["11-02 06:00", "11-02 14:00", "11-02 22:00"]),
    TimingCase(name: "every 1.5 days", timing: #"{"repeat": {"period": 1.5, "periodUnit": "d"}}"#, hours: 72,
               events: ["11-02 00:00", "11-03 12:00"]),
    // Events.
    TimingCase(name: "two one-off events", timing: #"{"event": ["2026-11-02T09:00:00-05:00", "2026-11-04T15:00:00-05:00"]}"#, hours: 24 * 7,
               events: ["11-02 09:00", "11-04 15:00"]),
    TimingCase(name: "events beside a rule", timing: #"{"event": ["2026-11-03T09:00:00-05:00"], "repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}}"#, hours: 24 * 7,
               events: ["11-03 09:00"], losses: ["repeat"]),
    TimingCase(name: "bounds only", timing: #"{"repeat": {"boundsPeriod": {"start": "2026-11-02", "end": "2026-11-03"}}}"#, hours: 24 * 7,
               events: ["11-02 all-day", "11-03 all-day"], losses: ["repeat"]),
    TimingCase(name: "empty Timing", timing: #"{"id": "t1"}"#, hours: 24, events: [], unschedulable: true),
]

@Suite("Schedules from FHIR Timing")
struct TimingTableTests {
    @Test("the Timing table: every case gives its events and reports exactly its losses", arguments: timingCases)
    func table(_ row: TimingCase) throws {
        let converter = TimingConverter(timeZone: newYork)
        let result = converter.convert(try timing(row.timing), anchor: anchor)
        #expect((result.unschedulable != nil) == row.unschedulable, "\(result.unschedulable ?? "scheduled")")
        #expect(Set(result.losses.map(\.path)) == Set(row.losses), "\(result.losses)")
        guard let schedule = result.schedule else {
            #expect(row.events.isEmpty)
            return
        }
        let events = schedule.events(from: anchor, to: anchor.addingTimeInterval(row.hours * 3600)).map(render)
        #expect(events == row.events)
    }

    @Test("at least 40 Timing cases, covering every field of Timing.repeat and Timing.code")
    func coverage() {
        #expect(timingCases.count >= 40)
        let text = timingCases.map(\.timing).joined()
        for field in ["boundsDuration", "boundsRange", "boundsPeriod", "\"count\"", "countMax", "\"duration\"", "durationMax", "durationUnit",
                      "frequency", "frequencyMax", "\"period\"", "periodMax", "periodUnit", "dayOfWeek", "timeOfDay", "when", "offset", "event", "code"] {
            #expect(text.contains(field), "no case uses \(field)")
        }
    }

    @Test("every hour across the end of daylight saving time: 25 occurrences on 1 November 2026 in New York")
    func daylightSaving() throws {
        let converter = TimingConverter(timeZone: newYork)
        let result = converter.convert(try timing(#"{"code": {"coding": [{"code": "Q1H"}]}}"#), anchor: local("2026-11-01"))
        let events = result.schedule!.events(from: local("2026-11-01"), to: local("2026-11-02"))
        #expect(events.count == 25)
        #expect(zip(events, events.dropFirst()).allSatisfy { $1.start.timeIntervalSince($0.start) == 3600 })
    }

    @Test("a site table overrides meal times and codes")
    func siteTables() throws {
        var tables = TimingTables.standard
        tables.eventTimes["ACM"] = TimingTables.minutes("06:45")
        tables.codes["BID"] = TimingRule(timesOfDay: [TimingTables.minutes("09:00")!, TimingTables.minutes("21:00")!])
        let converter = TimingConverter(tables: tables, timeZone: newYork)
        let breakfast = converter.convert(try timing(#"{"repeat": {"when": ["ACM"]}}"#), anchor: anchor)
        #expect(breakfast.schedule!.events(from: anchor, to: anchor.addingTimeInterval(86_400)).map(render) == ["11-02 06:45"])
        let bid = converter.convert(try timing(#"{"code": {"coding": [{"code": "BID"}]}}"#), anchor: anchor)
        #expect(bid.schedule!.events(from: anchor, to: anchor.addingTimeInterval(86_400)).map(render) == ["11-02 09:00", "11-02 21:00"])
    }
}
