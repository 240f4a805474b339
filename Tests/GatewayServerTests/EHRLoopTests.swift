import CareStore
import FHIR
import FHIRClient
import Foundation
import Gateway
import GatewayServer
import JSON
import Logging
import Testing
#if canImport(Glibc)
import Glibc
#endif

let serverProjectRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// One of FHIRSamples/json as a resource, edited as JSON first.
func sample(_ name: String, edit: (inout [String: Any]) -> Void = { _ in }) throws -> Element {
    let data = try Data(contentsOf: serverProjectRoot.appendingPathComponent("FHIRSamples/json/\(name).json"))
    var object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    edit(&object)
    return try FHIRJSONReader().read(Array(try JSONSerialization.data(withJSONObject: object))).resource
}

/// Maria's plan, running from ten days ago for a year, with the walk at `walkTime`.
func mariaPlan(walkTime: String) throws -> Element {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withFullDate]
    return try sample("CarePlan-maria-lopez-home-care") { plan in
        plan["period"] = ["start": formatter.string(from: Date().addingTimeInterval(-10 * 86_400)),
                          "end": formatter.string(from: Date().addingTimeInterval(365 * 86_400))]
        var activities = plan["activity"] as! [[String: Any]]
        for i in activities.indices {
            guard var detail = activities[i]["detail"] as? [String: Any], (detail["code"] as? [String: Any])?["text"] as? String == "30-minute walk" else { continue }
            var timing = detail["scheduledTiming"] as! [String: Any]
            var repeating = timing["repeat"] as! [String: Any]
            repeating["timeOfDay"] = [walkTime]
            timing["repeat"] = repeating
            detail["scheduledTiming"] = timing
            activities[i]["detail"] = detail
        }
        plan["activity"] = activities
    }
}

/// What a device holds after pulling: every entity version it was sent, and its vector.
struct DeviceCopy {
    var entities: [CareEntity] = []
    var vector = KnowledgeVector()

    /// Pulls every page since the device's vector; returns the versions received.
    @discardableResult
    mutating func pull(from server: RunningServer, token: String) async throws -> [CareEntity] {
        var path = "/carekit/v1/revisions?since=\(vector.base64URL)"
        var received: [CareEntity] = []
        while true {
            let page = try await server.send("GET", path, token: token)
            try #require(page.status == 200, "\(String(describing: page.body))")
            for record in page.body?["revisions"]?.arrayValue ?? [] { received += try RevisionRecord(json: record).entities }
            guard let link = page.headers["link"] else {
                if let catchUp = page.body?["knowledgeVector"], catchUp != .null { vector = vector.merged(with: try KnowledgeVector(json: catchUp)) }
                break
            }
            path = String(link.dropFirst().prefix { $0 != ">" })
        }
        entities += received
        return received
    }

    var tasks: [CareTask] { entities.compactMap { if case .task(let task) = $0 { task } else { nil } } }

    /// Today's events as the device works them out from the task versions it holds.
    func events(from start: Date, to end: Date) -> [TaskEvent] {
        Dictionary(grouping: tasks, by: \.id).values.flatMap { CareTask.events(of: $0, from: start, to: end) }
    }
}


extension GatewayServerSuites {
    @Suite("The EHR loop over HTTP, with sekmet-fhir as the EHR")
    struct EHRLoopTests {
        let zone = TimeZone(identifier: "America/New_York")!

        /// An `ehr:` link to the server, with the notification token in a file and the workers fast.
        func link(base: String, store: Backend.Store, notifyToken: String) throws -> EHRLink {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-ehr-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let tokenFile = folder.appendingPathComponent("notify.token").path
            try notifyToken.write(toFile: tokenFile, atomically: true, encoding: .utf8)
            var ehr = GatewayConfig.EHR(base: base)
            ehr.timeZone = zone
            ehr.pushSeconds = 1
            ehr.refreshSeconds = 3_600
            ehr.notifyToken = .file(tokenFile)
            ehr.connection.retry = RetryPolicy(maxAttempts: 2, baseDelay: 0.05, maxDelay: 0.2, maxTotal: 2)
            return try ehr.link(store: store, root: folder.path)
        }

        func observations(_ client: FHIRRESTClient, store: Backend.Store) async throws -> [String: Int] {
            var found: [String: Int] = [:]
            for item in try store.outbox(state: .pushed) + store.outbox(state: .queued) where !item.idempotencyKey.hasPrefix(OutboxItem.auditKeyPrefix) {
                found[item.idempotencyKey] = try await client.search("Observation", [("identifier", item.idempotencyKey)]).count
            }
            return found
        }

