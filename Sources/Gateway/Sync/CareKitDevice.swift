import CareStore
import FHIRClient
import Foundation
import Mapping
import JSON

/// A CareKit app's side of `caregate serve`'s sync API, for trying a gateway or a deployment
/// without an iPhone: it enrolls with a code, pulls the patient's versions into a store of its
/// own, and pushes outcomes with its knowledge vector, as `CareGateRemote.swift` does in an app.
///
/// ```swift
/// let (token, patient) = try await CareKitDevice.enroll(gateway: "http://127.0.0.1:8080", code: "KX7P2-M9QRT", transport: CurlTransport())
/// let device = CareKitDevice(gateway: "http://127.0.0.1:8080", token: token, transport: CurlTransport())
/// let local = try SQLiteCarePlanStore(inMemory: ())
/// let knowledge = try await device.pull(into: local).knowledge
/// let answer = try await device.push(outcomes, knowing: knowledge, clock: 1)
/// ```
public struct CareKitDevice: Sendable {
    /// The gateway's base URL.
    public var gateway: String
    /// The device token enrollment gave.
    public var token: String
    /// How requests are sent.
    public var transport: any HTTPTransport
    /// The device's own CareKit process, whose clock its pushes carry.
    public var process: UUID

    /// A device with its token; `process` is its own CareKit process.
    public init(gateway: String, token: String, transport: any HTTPTransport, process: UUID = UUID()) {
        self.gateway = gateway.hasSuffix("/") ? String(gateway.dropLast()) : gateway
        self.token = token
        self.transport = transport
        self.process = process
    }

    /// Exchanges an enrollment code for the device's token and its patient.
    public static func enroll(gateway: String, code: String, transport: any HTTPTransport) async throws(CareKitDeviceError) -> (token: String, patientID: String) {
        let device = CareKitDevice(gateway: gateway, token: "", transport: transport)
        var body = Array(#"{"code": "#.utf8)
        JSONEscaping.appendQuoted(code, to: &body)
        let answer = try await device.send("POST", "/carekit/v1/enroll", body: String(decoding: body + [0x7D], as: UTF8.self))
        guard let token = answer.json["token"]?.stringValue, let patient = answer.json["patientID"]?.stringValue else {
            throw .malformed(route: "/carekit/v1/enroll", message: "no token and patientID in the answer")
        }
        return (token, patient)
    }

    /// Pulls every page of the patient's versions (a first pull: no vector) into `store`, as a
    /// CareKit app merges them; returns how many came and the gateway's catch-up vector.
    public func pull(into store: any CarePlanStore) async throws(CareKitDeviceError) -> (versions: Int, knowledge: KnowledgeVector) {
        var path: String? = "/carekit/v1/revisions"
        var count = 0
        var knowledge = KnowledgeVector()
        var asked: Set<String> = []
        while let next = path {
            // A page asked for twice would be a loop: the gateway's links move forward.
            guard asked.insert(next).inserted else { throw .malformed(route: next, message: "the next link repeats a page already read") }
            let page = try await send("GET", next)
            for (i, revision) in (page.json["revisions"]?.arrayValue ?? []).enumerated() {
                let record: RevisionRecord
                do { record = try RevisionRecord(json: revision) } catch {
                    throw .malformed(route: next, message: "revisions[\(i)]: \(error)")
                }
                do { _ = try store.merge(record) } catch { throw .store(error) }
                count += record.entities.count
            }
            if let vector = page.json["knowledgeVector"], vector != .null {
                do { knowledge = try KnowledgeVector(json: vector) } catch { throw .malformed(route: next, message: "knowledgeVector: \(error)") }
            }
            path = try Self.nextLink(page.headers["link"], on: next)
        }
        return (count, knowledge)
    }

    /// Pushes outcomes the patient recorded as one revision record, with the gateway's knowledge
    /// and this device's clock; returns the gateway's answer (`merged`, `conflicts`, its vector).
    public func push(_ outcomes: [Outcome], knowing knowledge: KnowledgeVector, clock: Int) async throws(CareKitDeviceError) -> JSONValue {
        let vector = knowledge.setting(process, to: clock)
        let record = RevisionRecord(entities: outcomes.map(CareEntity.outcome), knowledgeVector: vector.processes)
        let body = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(vector.json)}"#
        return try await send("POST", "/carekit/v1/revisions", body: body).json
    }

    /// The path of a `Link: <…>; rel="next"` header. Only a path on the gateway itself is
    /// followed: the token goes with it, so a link to another host (`//host`, a URL) is refused.
    static func nextLink(_ header: String?, on route: String) throws(CareKitDeviceError) -> String? {
        guard let header, header.contains("rel=\"next\""), let open = header.firstIndex(of: "<"),
              let close = header[open...].firstIndex(of: ">") else { return nil }
        let path = String(header[header.index(after: open)..<close])
        guard path.hasPrefix("/carekit/"), !path.contains("@"), !path.contains("\\") else {
            throw .malformed(route: route, message: "a next link off the gateway's sync API: \(path.prefix(100))")
        }
        return path
    }

