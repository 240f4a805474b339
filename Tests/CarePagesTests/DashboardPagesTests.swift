import CareCharts
import CareStore
import Foundation
import Testing
@testable import CarePages

/// Maria's plan from November 16: a daily walk (done on the 16th and 18th, and today, the 25th, under its second version) and
/// a weight each morning with a target range of 60 to 65 kg; a contact, and the walk's second
/// version from the 20th.
private func store() throws -> SQLiteCarePlanStore {
    let store = try SQLiteCarePlanStore(inMemory: ())
    let start = day(16)
    let patient = Patient(id: "maria", name: PersonName(givenName: "Maria", familyName: "<b>López</b>"), effectiveDate: start, timezone: newYork)
    let plan = CarePlan(id: "plan", title: "Heart failure", patientUUID: patient.uuid, effectiveDate: start, timezone: newYork)
    var walk = CareTask(id: "walk", title: "Walk", carePlanUUID: plan.uuid,
                        schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
    walk.effectiveDate = start
    walk.instructions = "Twenty minutes <outside>"
    var weight = CareTask(id: "weight", title: "Weight", carePlanUUID: plan.uuid, schedule: try Schedule.dailyAtTime(
        hour: 7, minutes: 0, start: start, targetValues: [OutcomeValue(.double(60), units: "kg"), OutcomeValue(.double(65), units: "kg")],
        timeZone: newYork), timezone: newYork)
    weight.effectiveDate = start
    var contact = Contact(id: "dr-lee", name: PersonName(givenName: "Ann", familyName: "Lee"), carePlanUUID: plan.uuid, effectiveDate: start, timezone: newYork)
    contact.role = "Cardiologist"
    contact.phoneNumbers = [LabeledValue(label: "work", value: "+1 555 0100")]
    var entities: [CareEntity] = [.patient(patient), .carePlan(plan), .task(walk), .task(weight), .contact(contact)]
    for occurrence in [0, 2] {
        entities.append(.outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: occurrence, values: [],
                                         effectiveDate: day(16 + occurrence, hour: 9), timezone: newYork)))
    }
    for occurrence in 0..<10 {
        entities.append(.outcome(Outcome(taskUUID: weight.uuid, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.double(68 - 0.5 * Double(occurrence)), units: "kg")],
                                         effectiveDate: day(16 + occurrence, hour: 7), timezone: newYork)))
    }
    try store.add(entities)
    var walk2 = walk
    walk2.instructions = "Thirty minutes"
    walk2.effectiveDate = day(20)
    let updated = try store.update([.task(walk2)])
    guard case .task(let current) = updated[0] else { throw StoreError.database(path: "", message: "no task version") }
    try store.add([.outcome(Outcome(taskUUID: current.uuid, taskOccurrenceIndex: 9, values: [], effectiveDate: day(25, hour: 9), timezone: newYork))])
    return store
}

@Suite("The dashboard's pages")
struct DashboardPagesTests {
    let pages = DashboardPages(frame: DashboardFrame(csrf: "c5rf-t0ken"), calendar: calendar)

    @Test("a patient's page: the week's seven rings, today's tasks as CareKit lists them, charts with the weight's target band, contacts, every task version; names escaped")
    func patientPage() throws {
        let store = try store()
        let now = day(25, hour: 12)  // a Wednesday
        let page = try store.read { try PatientDashboard(patientID: "maria", now: now, calendar: calendar, devices: [], in: $0) }
        #expect(page.week.count == 7 && calendar.component(.weekday, from: page.week[0].day) == 1)
        #expect(page.week.map(\.adherence.expected) == [2, 2, 2, 2, 2, 2, 2])
        #expect(page.today.map(\.task.id) == ["weight", "walk"])
        #expect(page.summary.measured.first?.series.first?.target == 60...65)
        #expect(page.taskVersions.map(\.instructions) == ["Thirty minutes", "Twenty minutes <outside>", nil])

        let html = pages.patient(page)
        #expect(count("<g class=\"ring\"", in: html) == 7)
        #expect(html.contains("Maria &lt;b&gt;López&lt;/b&gt;") && !html.contains("<b>López"))
        #expect(html.contains("Thirty minutes") && html.contains("09:00: done") == false)  // today's walk is version 2's, done at 08:00
        #expect(html.contains("08:00: done") && html.contains("07:00: done, 63.5 kg"))
        #expect(html.contains("class=\"target\""))
        #expect(html.contains("Cardiologist") && html.contains("+1 555 0100"))
        #expect(count("name=\"csrf\" value=\"c5rf-t0ken\"", in: html) == 1)  // the sign-out form
        // Nothing from elsewhere: every link and the stylesheet are the gateway's own paths.
        #expect(count("href=\"", in: html) == count("href=\"/", in: html) + count("href=\"data:,\"", in: html) && !html.contains("src=") && !html.contains("<script"))
    }

