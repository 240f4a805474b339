import CareStore
import FHIR
import FHIRClient
import FHIRPackages
import Foundation
import Gateway
import GatewayServer
import Mapping
import Testing

extension GatewayServerSuites {
    /// `ehr.profiles: us-core-6.1.0` with sekmet-fhir as the EHR: a device's outcome arrives as
    /// US Core asks of patient-supplied data, with the device that recorded it and a Provenance
    /// naming the patient, in one transaction, exactly once.
    @Suite("Patient-supplied outcomes reach the EHR with their device and Provenance")
    struct ProvenanceLoopTests {
        static let package = serverProjectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages/hl7.fhir.us.core-6.1.0.tgz").path

        /// Maria's plan from the EHR, in a store linked to it with the US Core 6.1.0 target.
        func setUp(_ ehr: LocalFHIRServer) async throws -> (Backend.Store, EHRLink, FHIRRESTClient)? {
            guard FileManager.default.fileExists(atPath: Self.package) else {
                print("SKIPPED patient-supplied Provenance: ../shared/fhir-packages is not present")
                return nil
            }
            let client = FHIRRESTClient(base: ehr.base, timeout: 20)
            _ = try await client.update(try sample("Patient-maria-lopez"), at: "Patient/maria-lopez")
            _ = try await client.update(try mariaPlan(walkTime: "17:30:00"), at: "CarePlan/maria-lopez-home-care")
            guard let store = try Backend.sqlite.freshStore() else { return nil }
            var settings = GatewayConfig.EHR(base: ehr.base)
            settings.timeZone = TimeZone(identifier: "America/New_York")!
            settings.pushSeconds = 1
            settings.refreshSeconds = 3_600
            settings.profiles = "us-core-6.1.0"
            settings.packages = [Self.package]
            let link = try settings.link(store: store, root: FileManager.default.temporaryDirectory.path)
            _ = try await link.refresh.refresh(EnrolledPatient(storeID: "Patient/maria-lopez", ehrID: "maria-lopez"), since: nil)
            return (store, link, client)
        }

        /// A device enrolled with `body`'s name and app, and its copy of the plan.
        func enroll(_ server: RunningServer, store: Backend.Store, _ fields: String) async throws -> (token: String, id: String, copy: DeviceCopy) {
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/maria-lopez").code
            let answer = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"\#(fields)}"#)
            let token = try #require(answer.body?["token"]?.stringValue, "\(answer)")
            var copy = DeviceCopy()
            try await copy.pull(from: server, token: token)
            return (token, try #require(answer.body?["deviceID"]?.stringValue), copy)
        }

        /// The device pushes one weight; `source` is what the device claims made it.
        func pushWeight(_ server: RunningServer, token: String, copy: inout DeviceCopy, kilograms: Double, occurrence: Int, source: String? = nil) async throws -> Outcome {
            let weight = try #require(copy.tasks.last { $0.id.hasSuffix("/29463-7") })
            var outcome = Outcome(taskUUID: weight.uuid, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.double(kilograms), units: "kg")], effectiveDate: Date())
            outcome.version.source = source
            let vector = copy.vector.setting(UUID(), to: 1)
            let record = RevisionRecord(entities: [.outcome(outcome)], knowledgeVector: vector.processes)
            let answer = try await server.send("POST", "/carekit/v1/revisions", token: token,
                                               json: #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(vector.json)}"#)
            #expect(answer.body?["merged"]?.numberValue == 1, "\(String(describing: answer.body))")
            if let merged = answer.body?["knowledgeVector"] { copy.vector = copy.vector.merged(with: try KnowledgeVector(json: merged)) }
            return outcome
        }

