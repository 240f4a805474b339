import CareCharts
import CareStore
import Foundation
import Testing
@testable import CarePages

/// A week of a patient with a hostile name: a daily dose taken on 5 days, blood pressure measured on 6.
private func week() throws -> (SQLiteCarePlanStore, DateInterval) {
    let store = try SQLiteCarePlanStore(inMemory: ())
    let start = day(16)
    let patient = Patient(id: "p1", name: PersonName(givenName: "<script>alert(1)</script>", familyName: "O'Hara & Sons"), effectiveDate: start, timezone: newYork)
    let plan = CarePlan(id: "plan", title: "Heart <b>failure</b>", patientUUID: patient.uuid, effectiveDate: start, timezone: newYork)
    var dose = CareTask(id: "dose", title: "Take furosemide", carePlanUUID: plan.uuid,
                        schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
    dose.effectiveDate = start
    var pressure = CareTask(id: "bp", title: "Blood pressure", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 9, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
    pressure.effectiveDate = start
    var entities: [CareEntity] = [.patient(patient), .carePlan(plan), .task(dose), .task(pressure)]
    for occurrence in [0, 1, 2, 4, 6] {
        entities.append(.outcome(Outcome(taskUUID: dose.uuid, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.boolean(true))],
                                         effectiveDate: day(16 + occurrence).addingTimeInterval(9 * 3600), timezone: newYork)))
    }
    for occurrence in 0..<6 {
        entities.append(.outcome(Outcome(taskUUID: pressure.uuid, taskOccurrenceIndex: occurrence, values: [
            OutcomeValue(.integer(130 - occurrence), kind: "systolic", units: "mmHg"),
            OutcomeValue(.integer(85 - occurrence), kind: "diastolic", units: "mmHg"),
        ], effectiveDate: day(16 + occurrence).addingTimeInterval(10 * 3600), timezone: newYork)))
    }
    try store.add(entities)
    return (store, DateInterval(start: day(16), end: day(23)))
}

@Suite("A patient's care report")
struct CarePlanReportTests {
    @Test("a day's adherence is the store's (an outcome with values, no targets set); outcomes are listed in event order")
    func summary() throws {
        let (store, range) = try week()
        let summary = try store.read { try PatientCareSummary(patientID: "p1", range: range, calendar: calendar, in: $0) }
        #expect(summary.days.map(\.adherence.expected) == [2, 2, 2, 2, 2, 2, 2])
        #expect(summary.days.map(\.adherence.completed) == [2, 2, 2, 1, 2, 1, 1])
        #expect(summary.outcomes.count == 11)
        #expect(summary.outcomes.map(\.event) == summary.outcomes.map(\.event).sorted())
        #expect(summary.measured.map(\.task.id) == ["bp"])
        #expect(summary.measured.first?.series.map(\.kind) == ["systolic", "diastolic"])
        #expect(summary.measured.first?.series.first?.values.map(\.value) == [130, 129, 128, 127, 126, 125])
        #expect(throws: PageError.self) { try store.read { try PatientCareSummary(patientID: "nobody", range: range, calendar: calendar, in: $0) } }
    }

    @Test("the report has an adherence bar per day, tasks done beside blood pressure, both pressures on one scale, a row per outcome; every name escaped, nothing from the network")
    func report() throws {
        let (store, range) = try week()
        let summary = try store.read { try PatientCareSummary(patientID: "p1", range: range, calendar: calendar, in: $0) }
        let html = CarePlanReport(summary).html()
        #expect(html.hasPrefix("<!doctype html>"))
        #expect(!html.contains("<script"))
        #expect(!html.contains("<b>failure"))
        #expect(html.contains("&lt;script&gt;alert(1)&lt;/script&gt; O&#39;Hara &amp; Sons"))
        #expect(html.contains("Nov 16, 2026 to Nov 22, 2026"))
        // Nothing to fetch: no sources, links, imports or URLs but the SVG namespace.
        for reference in ["src=", "href=", "@import", "url("] { #expect(!html.contains(reference)) }
        #expect(html.replacingOccurrences(of: "http://www.w3.org/2000/svg", with: "").range(of: "://") == nil)
        let adherence = try #require(html.components(separatedBy: #"id="adherence-title""#).dropFirst().first?.components(separatedBy: "</svg>").first)
        #expect(count(#"class="bar""#, in: adherence) == 7)
        let combined = try #require(html.components(separatedBy: #"id="combined-0-title""#).dropFirst().first?.components(separatedBy: "</svg>").first)
        #expect(count(#"class="bar""#, in: combined) == 7)
        #expect(count(#"class="point""#, in: combined) == 6)
        #expect(count(#"class="axis-unit""#, in: combined) == 2)
        #expect(count("<svg", in: html) == 3)  // adherence, combined, blood pressure (one scale for both)
        #expect(count(#"<circle class="point" data-series="1""#, in: html) == 6 + 6)  // diastolic; and blood pressure in the combined chart
        let table = try #require(html.components(separatedBy: #"<table class="outcomes">"#).last)
        #expect(count("<tr>", in: table) == 12)
        #expect(table.contains("systolic: 130 mmHg, diastolic: 85 mmHg"))
    }
}

@Suite("Events bounded per patient")
struct EventBoundTests {
    @Test("a task every second makes a patient's page and report a clear error naming the bound, not an allocation failure; another patient's page still reads")
    func everySecond() throws {
        let store = try SQLiteCarePlanStore(inMemory: ())
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
        for id in ["flood", "calm"] {
            let patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: zone)
            let plan = CarePlan(id: "plan", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
            let interval = id == "flood" ? DateComponents(second: 1) : DateComponents(day: 1)
            var task = CareTask(id: "task", title: "Task", carePlanUUID: plan.uuid,
                                schedule: try Schedule(elements: [ScheduleElement(start: start, interval: interval, calendar: Schedule.calendar(zone))]), timezone: zone)
            task.effectiveDate = start
            try store.add([.patient(patient), .carePlan(plan), .task(task)])
        }
        let month = DateInterval(start: start, duration: 30 * 86_400)
        let calendar = Schedule.calendar(zone)
        do {
            _ = try store.read { try PatientCareSummary(patientID: "flood", range: month, calendar: calendar, in: $0) }
            Issue.record("a month of a task every second was worked out")
        } catch {
            #expect("\(error)".contains("events in the range; at most 1000000 are worked out at once"), "\(error)")
        }
        #expect(try store.read { try PatientCareSummary(patientID: "calm", range: month, calendar: calendar, in: $0) }.events.count == 30)
        // A day of it is within the bound.
        #expect(try store.events(from: start, to: start.addingTimeInterval(3_600), tasks: EntityQuery(patientIDs: ["flood"])).count == 3_600)
    }
}
