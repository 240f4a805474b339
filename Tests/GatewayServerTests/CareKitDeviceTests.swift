import CareStore
import FHIRClient
import Foundation
@testable import Gateway
@testable import GatewayServer
import Testing

extension GatewayServerSuites {
@Suite("CareKitDevice: the app's side over loopback")
struct CareKitDeviceTests {
    static let zone = TimeZone(identifier: "America/New_York")!

    @Test("enroll, pull into a store of its own, record the days' outcomes and push them once; John's plan never reaches Maria's device; refusals name the route", arguments: Backend.allCases)
    func deviceRoundTrip(backend: Backend) async throws {
        guard let (store, tasks) = try twoPatientStore(backend) else { return }
        let server = try await RunningServer(store: store)
        defer { Task { try? await server.stop() } }
        let gateway = "http://127.0.0.1:\(server.port)"
        let transport = CurlTransport()

        await #expect(throws: CareKitDeviceError.self) { try await CareKitDevice.enroll(gateway: gateway, code: "AAAAA-AAAAA", transport: transport) }
        do {
            _ = try await CareKitDevice.enroll(gateway: gateway, code: "AAAAA-AAAAA", transport: transport)
        } catch {
            #expect(error.description == "POST /carekit/v1/enroll: HTTP 401: the enrollment code is wrong, used or expired", "\(error)")
        }
        let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
        let (token, patient) = try await CareKitDevice.enroll(gateway: gateway, code: code, transport: transport)
        #expect(patient == "maria")

        // The pull: Maria's patient, plan and task, nothing of John's.
        let device = CareKitDevice(gateway: gateway, token: token, transport: transport)
        let local = try SQLiteCarePlanStore(inMemory: ())
        let (pulled, knowledge) = try await device.pull(into: local)
        #expect(pulled == 3 && !knowledge.clocks.isEmpty)
        #expect(try local.fetchTasks().map(\.id) == ["walk-maria"])

        // Three days of walks, every third missed: two outcomes, merged once.
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = Self.zone
        let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
        let events = try local.events(from: start, to: start.addingTimeInterval(3 * 86_400), tasks: EntityQuery())
        let outcomes = RecordedValues().outcomes(for: events, skip: 3, calendar: calendar)
        #expect(outcomes.map(\.taskOccurrenceIndex) == [0, 1] && outcomes.allSatisfy { $0.values.first?.value == .boolean(true) })
        let answer = try await device.push(outcomes, knowing: knowledge, clock: 1)
        #expect(answer["merged"]?.numberValue == 2)
        #expect(try store.fetchOutcomes().count == 2)
        #expect(try store.fetchOutcomes().allSatisfy { $0.taskUUID == tasks["maria"]!.uuid })

        // A revoked device's calls are refused, naming the route.
        let id = try #require(try store.devices(patientID: "maria").first?.id)
        #expect(try store.revokeDevice(id: id, at: Date()))
        let another = try SQLiteCarePlanStore(inMemory: ())
        do {
            _ = try await device.pull(into: another)
            Issue.record("a revoked device pulled")
        } catch {
            #expect(error.description.hasPrefix("GET /carekit/v1/revisions: HTTP 401"), "\(error)")
        }
    }

    @Test("a next link is followed only on the gateway's sync API: another host, a URL or a user part is refused, so the token never leaves")
    func nextLinks() throws {
        #expect(try CareKitDevice.nextLink(#"</carekit/v1/revisions?limit=5&cursor=3.0>; rel="next""#, on: "/x") == "/carekit/v1/revisions?limit=5&cursor=3.0")
        #expect(try CareKitDevice.nextLink(nil, on: "/x") == nil)
        #expect(try CareKitDevice.nextLink(#"</carekit/v1/revisions>; rel="prev""#, on: "/x") == nil)
        for hostile in ["//evil.example/carekit/v1/revisions", "http://evil.example/carekit/", "/carekit@evil.example/", "@evil.example/carekit/",
                        "/carekit/..\\evil"] {
            #expect(throws: CareKitDeviceError.self, "\(hostile)") { try CareKitDevice.nextLink("<\(hostile)>; rel=\"next\"", on: "/x") }
        }
    }

    @Test("measured values move a little by day; target values and plain done are recorded as they are")
    func recordedValues() throws {
        let zone = Self.zone
        let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
        var weight = CareTask(id: "weight", title: "Weight", carePlanUUID: nil,
                              schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
        weight.groupIdentifier = "29463-7"
        let values = RecordedValues(byGroup: ["29463-7": [OutcomeValue(.double(80), kind: "29463-7", units: "kg")]])
        let event = try #require(CareTask.events(of: [weight], from: start, to: start.addingTimeInterval(86_400), outcomes: []).first)
        let days = (0..<5).map { values.values(for: event, day: $0).first!.value }
        #expect(Set(days.map { "\($0)" }).count == 5, "\(days)")
        #expect(days.allSatisfy { if case .double(let x) = $0 { abs(x - 80) <= 1.6 } else { false } })
        #expect(values.values(for: event, day: 0).first?.units == "kg")
        weight.groupIdentifier = "other"
        #expect(values.values(for: TaskEvent(task: weight, scheduleEvent: event.scheduleEvent, outcome: nil), day: 3).first?.value == .boolean(true))
    }
}
}