        @Test("the EHR's plan reaches a device, the device's outcomes reach the EHR once, and a changed plan reaches the device after the EHR notifies", arguments: Backend.allCases)
        func wholeLoop(backend: Backend) async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let client = FHIRRESTClient(base: ehr.base, retry: RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.5, maxTotal: 20), timeout: 20)
            let files = ["Patient-maria-lopez", "CareTeam-maria-lopez-care-team", "MedicationRequest-metformin", "MedicationRequest-furosemide",
                         "MedicationRequest-amoxicillin", "MedicationRequest-nitroglycerin-prn", "Practitioner-dr-amy-chen",
                         "Practitioner-nurse-james-okafor", "PractitionerRole-dr-amy-chen-endocrinology", "PractitionerRole-nurse-james-okafor-homecare"]
            for name in files { _ = try await client.update(try sample(name), at: "\(name.replacingOccurrences(of: "-", with: "/", options: [], range: name.range(of: "-")))") }
            _ = try await client.update(try mariaPlan(walkTime: "17:30:00"), at: "CarePlan/maria-lopez-home-care")

            // The care plan is seeded from the EHR (caregate import --from does the same), then the gateway serves.
            guard let store = try backend.freshStore() else { return }
            let link = try link(base: ehr.base, store: store, notifyToken: "notify-secret-1")
            let maria = EnrolledPatient(storeID: "Patient/maria-lopez", ehrID: "maria-lopez")
            guard case .imported(let seeded) = try await link.refresh.refresh(maria, since: nil) else { Issue.record("not imported"); return }
            #expect(seeded.failedPatients.isEmpty && seeded.counts[.create, default: 0] > 5, "\(seeded.counts)")
            // A refresh that changed the store is logged for the dashboard; one that found nothing new is not.
            #expect(try store.importRuns(limit: 10).map(\.source) == ["EHR refresh of Patient/maria-lopez"])
            #expect(try store.importRuns(limit: 10).first?.counts["create"] == seeded.counts[.create])
            _ = try await link.refresh.refresh(maria, since: nil)
            #expect(try store.importRuns(limit: 10).count == 1)
            let server = try await RunningServer(store: store, ehr: link, auditToEHR: true)
            let before = try await server.metrics()
            #expect(try await eventually { try await server.send("GET", "/readyz").status == 200 }, "the EHR never counted as reached")

            // A device enrolls and pulls; today's events on it are the store's (what `store events` prints).
            let code = try DeviceEnrollment(store: store).issueCode(patientID: maria.storeID).code
            let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
            var device = DeviceCopy()
            try await device.pull(from: server, token: token)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let today = calendar.startOfDay(for: Date())
            let tomorrow = calendar.date(byAdding: .day, value: 1, to: today)!
            let onDevice = device.events(from: today, to: tomorrow).map { "\($0.task.id) #\($0.occurrence) \($0.scheduleEvent.start)" }.sorted()
            let inStore = try store.events(from: today, to: tomorrow, tasks: EntityQuery()).map { "\($0.task.id) #\($0.occurrence) \($0.scheduleEvent.start)" }.sorted()
            #expect(onDevice == inStore && onDevice.count >= 3, "\(onDevice) vs \(inStore)")