    @Test("a patient's page holds that patient's data only: another patient with the same plan, task and contact ids shows nothing on it, and an unknown id gives no page")
    func patientPageBoundary() throws {
        let store = try store()
        let start = day(16)
        let john = Patient(id: "john", name: PersonName(givenName: "John", familyName: "Zed"), effectiveDate: start, timezone: newYork)
        let plan = CarePlan(id: "plan", title: "Johns plan", patientUUID: john.uuid, effectiveDate: start, timezone: newYork)
        var walk = CareTask(id: "walk", title: "Johns swim", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 6, minutes: 15, start: start, timeZone: newYork), timezone: newYork)
        walk.effectiveDate = start
        walk.instructions = "Johns laps"
        var contact = Contact(id: "dr-lee", name: PersonName(givenName: "Johns", familyName: "Doctor"), carePlanUUID: plan.uuid, effectiveDate: start, timezone: newYork)
        contact.phoneNumbers = [LabeledValue(label: "work", value: "+1 555 0999")]
        try store.add([.patient(john), .carePlan(plan), .task(walk), .contact(contact),
                       .outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: 9, values: [OutcomeValue(.double(99.5), units: "kg")],
                                        effectiveDate: day(25, hour: 6), timezone: newYork))])
        let now = day(25, hour: 12)
        let maria = pages.patient(try store.read { try PatientDashboard(patientID: "maria", now: now, calendar: calendar, devices: [], in: $0) })
        for johns in ["Johns", "Zed", "+1 555 0999", "99.5", "06:15"] { #expect(!maria.contains(johns), "Maria's page shows John's \(johns)") }
        let johnPage = pages.patient(try store.read { try PatientDashboard(patientID: "john", now: now, calendar: calendar, devices: [], in: $0) })
        #expect(johnPage.contains("Johns swim") && johnPage.contains("06:15: done, 99.5 kg"))
        for marias in ["López", "Thirty minutes", "Cardiologist", "+1 555 0100", "63.5"] { #expect(!johnPage.contains(marias), "John's page shows Maria's \(marias)") }
        #expect(throws: PageError.self) { try store.read { try PatientDashboard(patientID: "nobody", now: now, calendar: calendar, devices: [], in: $0) } }
    }

    @Test("a patient's page shows their days and clock times in their own time zone, not the gateway's")
    func patientTimeZone() throws {
        let tokyo = TimeZone(identifier: "Asia/Tokyo")!
        let store = try SQLiteCarePlanStore(inMemory: ())
        let start = day(16)
        let patient = Patient(id: "aiko", name: PersonName(givenName: "Aiko"), effectiveDate: start, timezone: tokyo)
        let plan = CarePlan(id: "plan", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: tokyo)
        var pill = CareTask(id: "pill", title: "Pill", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: tokyo), timezone: tokyo)
        pill.effectiveDate = start
        try store.add([.patient(patient), .carePlan(plan), .task(pill)])
        // 20:00 on the 24th in New York is 10:00 on the 25th in Tokyo: the pill's 08:00 is today's there.
        let page = try store.read { try PatientDashboard(patientID: "aiko", now: day(24, hour: 20), calendar: calendar, devices: [], in: $0) }
        #expect(page.calendar.timeZone == tokyo)
        #expect(page.today.count == 1 && page.calendar.component(.day, from: page.today[0].scheduleEvent.start) == 25)
        let html = pages.patient(page)
        #expect(html.contains("times in Asia/Tokyo") && html.contains("08:00"), "\(html)")
        #expect(!html.contains("18:00"))  // the same instant on New York's clock
    }

    @Test("a measured series goes by the task's title when its values' kind is the task's own code (a weight's 29463-7), by its kind otherwise; targets follow the same name")
    func seriesNames() throws {
        var weight = CareTask(id: "weight", title: "Weight check", carePlanUUID: nil, schedule: try Schedule.dailyAtTime(
            hour: 7, minutes: 0, start: day(16), targetValues: [OutcomeValue(.double(60), kind: "29463-7", units: "kg"), OutcomeValue(.double(65), kind: "29463-7", units: "kg")],
            timeZone: newYork), timezone: newYork)
        weight.groupIdentifier = "29463-7"
        var pressure = CareTask(id: "bp", title: "Blood pressure", carePlanUUID: nil, schedule: weight.schedule, timezone: newYork)
        pressure.groupIdentifier = "85354-9"
        let outcomes = [
            PatientCareSummary.RecordedOutcome(event: day(16), taskID: "weight", taskTitle: "Weight check", values: [OutcomeValue(.double(64), kind: "29463-7", units: "kg")]),
            PatientCareSummary.RecordedOutcome(event: day(16), taskID: "bp", taskTitle: "Blood pressure",
                                               values: [OutcomeValue(.integer(130), kind: "8480-6", units: "mmHg"), OutcomeValue(.integer(80), kind: "8462-4", units: "mmHg")]),
        ]
        let measured = PatientCareSummary.measurements(of: [weight, pressure], in: outcomes)
        #expect(measured.map { $0.series.map(\.kind) } == [["Weight check"], ["8480-6", "8462-4"]])
        #expect(measured.first?.series.first?.target == 60...65)
    }

    @Test("the patient list: adherence over 7 and 30 days, the devices' last sync, the last push of an outcome; an empty store says what to do")
    func patientList() throws {
        let store = try store()
        let synced = day(25, hour: 10)
        let devices = [Device(id: "d1", patientID: "maria", tokenHash: "x", enrolledAt: day(16), lastSyncAt: synced),
                       Device(id: "d2", patientID: "maria", tokenHash: "y", enrolledAt: day(16), revokedAt: day(17))]
        // One of the week's weights was delivered to the EHR; another outcome is still queued.
        let weights = try store.fetchOutcomes().filter { $0.values.first?.units == "kg" }
        try store.enqueue(weights.prefix(2).map { OutboxItem(versionUUID: $0.uuid, entityID: Outcome.scopedID(patientID: "maria", outcomeID: $0.id),
                                                          idempotencyKey: "urn:caregate:outcome|maria/\($0.id)", payload: []) })
        let before = Date()
        try store.markPushed(weights[0].uuid, location: "https://ehr.example.org/fhir/Observation/1")
        let list = try store.read { try PatientOverview.page(1, in: $0, devices: devices, now: day(25, hour: 12)) }
        let rows = try PatientOverview.withLastPushes(list.rows, from: store)
        #expect(list.number == 1 && list.pages == 1 && list.total == 1)
        #expect(rows.count == 1)
        #expect(rows[0].plans == 1 && rows[0].tasks == 2 && rows[0].devices == 1 && rows[0].lastSync == synced)
        #expect(try #require(rows[0].lastPush) >= before.addingTimeInterval(-1))
        // Nov 18 12:00 to Nov 25 12:00: 7 walks + 7 weights due (walks done on the 25th), 8 weights done (the 18th's 07:00 is before).
        #expect(rows[0].last7Days.expected == 14)
        let html = pages.patients(PatientListPage(rows: rows, number: 1, pages: 1, total: 1, size: 50))
        #expect(html.contains("href=\"/ui/patients/maria\"") && html.contains("Maria &lt;b&gt;López&lt;/b&gt;") && !html.contains("class=\"pager\""))
        #expect(pages.patients(PatientListPage(rows: [], number: 1, pages: 1, total: 0, size: 50)).contains("No patients yet"))
        #expect(DashboardPages.pathSegment("a/b c?é") == "a%2Fb%20c%3F%C3%A9")
    }

    @Test("the patient list pages by name: 50 rows a page, each row's plans, tasks and adherence its own patient's, links before and after, a page past the last shows the last")
    func paging() throws {
        let store = try SQLiteCarePlanStore(inMemory: ())
        let start = day(16)
        var entities: [CareEntity] = []
        for n in 0..<120 {
            let patient = Patient(id: "p\(n)", name: PersonName(givenName: String(format: "Patient %03d", n)), effectiveDate: start, timezone: newYork)
            let plan = CarePlan(id: "plan", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: newYork)
            entities += [.patient(patient), .carePlan(plan)]
            for t in 0..<(n % 3 + 1) {
                var task = CareTask(id: "task\(t)", title: "Task", carePlanUUID: plan.uuid,
                                    schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: newYork), timezone: newYork)
                task.effectiveDate = start
                entities.append(.task(task))
            }
        }
        try store.add(entities)
        let now = day(25, hour: 12)
        let first = try store.read { try PatientOverview.page(1, in: $0, devices: [], now: now) }
        #expect(first.rows.count == 50 && first.pages == 3 && first.total == 120)
        #expect(first.rows.map(\.patient.id) == (0..<50).map { "p\($0)" })
        #expect(first.rows.allSatisfy { row in row.plans == 1 && row.tasks == Int(row.patient.id.dropFirst())! % 3 + 1 })
        #expect(first.rows.allSatisfy { $0.last7Days.expected == 7 * $0.tasks })
        let last = try store.read { try PatientOverview.page(3, in: $0, devices: [], now: now) }
        #expect(last.rows.map(\.patient.id) == (100..<120).map { "p\($0)" })
        #expect(try store.read { try PatientOverview.page(99, in: $0, devices: [], now: now) }.number == 3)
        let html = pages.patients(first)
        #expect(html.contains("Patients 1–50 of 120") && html.contains("href=\"/ui?page=2\"") && !html.contains("Previous"))
        let middle = pages.patients(try store.read { try PatientOverview.page(2, in: $0, devices: [], now: now) })
        #expect(middle.contains("href=\"/ui?page=1\"") && middle.contains("href=\"/ui?page=3\"") && middle.contains("Patients 51–100 of 120"))
    }
}