        @Test("a device's weight arrives as US Core's body weight with the device as enrolled (contained, deviceName) and a US Core Provenance (the patient as author, the device as assembler) in its transaction; a resent transaction creates nothing twice")
        func weightWithProvenance() async throws {
            guard let ehr = await LocalFHIRServer(), let (store, link, client) = try await setUp(ehr) else { return }
            let server = try await RunningServer(store: store, ehr: link)
            defer { Task { try? await server.stop() } }
            var (token, deviceID, copy) = try await enroll(server, store: store, #", "name": "Maria's iPhone", "app": "Heart Companion""#)
            // A second device of Maria's: the first one's push cannot claim to be it.
            let other = try await enroll(server, store: store, #", "name": "Maria's iPad""#)
            let outcome = try await pushWeight(server, token: token, copy: &copy, kilograms: 77.9, occurrence: 3, source: "caregate-device:\(other.id)")
            #expect(try await eventually(30) { try store.outboxCounts().pushed == 1 }, "\((try? store.outboxCounts()).map { "\($0)" } ?? "")")
            #expect(try store.fetchOutcomes(EntityQuery(uuids: [outcome.uuid])).first?.version.source == "caregate-device:\(deviceID)",
                    "the gateway names the device that pushed, whatever the device says")

            let key = try #require(try store.outbox(state: .pushed).first).idempotencyKey
            let observations = try await client.search("Observation", [("identifier", key)])
            #expect(observations.count == 1)
            let weight = try #require(observations.first)
            #expect(weight.first("device.reference")?.value == "#recording-device")
            let device = try #require(weight.children(named: "contained").first { $0.resourceType == "Device" })
            #expect(device.children(named: "deviceName").map { "\($0.string("name") ?? "") (\($0.string("type") ?? ""))" } 
                    == ["Maria's iPhone (user-friendly-name)", "Heart Companion (from Apple Health) (other)"], "the weight task reads HealthKit: the app is named too")
            #expect(weight.first("meta.tag.code")?.value == "patient-supplied" && weight.first("performer.reference")?.value == "Patient/maria-lopez")
            #expect(device.first("identifier.value")?.value == deviceID)

            let tag = "\(PatientSuppliedProvenance.tagSystem)|\(outcome.uuid.uuidString.lowercased())"
            let provenances = try await client.search("Provenance", [("_tag", tag)])
            #expect(provenances.count == 1)
            let provenance = try #require(provenances.first)
            #expect(provenance.children(named: "target").compactMap { $0.string("reference") } == ["Observation/\(weight.string("id") ?? "")"])
            let agents = provenance.children(named: "agent").map { "\($0.first("type.coding.code")?.value ?? "") \($0.first("who.reference")?.value ?? "")" }
            #expect(agents == ["author Patient/maria-lopez", "assembler #recording-device"], "\(agents)")
            #expect(provenance["meta"]?.children(named: "profile").map(\.value) == ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-provenance"])
            // What the EHR holds meets US Core, as checked by the gateway's own validator.
            let target = try ProfileTarget(name: "us-core-6.1.0", packages: [try FHIRPackage.load(path: Self.package)])
            for resource in [weight, provenance] {
                let errors = target.validate(resource).issues.filter { $0.severity <= .error }
                #expect(errors.isEmpty, "\(resource.resourceType ?? ""): \(errors)")
            }

            // The answer to the transaction lost: the same payload sent again creates nothing.
            let payload = try FHIRJSONReader().read(try #require(try store.outbox(state: .pushed).first).payload).resource
            _ = try await client.transaction(payload)
            #expect(try await client.search("Observation", [("identifier", key)]).count == 1)
            #expect(try await client.search("Provenance", [("_tag", tag)]).count == 1)
            try await Task.sleep(nanoseconds: 2_200_000_000)  // two more push rounds: nothing is sent again
            #expect(try await client.search("Provenance", [("_tag", tag)]).count == 1)
        }

        @Test("an enrollment's name or app that is not short text is refused (400) before the code is used up; the code still enrolls after")
        func hostileNames() async throws {
            guard let store = try Backend.sqlite.freshStore() else { return }
            try store.add([.patient(Patient(id: "Patient/maria-lopez", name: PersonName(givenName: "María", familyName: "López")))])
            let server = try await RunningServer(store: store, dashboard: DashboardAccess(adminToken: "names-admin-1", secureCookie: false))
            defer { Task { try? await server.stop() } }
            let code = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/maria-lopez").code
            for fields in [#""name": "\#(String(repeating: "x", count: 81))""#, #""app": "line\nbreak""#, #""name": 7"#, #""name": "   ""#] {
                let answer = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)", \#(fields)}"#)
                #expect(answer.status == 400, "\(fields): \(answer.status)")
            }
            let enrolled = try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)", "name": "  Maria's iPhone "}"#)
            #expect(enrolled.status == 200)
            #expect(try store.devices(patientID: "Patient/maria-lopez").map(\.name) == ["Maria's iPhone"])
            // Markup in a name is text: the dashboard shows it escaped.
            let second = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/maria-lopez").code
            #expect(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(second)", "name": "<img src=x onerror=alert(1)>"}"#).status == 200)
            var browser = DashboardBrowser(server: server)
            let login = try await browser.send("POST", "/ui/login", form: [("token", "names-admin-1")])
            browser.session = String(try #require(login.headers["set-cookie"]).dropFirst("caregate_session=".count).prefix { $0 != ";" })
            let page = try await browser.send("GET", "/ui/devices").html
            #expect(page.contains("Maria&#39;s iPhone") && page.contains("&lt;img src=x onerror=alert(1)&gt;") && !page.contains("<img src=x"), "\(page)")
        }
    }
}