            // The device records two of today's events; the push worker sends them to the EHR, once each.
            let todays = device.events(from: today, to: tomorrow).filter { $0.task.id.hasSuffix("/229065009") || $0.task.id.contains("85354-9") }.prefix(2)
            #expect(todays.count == 2)
            let process = UUID()
            let outcomes = todays.map { event in
                Outcome(taskUUID: event.task.uuid, taskOccurrenceIndex: event.occurrence,
                        values: [OutcomeValue(.boolean(true), createdDate: event.scheduleEvent.start)], effectiveDate: event.scheduleEvent.start)
            }
            let pushed = device.vector.setting(process, to: 1)
            let record = RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: pushed.processes)
            let body = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(pushed.json)}"#
            let answer = try await server.send("POST", "/carekit/v1/revisions", token: token, json: body)
            #expect(answer.status == 200 && answer.body?["merged"]?.numberValue == 2, "\(String(describing: answer.body))")
            // The outcomes, not the AuditEvents (ehr.audit) pushed beside them.
            let outcomesPushed = { try store.outbox(state: .pushed, limit: 10_000).filter { !$0.soleCopy }.count }
            #expect(try await eventually { try outcomesPushed() == 2 }, "\((try? store.outboxCounts()).map { "\($0)" } ?? "")")
            #expect(try await server.send("POST", "/carekit/v1/revisions", token: token, json: body).body?["merged"]?.numberValue == 0)
            try await Task.sleep(nanoseconds: 2_500_000_000)  // two more push rounds: nothing is sent again
            let onEHR = try await observations(client, store: store)
            #expect(onEHR.count == 2 && onEHR.values.allSatisfy { $0 == 1 }, "\(onEHR)")
            device.vector = device.vector.merged(with: try KnowledgeVector(json: try #require(answer.body?["knowledgeVector"])))

            // The EHR gets a Subscription for Maria's plans, then changes the walk to 18:00 and notifies.
            let subscribed = try await CarePlanSubscription(endpoint: "http://127.0.0.1:\(server.port)/fhir/notify", token: "notify-secret-1")
                .ensure(on: client, patients: [maria])
            #expect(subscribed.count == 1 && subscribed[0].created)
            let again = try await CarePlanSubscription(endpoint: "http://127.0.0.1:\(server.port)/fhir/notify", token: "notify-secret-1")
                .ensure(on: client, patients: [maria])
            #expect(again.count == 1 && !again[0].created, "a second subscribe keeps the first")
            let oldWalk = try #require(device.tasks.last { $0.id.hasSuffix("/229065009") })
            _ = try await client.update(try mariaPlan(walkTime: "18:00:00"), at: "CarePlan/maria-lopez-home-care")
            var newWalk: CareTask?
            #expect(try await eventually {
                newWalk = try await device.pull(from: server, token: token).compactMap { if case .task(let t) = $0, t.id == oldWalk.id { t } else { nil } }.last
                return newWalk != nil
            }, "the changed plan never reached the device")
            // A new version after the old one, not a rewrite; the outcomes already recorded stay where they were.
            #expect(newWalk?.uuid != oldWalk.uuid && newWalk?.version.previousVersionUUIDs == [oldWalk.uuid])
            #expect(newWalk?.schedule.elements.first.map { calendar.component(.hour, from: $0.start) } == 18)
            #expect(try store.fetchOutcomes().count == 2)
            let metrics = try await server.metrics()
            #expect((metrics["caregate_ehr_pushed_total"] ?? 0) - (before["caregate_ehr_pushed_total"] ?? 0) == 2)
            #expect((metrics["caregate_ehr_notifications_total"] ?? 0) > (before["caregate_ehr_notifications_total"] ?? 0))
            try await server.stop()

            // The trail an auditor reads (written when the server stopped): the loop's accesses in
            // order, each naming Maria, and a chain that holds.
            let trail = try store.auditEntries(AuditQuery()).map(\.entry)
            let steps = trail.map { "\($0.actor.kind) \($0.event) \($0.outcome)" }
            let expected = ["device carekit.enroll success", "device carekit.pull success", "device carekit.push success", "worker ehr.push success",
                            "ehr ehr.notification success"]
            #expect(Self.isSubsequence(expected, of: steps), "\(steps)")
            // After the notification, the refresh and the pull that brought the new walk. Their
            // order in the trail may be either: the refresh is recorded once it is done, and the
            // device may pull what it wrote before that.
            let afterNotification = steps.drop { $0 != "ehr ehr.notification success" }
            #expect(afterNotification.contains("worker ehr.refresh success") && afterNotification.contains("device carekit.pull success"), "\(steps)")
            #expect(trail.allSatisfy { $0.patientID == maria.storeID }, "\(trail.map { $0.patientID ?? "-" })")
            #expect(trail.first { $0.event == AuditEvent.ehrPush }?.entities.count == 2)
            #expect(trail.first { $0.event == AuditEvent.ehrPush }?.actor.id == ehr.base)
            #expect(try AuditChain.verify(store).break == nil)

            // ehr.audit: the entries went to the EHR as AuditEvents through the outbox, each once, at its own id.
            let sent = try store.outbox(state: .pushed, limit: 10_000).filter { $0.idempotencyKey.hasPrefix(OutboxItem.auditKeyPrefix) }
            #expect(sent.count >= 5, "\(sent.count) AuditEvents pushed")
            for item in sent {
                let id = String(item.idempotencyKey.dropFirst(OutboxItem.auditKeyPrefix.count))
                #expect(try await client.read("AuditEvent", id).string("id") == id)
            }
            let events = try await client.search("AuditEvent", [("_count", "1000")])
            #expect(events.count == sent.count, "\(events.count) AuditEvents on the EHR for \(sent.count) sent")
            // Entries queued by the last flush wait for the next start; none is lost.
            #expect(try store.outbox(state: .queued, limit: 10_000).count + sent.count == trail.count)
        }

        /// Whether `steps` holds `wanted` in order (other entries between them).
        static func isSubsequence(_ wanted: [String], of steps: [String]) -> Bool {
            var rest = wanted[...]
            for step in steps where step == rest.first { rest = rest.dropFirst() }
            return rest.isEmpty
        }
    }
}

