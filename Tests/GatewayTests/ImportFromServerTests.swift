import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping
import Testing
@testable import Gateway

let sampleFiles = try! FileManager.default.contentsOfDirectory(atPath: projectRoot.appendingPathComponent("FHIRSamples/json").path)
    .sorted().map { projectRoot.appendingPathComponent("FHIRSamples/json/\($0)").path }

@Suite("Import from a real FHIR server", .serialized)
struct ImportFromServerTests {
    @Test("a patient pulled from the server (seeded from FHIRSamples) is stored exactly as the same files are; re-import changes nothing")
    func pullEqualsFiles() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        let seeded = try await client.transaction(try seedTransaction(sampleFiles, base: server.base))
        #expect(seeded.children(named: "entry").count == sampleFiles.count)

        let pulled = try await PatientPull(client: client).pull(patient: "maria-lopez")
        let keys = Set(pulled.resources.map { "\($0.resource.resourceType!)/\($0.resource.string("id")!)" })
        // The Patient, the plan, what its activities reference, the team and its people; not the
        // Observations or the ServiceRequest no activity names.
        #expect(keys == [
            "Patient/maria-lopez", "CarePlan/maria-lopez-home-care", "CareTeam/maria-lopez-care-team",
            "MedicationRequest/amoxicillin", "MedicationRequest/furosemide", "MedicationRequest/metformin", "MedicationRequest/nitroglycerin-prn",
            "PractitionerRole/dr-amy-chen-endocrinology", "PractitionerRole/nurse-james-okafor-homecare",
            "Practitioner/dr-amy-chen", "Practitioner/nurse-james-okafor",
        ])
        #expect(pulled.notes.isEmpty, "\(pulled.notes)")
        #expect(pulled.resources.allSatisfy { $0.origin.hasPrefix(server.base + "/") })

        let fromServer = try temporaryStore()
        let serverReport = try importer(fromServer).run(resources: pulled.resources)
        #expect(serverReport.failedPatients.isEmpty && !serverReport.notes.contains { $0.kind == .error })
        let fromFiles = try temporaryStore()
        let files = sampleFiles.filter { path in keys.contains { key in path.hasSuffix("/" + key.replacingOccurrences(of: "/", with: "-") + ".json") } }
        #expect(files.count == 11)
        let fileReport = try importer(fromFiles).run(files)
        #expect(try StoreSnapshot.json(fromServer, notes: serverReport.notes, timeZone: newYork)
            == StoreSnapshot.json(fromFiles, notes: fileReport.notes, timeZone: newYork))
        #expect(try fromServer.fetchTasks().count == 8)
        // Where each entity came from is the server's URL.
        let plan = try #require(try fromServer.fetchCarePlans().first)
        #expect(plan.version.userInfo?["caregate.source"]?.hasPrefix(server.base) == true, "\(plan.version.userInfo ?? [:])")

        let again = try importer(fromServer).run(resources: try await PatientPull(client: client).pull(patient: "maria-lopez").resources)
        #expect(again.counts[.create] == nil && again.counts[.update] == nil && again.counts[.unchanged] == 13, "\(again.counts)")
    }

    @Test("a reference the server does not have is a warning naming the plan and activity; an unknown patient is an error")
    func danglingAndMissing() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        let patient = sampleFiles.first { $0.hasSuffix("Patient-maria-lopez.json") }!
        _ = try await client.transaction(try seedTransaction([patient], base: server.base))
        let plan = try FHIRJSONReader().read(Array("""
            {"resourceType": "CarePlan", "id": "dangling", "status": "active", "intent": "plan",
             "subject": {"reference": "Patient/maria-lopez"},
             "activity": [{"reference": {"reference": "MedicationRequest/not-there"}}]}
            """.utf8)).resource
        _ = try await client.update(plan, at: "CarePlan/dangling")
        let pulled = try await PatientPull(client: client).pull(patient: "maria-lopez")
        #expect(pulled.resources.count == 2)
        try #require(pulled.notes.count == 1)
        #expect(pulled.notes[0].kind == .warning)
        #expect(pulled.notes[0].description.hasPrefix(
            "\(server.base)/CarePlan/dangling: CarePlan/dangling activity[0].reference: warning: references MedicationRequest/not-there, which the server does not give (HTTP 404"),
            "\(pulled.notes[0])")

        do {
            _ = try await PatientPull(client: client).pull(patients: ["maria-lopez", "nobody"])
            Issue.record("an unknown patient must fail the pull")
        } catch {
            #expect(error.description == "\(server.base): Patient/nobody: \(server.base)/Patient/nobody: the server has no Patient/nobody")
        }
    }

    @Test("the whole loop: seed the server, import the patient from it, record outcomes, push them back; each arrives once, for the patient, based on the server's own plan and orders")
    func roundTrip() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        _ = try await client.transaction(try seedTransaction(sampleFiles, base: server.base))
        let store = try temporaryStore()
        _ = try importer(store).run(resources: try await PatientPull(client: client).pull(patient: "maria-lopez").resources)
        let tasks = Dictionary(uniqueKeysWithValues: try store.fetchTasks().map { ($0.id, $0) })
        let done = local("2026-11-03 21:00")
        try store.add([
            .outcome(Outcome(taskUUID: tasks["CarePlan/maria-lopez-home-care/229065009"]!.uuid, taskOccurrenceIndex: 2,
                             values: [OutcomeValue(.boolean(true), createdDate: done)], effectiveDate: done, timezone: newYork)),
            .outcome(Outcome(taskUUID: tasks["MedicationRequest/metformin/dosage-1"]!.uuid, taskOccurrenceIndex: 4,
                             values: [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: done)], effectiveDate: done, timezone: newYork)),
        ])
        var push = OutcomePush(outbox: store, export: OutcomeExport(store: store, builder: try builder()), client: client)
        push.batchSize = 10
        let report = try await push.run()
        #expect(report.pushed.count == 2, "\(report.failed) \(report.deferred)")
        #expect(report.provenanceLocation != nil)
        let arrived = try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("identifier", "urn:caregate:outcome|")])
        #expect(arrived.count == 2)
        for observation in arrived {
            let basedOn = try #require(observation.first("basedOn.reference")?.value)
            let parts = basedOn.split(separator: "/")
            // What the Observation is based on is a resource the server has (it came from there).
            #expect(try await client.read(String(parts[0]), String(parts[1])).string("id") == String(parts[1]))
        }
        #expect(Set(arrived.compactMap { $0.first("basedOn.reference")?.value }) == ["CarePlan/maria-lopez-home-care", "MedicationRequest/metformin"])
        // The Provenance names the gateway as author of both.
        let provenanceID = try #require(report.provenanceLocation?.components(separatedBy: "/_history/").first?.split(separator: "/").last)
        let provenance = try await client.read("Provenance", String(provenanceID))
        #expect(Set(provenance.children(named: "target").compactMap { $0.string("reference") })
            == Set(report.pushed.compactMap { $0.location?.components(separatedBy: "/_history/").first?.components(separatedBy: "/").suffix(2).joined(separator: "/") }))
        #expect(provenance.first("agent.type.coding.code")?.value == "author")
        #expect(provenance.first("agent.who.display")?.value?.hasPrefix("CareGate") == true)
        // Pushing again sends nothing; the server still has two.
        #expect(try await push.run().pushed.isEmpty)
        #expect(try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("identifier", "urn:caregate:outcome|")]).count == 2)
    }

    @Test("a refresh with a time asks the EHR what changed since: nothing costs its CapabilityStatement and a one-entry search per type it can search by patient; a changed CarePlan is found by the second and pulled, the statement read once")
    func refreshSinceLastUpdated() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let direct = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        _ = try await direct.transaction(try seedTransaction(sampleFiles, base: server.base))
        let proxy = try FaultProxy(upstream: server.port)
        let proxied = FHIRRESTClient(base: proxy.base, retry: quickRetry, timeout: 20)
        let store = try temporaryStore()
        var refresh = PatientRefresh(client: proxied, importer: try importer(store), devices: store)
        refresh.clockSkew = 0
        let maria = EnrolledPatient(storeID: "Patient/maria-lopez", ehrID: "maria-lopez")
        guard case .imported = try await refresh.refresh(maria, since: nil) else { Issue.record("the first refresh did not pull"); return }
        var forwarded = proxy.counts["forwarded", default: 0]
        _ = try await PatientPull(client: proxied).pull(patient: "maria-lopez")
        let pullRequests = proxy.counts["forwarded", default: 0] - forwarded  // its CapabilityStatement included

        try await Task.sleep(nanoseconds: 2_100_000_000)  // _lastUpdated is asked to the second, a second early
        let quiet = Date()
        forwarded = proxy.counts["forwarded", default: 0]
        let second = try await refresh.refresh(maria, since: quiet)
        guard case .unchanged = second else { Issue.record("nothing changed, yet the refresh pulled: \(second)"); return }
        // sekmet lists no search of CareTeams (it would ignore `subject` and answer for everyone):
        // Patient, CarePlan and MedicationRequest are asked.
        let capabilities = ServerCapabilities(try await direct.capabilities())
        let asked = PatientRefresh.patientSearches.filter { capabilities.canSearch($0.0, by: $0.1, "_lastUpdated") }.map(\.0)
        #expect(asked == ["Patient", "CarePlan", "MedicationRequest"])
        #expect(proxy.counts["forwarded", default: 0] - forwarded == 1 + asked.count)

        var plan = try await direct.read("CarePlan", "maria-lopez-home-care")
        plan.setValue("Home care after the visit", for: "title")
        _ = try await direct.update(plan, at: "CarePlan/maria-lopez-home-care")  // in the same second as `quiet`, often
        forwarded = proxy.counts["forwarded", default: 0]
        guard case .imported(let report) = try await refresh.refresh(maria, since: quiet) else { Issue.record("a changed plan was not pulled"); return }
        #expect(report.counts[.update, default: 0] >= 1, "\(report.counts)")
        #expect(proxy.counts["forwarded", default: 0] - forwarded == pullRequests + 2, "the Patient and CarePlan searches, then the pull")
        #expect(try store.fetchCarePlans().contains { $0.title == "Home care after the visit" })
    }

    @Test("a search by patient that gives another patient's CarePlan or CareTeam (a server ignoring the parameter) leaves it out with a warning")
    func otherPatientsPlansLeftOut() throws {
        let pull = PatientPull(client: FHIRRESTClient(base: "http://127.0.0.1:9/fhir"))
        let found = try [
            #"{"resourceType": "CarePlan", "id": "mine", "status": "active", "intent": "plan", "subject": {"reference": "Patient/maria-lopez"}}"#,
            #"{"resourceType": "CarePlan", "id": "absolute", "status": "active", "intent": "plan", "subject": {"reference": "http://127.0.0.1:9/fhir/Patient/maria-lopez"}}"#,
            #"{"resourceType": "CarePlan", "id": "theirs", "status": "active", "intent": "plan", "subject": {"reference": "Patient/john-doe"}}"#,
            #"{"resourceType": "CareTeam", "id": "nobodys"}"#,
            #"{"resourceType": "MedicationRequest", "id": "included", "status": "active", "intent": "order", "subject": {"reference": "Patient/john-doe"}, "medicationCodeableConcept": {"text": "x"}}"#,
        ].map { try FHIRJSONReader().read(Array($0.utf8)).resource }
        var notes: [ImportNote] = []
        #expect(pull.own(found, patient: "maria-lopez", notes: &notes).compactMap { $0.string("id") } == ["mine", "absolute", "included"])
        #expect(notes.map(\.resource) == ["CarePlan/theirs", "CareTeam/nobodys"])
        #expect(notes.first?.message == "the search for Patient/maria-lopez's CarePlans gave this one, of Patient/john-doe; left out")
    }
}