    func send(_ method: String, _ path: String, body: String? = nil) async throws(CareKitDeviceError) -> (json: JSONValue, headers: [String: String]) {
        var headers = [("Accept", "application/json")]
        if !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
        if body != nil { headers.append(("Content-Type", "application/json")) }
        let response: HTTPResponse
        do { response = try await transport.send(HTTPRequest(method: method, url: gateway + path, headers: headers, body: body.map { Array($0.utf8) })) } catch {
            throw .network(error)
        }
        let json = (try? JSONValue.parse(response.body)) ?? .null
        guard response.status == 200 else {
            throw .refused(route: "\(method) \(path.prefix { $0 != "?" })", status: response.status, message: json["error"]?["message"]?.stringValue ?? "")
        }
        return (json, response.headers)
    }
}

/// What the device records for an event: the values given for its task's group (measurements,
/// which move a little from day to day, as a patient's do), else the task's target values (a dose
/// taken as prescribed), else `true` (done).
public struct RecordedValues: Sendable {
    /// Values by task group (`85354-9`, `walk`).
    public var byGroup: [String: [OutcomeValue]]

    /// Values to record, by task group.
    public init(byGroup: [String: [OutcomeValue]] = [:]) {
        self.byGroup = byGroup
    }

    /// Whether a task is a survey (it names its form: `SurveyTask.questionnaireKey`).
    public static func isSurvey(_ task: CareTask) -> Bool { task.version.userInfo?[SurveyTask.questionnaireKey] != nil }

    /// The values of the `day`th day's event.
    public func values(for event: TaskEvent, day: Int) -> [OutcomeValue] {
        guard let measured = event.task.groupIdentifier.flatMap({ byGroup[$0] }) else {
            let targets = event.scheduleEvent.element.targetValues.map { OutcomeValue($0.value, kind: $0.kind, units: $0.units) }
            return targets.isEmpty ? [OutcomeValue(.boolean(true))] : targets
        }
        let step = Double((day * 3) % 5 - 2) / 100
        return measured.map { value in
            var moved = OutcomeValue(value.value, kind: value.kind, units: value.units)
            switch value.value {
            case .double(let x): moved.value = .double(((x * (1 + step)) * 10).rounded() / 10)
            case .integer(let n): moved.value = .integer(n + Int((Double(n) * step).rounded()))
            default: break
            }
            return moved
        }
    }

    /// Outcomes for the events without one, skipping every `skip`th of each task (a patient
    /// misses some; counted per task, so which are missed does not hang on where the window
    /// starts, and a weekly task's one event in a week is kept). Survey tasks are left alone:
    /// their answers are a form's (a `true` would be refused as not answering it, and wait in
    /// the dead letters).
    public func outcomes(for events: [TaskEvent], skip: Int, calendar: Calendar) -> [Outcome] {
        let first = events.map(\.scheduleEvent.start).min() ?? Date()
        var seen: [UUID: Int] = [:]
        return events.compactMap { event in
            let i = seen[event.task.uuid, default: 0]
            seen[event.task.uuid] = i + 1
            guard event.outcome == nil, skip < 1 || i % skip != skip - 1, !Self.isSurvey(event.task) else { return nil }
            let day = calendar.dateComponents([.day], from: calendar.startOfDay(for: first), to: event.scheduleEvent.start).day ?? 0
            var outcome = Outcome(taskUUID: event.task.uuid, taskOccurrenceIndex: event.occurrence, values: values(for: event, day: day),
                                  effectiveDate: event.scheduleEvent.start, timezone: calendar.timeZone)
            outcome.version.uuid = UUID()
            return outcome
        }
    }
}

/// Why a device's call did not go through, naming the route.
public enum CareKitDeviceError: Error, Sendable, CustomStringConvertible {
    /// The gateway could not be reached.
    case network(TransportError)
    /// The gateway answered with an error status and message.
    case refused(route: String, status: Int, message: String)
    /// The gateway's answer was not what the sync API sends.
    case malformed(route: String, message: String)
    /// The device's own store failed.
    case store(StoreError)

    public var description: String {
        switch self {
        case .network(let error): "the gateway did not answer: \(error)"
        case .refused(let route, let status, let message): "\(route): HTTP \(status)\(message.isEmpty ? "" : ": " + message)"
        case .malformed(let route, let message): "\(route): \(message)"
        case .store(let error): "the device's own store: \(error)"
        }
    }
}