extension GatewayServerSuites {
    @Suite("/fhir/notify's refusals")
    struct NotifyRouteTests {
        @Test("without ehr.notify the route is 404; a wrong or missing token 401; a malformed body 400; an oversized one 413; a good one 200")
        func refusals() async throws {
            let (store, _) = try twoPatientStore()
            let plain = try await RunningServer(store: store)
            #expect(try await plain.send("POST", "/fhir/notify", token: "x").status == 404)
            try await plain.stop()

            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-notify-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try "right-token\n".write(toFile: folder.appendingPathComponent("t").path, atomically: true, encoding: .utf8)
            var ehr = GatewayConfig.EHR(base: "http://127.0.0.1:9/fhir")  // nothing listens: the workers fail and back off
            ehr.notifyToken = .file(folder.appendingPathComponent("t").path)
            var limits = GatewayServer.Limits()
            limits.notifyBody = 8 << 10
            let server = try await RunningServer(store: store, limits: limits, ehr: try ehr.link(store: store, root: folder.path))
            #expect(try await server.send("POST", "/fhir/notify").status == 401)
            #expect(try await server.send("POST", "/fhir/notify", token: "right-token-not").status == 401)
            #expect(try await server.send("POST", "/fhir/notify", token: "right-token", json: "{\"resourceType\": ").status == 400)
            let huge = #"{"resourceType": "Patient", "id": "x", "padding": "\#(String(repeating: "x", count: 20_000))"}"#
            #expect(try await server.send("POST", "/fhir/notify", token: "right-token", json: huge).status == 413)
            #expect(try await server.send("POST", "/fhir/notify", token: "right-token").status == 200)
            #expect(try await server.send("PUT", "/fhir/notify/CarePlan/p", token: "right-token",
                                          json: #"{"resourceType": "CarePlan", "id": "p", "status": "active", "intent": "plan", "subject": {"reference": "Patient/maria"}}"#).status == 200)
            // The EHR does not answer: not ready, and saying why.
            let ready = try await server.send("GET", "/readyz")
            #expect(ready.status == 503 && ready.body?["error"]?["message"]?.stringValue?.contains("the EHR has not answered") == true, "\(String(describing: ready.body))")
            try await server.stop()
            // Each notification taken left one entry, naming the patient it names; a refused one
            // the first time in a minute from its address, the others counted in one entry when
            // the gateway stopped.
            let trail = try store.auditEntries(AuditQuery()).map(\.entry).filter { $0.event == AuditEvent.notification }
            #expect(trail.map { "\($0.actor.id) \($0.patientID ?? "-") \($0.outcome)" } == [
                "(not authenticated) - refused", "http://127.0.0.1:9/fhir - refused",
                "http://127.0.0.1:9/fhir - success", "http://127.0.0.1:9/fhir Patient/maria success",
                "(not authenticated) - refused", "http://127.0.0.1:9/fhir - refused",
            ], "\(trail)")
            #expect(trail.suffix(2).allSatisfy { $0.detail?.hasPrefix("1 more like this from 127.0.0.1 between ") == true }, "\(trail.suffix(2).map(\.detail))")
        }
    }
}

extension GatewayServerSuites {
    @Suite("The push worker when the EHR fails")
    struct PushWorkerFaultTests {
        /// Maria's plan seeded on sekmet and imported into a fresh store; the gateway reaches the EHR through `proxy`.
        func setUp(_ ehr: LocalFHIRServer, proxy: FaultProxy, pushSeconds: Int = 1, backend: Backend = .sqlite,
                   test: String = #function) async throws -> (Backend.Store, EHRLink, FHIRRESTClient)? {
            let client = FHIRRESTClient(base: ehr.base, retry: RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 0.5, maxTotal: 20), timeout: 20)
            for name in ["Patient-maria-lopez", "MedicationRequest-metformin"] {
                _ = try await client.update(try sample(name), at: name.replacingOccurrences(of: "-", with: "/", range: name.range(of: "-")))
            }
            _ = try await client.update(try mariaPlan(walkTime: "17:30:00"), at: "CarePlan/maria-lopez-home-care")
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-fault-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            guard let store = try backend.freshStore(test) else { return nil }
            var settings = GatewayConfig.EHR(base: proxy.base)
            settings.timeZone = TimeZone(identifier: "America/New_York")!
            settings.pushSeconds = pushSeconds
            settings.refreshSeconds = 3_600
            settings.connection.retry = RetryPolicy(maxAttempts: 2, baseDelay: 0.05, maxDelay: 0.2, maxTotal: 2)
            try "notify-secret".write(to: directory.appendingPathComponent("notify.token"), atomically: true, encoding: .utf8)
            settings.notifyToken = .file(directory.appendingPathComponent("notify.token").path)
            let link = try settings.link(store: store, root: directory.path)
            _ = try await link.refresh.refresh(EnrolledPatient(storeID: "Patient/maria-lopez", ehrID: "maria-lopez"), since: nil)
            return (store, link, client)
        }

        /// A device of Maria's records `count` of the walk's occurrences from `first` on; returns the merged count.
        func record(_ server: RunningServer, token: String, device: inout DeviceCopy, process: UUID, clock: Int, occurrences: Range<Int>) async throws -> Int {
            let walk = try #require(device.tasks.last { $0.id.hasSuffix("/229065009") })
            let outcomes = occurrences.map { n in
                Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: n, values: [OutcomeValue(.boolean(true), createdDate: Date())], effectiveDate: Date())
            }
            let vector = device.vector.setting(process, to: clock)
            let record = RevisionRecord(entities: outcomes.map { .outcome($0) }, knowledgeVector: vector.processes)
            let answer = try await server.send("POST", "/carekit/v1/revisions", token: token,
                                               json: #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(vector.json)}"#)
            if let merged = answer.body?["knowledgeVector"] { device.vector = device.vector.merged(with: try KnowledgeVector(json: merged)) }
            return Int(answer.body?["merged"]?.numberValue ?? -1)
        }

        func enrolledDevice(_ server: RunningServer, store: Backend.Store) async throws -> (String, DeviceCopy) {
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/maria-lopez").code
            let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
            var device = DeviceCopy()
            try await device.pull(from: server, token: token)
            return (token, device)
        }

