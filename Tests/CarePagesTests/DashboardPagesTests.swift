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
        let rows = try PatientOverview.withLastPushes(try store.read { try PatientOverview.all(in: $0, devices: devices, now: day(25, hour: 12)) }, from: store)
        #expect(rows.count == 1)
        #expect(rows[0].plans == 1 && rows[0].tasks == 2 && rows[0].devices == 1 && rows[0].lastSync == synced)
        #expect(try #require(rows[0].lastPush) >= before.addingTimeInterval(-1))
        // Nov 18 12:00 to Nov 25 12:00: 7 walks + 7 weights due (walks done on the 25th), 8 weights done (the 18th's 07:00 is before).
        #expect(rows[0].last7Days.expected == 14)
        let html = pages.patients(rows)
        #expect(html.contains("href=\"/ui/patients/maria\"") && html.contains("Maria &lt;b&gt;López&lt;/b&gt;"))
        #expect(pages.patients([]).contains("No patients yet"))
        #expect(DashboardPages.pathSegment("a/b c?é") == "a%2Fb%20c%3F%C3%A9")
    }
}
