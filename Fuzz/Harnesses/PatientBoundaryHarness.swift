import CarePages
import CareStore
import FHIR
import Foundation
import Gateway
import JSON
import Mapping

/// The patient boundary end to end: whatever Maria's device pushes (any records, ids, uuids,
/// vectors, userInfo, `remoteID`s; `POST /carekit/v1/revisions` bodies, as `sync` takes them),
/// everything John's side shows is unchanged: his pull, his dashboard page, his report, and the
/// resources exported under his EHR subject (nothing reaches the EHR as John's but his own).
public enum PatientBoundaryHarness: FuzzHarness {
    public static let name = "patient-boundary"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (_, body) = input.selector
        guard let json = try? JSONValue.parse(body), let push = try? PushBody.read(json) else { return }
        let fixture = try SyncFixture.make()
        try BoundaryView.prepare(fixture.store)
        let before = try BoundaryView(fixture.store)
        let pushed = (try? fixture.sync.push(patientID: "maria", records: push.records, deviceKnowledge: push.deviceKnowledge)) != nil
        let after = try BoundaryView(fixture.store)
        for (what, changed) in before.differences(from: after) where changed {
            throw PropertyFailure("Maria's device (push \(pushed ? "accepted" : "refused")) changed John's \(what)")
        }
    }
}

/// What John's side shows, compared whole.
struct BoundaryView: Equatable {
    var pull: [UInt8]
    var page: String
    var report: String
    var exported: [String]

    static let now = Date(timeIntervalSinceReferenceDate: 815_202_000 + 9 * 86_400 + 12 * 3_600)
    static let johnEHR = "Patient/john-in-the-ehr"

    /// John as an import leaves him: his EHR id on a gateway version, and an outcome recorded.
    static func prepare(_ store: SQLiteCarePlanStore) throws(PropertyFailure) {
        do {
            guard var john = try store.fetchPatients(EntityQuery(ids: ["john"])).first,
                  let task = try store.fetchTasks(EntityQuery(ids: ["walk-john"], patientIDs: ["john"])).first else {
                throw PropertyFailure("the fixture has no John")
            }
            john.version.remoteID = johnEHR
            john.version.effectiveDate = john.effectiveDate.addingTimeInterval(3_600)
            try store.update([.patient(john)])
            let walked = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 2, values: [OutcomeValue(.boolean(true))],
                                 effectiveDate: task.effectiveDate.addingTimeInterval(2 * 86_400 + 9 * 3_600), timezone: task.timezone)
            try store.add([.outcome(walked)])
        } catch let failure as PropertyFailure {
            throw failure
        } catch {
            throw PropertyFailure("John could not be prepared: \(error)")
        }
    }

    init(_ store: SQLiteCarePlanStore) throws(PropertyFailure) {
        do {
            let sync = CareKitSync(store: store)
            var bytes: [UInt8] = []
            var cursor: CareKitSync.PullCursor?
            repeat {
                let page = try sync.pull(patientID: "john", since: KnowledgeVector(), limit: 1_000, cursor: cursor)
                bytes += page.bytes()
                cursor = page.next
            } while cursor != nil
            pull = bytes
            let calendar = Schedule.calendar(TimeZone(identifier: "America/New_York")!)
            let dashboard = try store.read { try PatientDashboard(patientID: "john", now: Self.now, calendar: calendar, devices: [], in: $0) }
            page = DashboardPages(frame: DashboardFrame(csrf: "csrf"), calendar: calendar).patient(dashboard)
            report = CarePlanReport(dashboard.summary).html()
            let export = OutcomeExport(store: store, builder: ObservationBuilder(codes: [:], timeZone: calendar.timeZone))
            let writer = FHIRJSONWriter(pretty: false)
            exported = try export.observations()
                .filter { $0.observation.first("subject")?.string("reference") == Self.johnEHR }
                .map { String(decoding: writer.write($0.observation), as: UTF8.self) }.sorted()
        } catch let failure as PropertyFailure {
            throw failure
        } catch {
            throw PropertyFailure("John's side could not be read: \(error)")
        }
    }

    func differences(from other: BoundaryView) -> [(String, Bool)] {
        [("pull", pull != other.pull), ("dashboard page", page != other.page), ("report", report != other.report),
         ("exports under his subject", exported != other.exported)]
    }
}