        @Test("the EHR down for five minutes on a clock the test moves: outcomes keep queueing, the worker backs off 1, 2, 4… seconds up to its interval, /readyz says so, nothing is lost, and the queue drains once each when the EHR is back")
        func ehrDown() async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let proxy = try FaultProxy(upstream: ehr.port)
            guard let (store, configured, client) = try await setUp(ehr, proxy: proxy, pushSeconds: 60) else { return }
            var link = configured
            let time = ManualClock()
            link.clock = WorkerClock(time)
            let server = try await RunningServer(store: store, ehr: link)
            let (token, initial) = try await enrolledDevice(server, store: store)
            var device = initial
            let process = UUID()
            // Both workers asleep: the push worker found the EHR up and waits its minute, the refresh worker its hour.
            #expect(try await eventually { time.sleeping == 2 })
            let before = time.asked.count

            try proxy.configure(["storm": 1_000_000, "status": 503])  // the EHR answers nothing but 503 from now on
            for minute in 1...5 {
                // Each minute the device records two more walks, which wakes the push worker at once.
                #expect(try await record(server, token: token, device: &device, process: process, clock: minute,
                                         occurrences: (2 * minute - 2)..<(2 * minute)) == 2)
                while time.now.offset < .seconds(60 * minute) {
                    try #require(try await time.advanceToNextDeadline(whenSleeping: 2) != nil, "the workers did not settle")
                }
            }
            #expect(try store.outboxCounts() == OutboxCounts(queued: 10, pushed: 0, failed: 0))
            #expect(try await server.send("GET", "/readyz").status == 503)
            let waits = time.asked.dropFirst(before).map(\.duration).filter { $0 < .seconds(3_600) }
            #expect(Array(waits.prefix(7)) == [1, 2, 4, 8, 16, 32, 60].map { Duration.seconds($0) }, "\(waits)")
            #expect(waits.dropFirst(6).allSatisfy { $0 == .seconds(60) } && waits.count >= 10, "\(waits)")
            #expect(proxy.counts["stormed", default: 0] >= 2 * waits.count, "every wait followed a failed attempt: \(proxy.counts)")

            try proxy.configure([:])  // back
            try #require(try await time.advanceToNextDeadline(whenSleeping: 2) != nil, "the workers did not settle")
            #expect(try await eventually { try store.outboxCounts().pushed == 10 }, "\(String(describing: try? store.outboxCounts()))")
            for item in try store.outbox(state: .pushed) {
                #expect(try await client.search("Observation", [("identifier", item.idempotencyKey)]).count == 1, "\(item.idempotencyKey)")
            }
            #expect(try await eventually { try await server.send("GET", "/readyz").status == 200 })
            #expect(time.now.offset > .seconds(300))
            try await server.stop()
        }

        @Test("two gateways over one store share its refresh schedule: Maria is pulled once when both start, not twice; a notification to either pulls her once more, and the other never", arguments: Backend.allCases)
        func sharedRefreshSchedule(backend: Backend) async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let proxy = try FaultProxy(upstream: ehr.port)
            guard let (store, link, _) = try await setUp(ehr, proxy: proxy, pushSeconds: 3_600, backend: backend) else { return }
            let mariaReads = { proxy.counts["GET /fhir/Patient/maria-lopez", default: 0] }
            #expect(mariaReads() == 1, "the seeding pull")
            let enrollment = DeviceEnrollment(store: store)
            let deviceToken = try enrollment.redeem(code: try enrollment.issueCode(patientID: "Patient/maria-lopez").code).token
            var otherLink = link
            otherLink.schedule = try Backend.reopen(store)
            let first = try await RunningServer(store: store, ehr: link)
            let second = try await RunningServer(store: try Backend.reopen(store), ehr: otherLink)
            // Both workers found Maria due at start; one refreshed her, and both sleep until she is due in an hour.
            #expect(try await eventually { try store.nextRefreshDue().map { $0.timeIntervalSinceNow > 3_000 } ?? false })
            try await Task.sleep(nanoseconds: 1_000_000_000)
            #expect(mariaReads() == 2, "\(proxy.counts)")
            // A device's token is not the EHR's: its notification is refused and nothing is made due.
            #expect(try await first.send("POST", "/fhir/notify", token: deviceToken, json: "").status == 401)
            #expect(try store.nextRefreshDue().map { $0.timeIntervalSinceNow > 3_000 } ?? false)
            for (n, server) in [second, first].enumerated() {
                // A notification with the changed plan names Maria; an empty one names everyone enrolled.
                let body = n == 0 ? #"{"resourceType": "CarePlan", "id": "maria-lopez-home-care", "subject": {"reference": "Patient/maria-lopez"}}"# : ""
                let answer = try await server.send("POST", "/fhir/notify", token: "notify-secret", json: body)
                #expect(answer.status == 200, "\(String(describing: answer.body))")
                #expect(try await eventually { mariaReads() == 3 + n }, "notified, Maria was not pulled: \(proxy.counts)")
                try await Task.sleep(nanoseconds: 1_500_000_000)
                #expect(mariaReads() == 3 + n, "pulled more than once: \(proxy.counts)")
            }
            // The last refresh writes her next time once its import is stored (later, on a loaded machine).
            #expect(try await eventually { try store.nextRefreshDue().map { $0.timeIntervalSinceNow > 3_000 } ?? false })
            try await first.stop()
            try await second.stop()
        }

        @Test("two gateways over one PostgreSQL store: a device's push to the one without an EHR link wakes the other's push worker (NOTIFY), and the outcomes reach the EHR within seconds, not at its hourly interval")
        func pushWakesEveryInstance() async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let proxy = try FaultProxy(upstream: ehr.port)
            guard let (store, link, client) = try await setUp(ehr, proxy: proxy, pushSeconds: 3_600, backend: .postgres) else { return }
            let devicesOnly = try await RunningServer(store: try Backend.reopen(store))
            let pusher = try await RunningServer(store: store, ehr: link)
            // The pusher's first run (at start) finds nothing; then it sleeps its hour.
            try await Task.sleep(nanoseconds: 1_000_000_000)
            let (token, initial) = try await enrolledDevice(devicesOnly, store: store)
            var device = initial
            #expect(try await record(devicesOnly, token: token, device: &device, process: UUID(), clock: 1, occurrences: 0..<2) == 2)
            #expect(try await eventually(15) { try store.outboxCounts().pushed == 2 }, "the other instance's worker was not woken")
            for item in try store.outbox(state: .pushed) {
                #expect(try await client.search("Observation", [("identifier", item.idempotencyKey)]).count == 1)
            }
            try await devicesOnly.stop()
            try await pusher.stop()
        }

        @Test("a graceful shutdown in the middle of a push batch finishes the batch; after a restart nothing is sent twice", arguments: Backend.allCases)
        func shutdownMidBatch(backend: Backend) async throws {
            guard let ehr = await LocalFHIRServer() else { return }
            let proxy = try FaultProxy(upstream: ehr.port)
            guard let (store, link, client) = try await setUp(ehr, proxy: proxy, backend: backend) else { return }
            let server = try await RunningServer(store: store, ehr: link)
            let (token, initial) = try await enrolledDevice(server, store: store)
            var device = initial
            try proxy.configure(["delay": 1.5])
            try await Task.sleep(nanoseconds: 2_000_000_000)  // any probe under way when the delay began has ended  // every request to the EHR takes 1.5 s
            let postsBefore = proxy.counts["posts_received", default: 0]
            #expect(try await record(server, token: token, device: &device, process: UUID(), clock: 1, occurrences: 0..<3) == 3)
            // The device's push wakes the worker: stop once its batch Bundle has reached the EHR's door, 1.5 s before it is answered.
            #expect(try await eventually(10) { proxy.counts["posts_received", default: 0] > postsBefore })
            #expect(try store.outboxCounts().pushed == 0)
            try await server.stop()
            let counts = try store.outboxCounts()
            #expect(counts == OutboxCounts(queued: 0, pushed: 3, failed: 0), "the batch in hand was finished: \(counts)")

            try proxy.configure([:])
            let again = try await RunningServer(store: store, ehr: link)
            try await Task.sleep(nanoseconds: 2_500_000_000)
            for item in try store.outbox(state: .pushed) {
                #expect(try await client.search("Observation", [("identifier", item.idempotencyKey)]).count == 1)
            }
            #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 3, failed: 0))
            try await again.stop()
        }
    }
}

extension GatewayServerSuites {
    @Suite("TLS in the process")
    struct ServerTLSTests {
        /// A self-signed certificate for 127.0.0.1 made by the openssl command; nil (with a notice) without it.
        static func certificate() -> (certificate: String, key: String)? {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-server-tls-\(UUID().uuidString)")
            try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                                 "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", folder.appendingPathComponent("key.pem").path,
                                 "-out", folder.appendingPathComponent("cert.pem").path]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            guard (try? process.run()) != nil else { print("SKIPPED the server TLS test: no openssl command"); return nil }
            process.waitUntilExit()
            guard process.terminationStatus == 0 else { print("SKIPPED the server TLS test: openssl failed"); return nil }
            return (folder.appendingPathComponent("cert.pem").path, folder.appendingPathComponent("key.pem").path)
        }

        @Test("with a certificate and key the server speaks HTTPS: a client trusting the certificate gets its answers, plain HTTP and untrusting clients get none")
        func https() async throws {
            guard let files = Self.certificate() else { return }
            let (store, _) = try twoPatientStore()
            let server = try await RunningServer(store: store, tls: try GatewayServer.tlsConfiguration(certificate: files.certificate, key: files.key))
            let trusting = CurlTransport(tls: TLSOptions(caBundle: files.certificate))
            let answer = try await trusting.send(HTTPRequest(method: "GET", url: "https://127.0.0.1:\(server.port)/healthz"))
            #expect(answer.status == 200 && String(decoding: answer.body, as: UTF8.self).contains("ok"))
            await #expect(throws: (any Error).self) { try await CurlTransport().send(HTTPRequest(method: "GET", url: "https://127.0.0.1:\(server.port)/healthz", timeout: 5)) }
            await #expect(throws: (any Error).self) { try await CurlTransport().send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/healthz", timeout: 5)) }
            try await server.stop()
            // A key that is not the certificate's, or a file that is not PEM, is refused before serving.
            #expect(throws: (any Error).self) { try GatewayServer.tlsConfiguration(certificate: files.key, key: files.key) }
        }
    }
}

/// A raw TCP connection to the test server, for requests a client library will not send (a body
/// that stops half-way).
final class RawConnection {
    let fd: Int32

    /// `source`: the local address to connect from (any of 127.0.0.0/8 is this machine), as another client would.
    init(port: Int, source: String? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            local.sin_addr.s_addr = inet_addr(source)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            try #require(bound == 0)
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(connected == 0)
    }

    func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    deinit { close(fd) }
}

extension GatewayServerSuites {
    @Suite("Requests in flight")
    struct ConcurrencyLimitTests {
        @Test("a device with a sync call stalled mid-body gets 429 for a second one while another device is served; an address at its ceiling gets 429 on any route; both free up when the stalled calls end")
        func perDeviceAndAddress() async throws {
            let (store, _) = try twoPatientStore()
            var limits = GatewayServer.Limits()
            limits.concurrentPerDevice = 1
            limits.concurrentPerAddress = 3
            let server = try await RunningServer(store: store, limits: limits)
            var tokens: [String] = []
            for patient in ["maria", "john"] {
                let code = try DeviceEnrollment(store: store).issueCode(patientID: patient).code
                tokens.append(try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue))
            }
            // Maria's device starts a push and stops half-way through its body: the call is in flight.
            var stalled = [try RawConnection(port: server.port)]
            stalled[0].send("POST /carekit/v1/revisions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(tokens[0])\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"revisions\": [")
            try await Task.sleep(nanoseconds: 300_000_000)
            let second = try await server.send("GET", "/carekit/v1/revisions", token: tokens[0])
            #expect(second.status == 429 && second.headers["retry-after"] == "1", "\(second.status)")
            #expect(try await server.send("GET", "/carekit/v1/revisions", token: tokens[1]).status == 200, "another device is served")
            // Two more stalled requests from this address: it is at its ceiling of 3, whatever the route.
            for _ in 0..<2 {
                let connection = try RawConnection(port: server.port)
                connection.send("POST /carekit/v1/enroll HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{\"co")
                stalled.append(connection)
            }
            try await Task.sleep(nanoseconds: 300_000_000)
            #expect(try await server.send("GET", "/healthz").status == 429)
            // The stalled calls end (their clients go away): served again.
            stalled.removeAll()
            #expect(try await eventually(5) { try await server.send("GET", "/healthz").status == 200 })
            // The device's own count is let go when its call's handler ends, which can come after the address's.
            #expect(try await eventually(5) { try await server.send("GET", "/carekit/v1/revisions", token: tokens[0]).status == 200 })
            try await server.stop()
            // The 429 came before the token was checked: entered as refused, naming no device and no patient.
            let busy = try store.auditEntries(AuditQuery()).map(\.entry).filter { $0.detail?.hasPrefix("too many calls in flight") == true }
            #expect(busy.map { "\($0.actor.id) \($0.event) \($0.outcome) \($0.patientID ?? "-")" } == ["(token not checked) carekit.pull refused -"], "\(busy)")
        }

        @Test("two gateways over one store hold a device to its limit together: with two calls stalled, one on each, a third on either gets 429 (a pull that is up to date holds nothing and is answered); another patient's device is served; free again when the stalled calls end", arguments: Backend.allCases)
        func perDeviceAcrossGateways(backend: Backend) async throws {
            guard let (store, _) = try twoPatientStore(backend) else { return }
            let servers = [try await RunningServer(store: store), try await RunningServer(store: try Backend.reopen(store))]
            var tokens: [String] = [], deviceIDs: [String] = []
            for patient in ["maria", "john"] {
                let code = try DeviceEnrollment(store: store).issueCode(patientID: patient).code
                let enrolled = try await servers[0].send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body
                tokens.append(try #require(enrolled?["token"]?.stringValue))
                deviceIDs.append(try #require(enrolled?["deviceID"]?.stringValue))
            }
            var maria = DeviceCopy()
            try await maria.pull(from: servers[1], token: tokens[0])
            let upToDate = "/carekit/v1/revisions?since=\(maria.vector.base64URL)"
            // Maria's device stalls a push half-way through its body on each gateway: its two calls are in flight.
            var stalled = try servers.map { server in
                let connection = try RawConnection(port: server.port)
                connection.send("POST /carekit/v1/revisions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(tokens[0])\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"revisions\": [")
                return connection
            }
            // Both hold their slots in the store once a third taker (allowed three) gets the third
            // (asked after a pause: a probe that took a slot first would refuse a stalled call).
            try await Task.sleep(nanoseconds: 300_000_000)
            #expect(try await eventually(5) {
                guard let probe = try store.enterCall(key: "device:\(deviceIDs[0])", limit: 3, lease: 60, now: Date()) else { return false }
                try store.leaveCall(probe)
                return probe.number == 2
            })
            for server in servers {
                let push = try await server.send("POST", "/carekit/v1/revisions", token: tokens[0], json: #"{"revisions": [], "knowledgeVector": {"processes": []}}"#)
                #expect(push.status == 429 && push.headers["retry-after"] == "1", "\(push.status)")
                #expect(try await server.send("GET", "/carekit/v1/revisions", token: tokens[0]).status == 429, "a whole pull holds a slot")
                #expect(try await server.send("GET", upToDate, token: tokens[0]).status == 200, "an up-to-date pull holds nothing")
                #expect(try await server.send("GET", "/carekit/v1/revisions", token: tokens[1]).status == 200, "John's device is served")
            }
            stalled.removeAll()
            for server in servers {
                #expect(try await eventually(5) { try await server.send("GET", "/carekit/v1/revisions", token: tokens[0]).status == 200 })
            }
            for server in servers { try await server.stop() }
        }
    }
}

/// swift-log lines kept in memory, to read what the server logged.
final class CapturedLog: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    var text: String { lock.withLock { lines.joined(separator: "\n") } }

    func handler(_ label: String) -> any LogHandler { Handler(log: self) }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            let fields = metadata.merging(event.metadata ?? [:]) { $1 }.map { "\($0.key)=\($0.value)" }.sorted().joined(separator: " ")
            log.lock.withLock { log.lines.append("\(event.level) \(event.message) \(fields)") }
        }
    }
}

extension RawConnection {
    /// What the server sent back within `seconds` (until it closes or goes quiet).
    func answer(seconds: Int = 5) -> String {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &buffer, buffer.count, 0)
        return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : ""
    }
}

extension GatewayServerSuites {
    @Suite("Hostile clients")
    struct HostileClientTests {
        @Test("1,000 wrong codes from one address: five 401s, then 429 for the rest and for the right code too; no device is enrolled")
        func thousandWrongCodes() async throws {
            let (store, _) = try twoPatientStore()
            let server = try await RunningServer(store: store)
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
            var statuses: [Int: Int] = [:]
            for n in 0..<1_000 {
                let wrong = String(format: "ZZZZZ-%05d", n)
                statuses[try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(wrong)"}"#).status, default: 0] += 1
            }
            #expect(statuses == [401: 5, 429: 995], "\(statuses)")
            #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).status == 429)
            #expect(try store.devices(patientID: nil).isEmpty)
            try await server.stop()
        }

        @Test("a body declared as 100 MB gets 413 before it is sent; one streamed in chunks without a length is cut off at the limit")
        func hundredMegabytes() async throws {
            let (store, _) = try twoPatientStore()
            let server = try await RunningServer(store: store)
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
            let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
            let declared = try RawConnection(port: server.port)
            declared.send("POST /carekit/v1/revisions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n{")
            #expect(declared.answer(seconds: 30).hasPrefix("HTTP/1.1 413"))  // at once; 30 s only for a slow build (ASan beside fuzzers took over 5)

            let streamed = try RawConnection(port: server.port)
            streamed.send("POST /carekit/v1/revisions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            let chunk = "10000\r\n" + String(repeating: " ", count: 0x10000) + "\r\n"
            var sent = 0
            for _ in 0..<1_600 {  // up to 100 MB, unless the server answers first
                let bytes = Array(chunk.utf8)
                let n = bytes.withUnsafeBytes { Glibc.send(streamed.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n <= 0 { break }
                sent += n
            }
            #expect(sent < 32 << 20, "the server read \(sent) bytes of a body over its 8 MB limit")
            #expect(try store.fetchOutcomes().isEmpty)
            try await server.stop()
        }

        @Test("a patient named <script> never reaches the logs: no names, no ids in the clear, no tokens, no paths")
        func patientNamedScript() async throws {
            let (store, _) = try twoPatientStore()
            var patient = try #require(try store.fetchPatients(EntityQuery(ids: ["maria"])).first)
            patient.name = PersonName(givenName: "<script>alert(1)</script>")
            try store.update([.patient(patient)])
            let log = CapturedLog()
            let server = try await RunningServer(store: store, logger: Logger(label: "caregate-test", factory: log.handler))
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
            let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
            let pulled = try await server.send("GET", "/carekit/v1/revisions", token: token)
            #expect(pulled.status == 200)
            _ = try await server.send("GET", "/carekit/v1/revisions?since=not-base64!", token: token)
            try await server.stop()
            let text = log.text
            #expect(text.contains("route=/carekit/v1/revisions") && text.contains("status=400"), "\(text)")
            for secret in ["<script", "alert(1)", "maria", token, code, "not-base64"] {
                #expect(!text.contains(secret), "\(secret) is in the log")
            }
        }
    }
}
