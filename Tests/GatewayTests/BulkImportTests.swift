import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping
import Testing
@testable import Gateway

@Suite("Bulk Data import from a real FHIR server", .serialized)
struct BulkImportTests {
    /// The server seeded with the sample files and a Group holding Maria.
    func seeded(_ server: LocalFHIRServer) async throws -> FHIRRESTClient {
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        _ = try await client.transaction(try seedTransaction(sampleFiles, base: server.base))
        var group = Element(resourceType: "Group")
        group.append(Element(name: "id", type: "id", value: "heart-failure"))
        group.append(Element(name: "type", type: "code", value: "person"))
        group.append(Element(name: "actual", type: "boolean", value: "true"))
        var member = Element(name: "member", type: "Group.member")
        var entity = Element(name: "entity", type: "Reference")
        entity.append(Element(name: "reference", type: "string", value: "Patient/maria-lopez"))
        member.append(entity)
        group.append(member)
        _ = try await client.update(group, at: "Group/heart-failure")
        return client
    }

    func fetcher(_ client: FHIRRESTClient, _ store: SQLiteCarePlanStore, fileLimit: Int? = nil) -> BulkExportFetch {
        var bulk = BulkDataClient(client: client)
        bulk.pollInterval = (0.2, 1)
        if let fileLimit { bulk.maximumFileSize = fileLimit }
        return BulkExportFetch(bulk: bulk, log: store, root: store.path + ".bulk")
    }

    @Test("a system-level export imports exactly what the same files do; the export's time is kept, the job deleted on the server and the files here")
    func systemExportEqualsFiles() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = try await seeded(server)
        let store = try temporaryStore()
        let fetch = fetcher(client, store)
        let request = BulkExportRequest(level: .system, types: ["Patient", "CarePlan", "CareTeam", "MedicationRequest", "Practitioner", "PractitionerRole", "Observation", "ServiceRequest"])
        let fetched = try await fetch.fetch(request)
        #expect(!fetched.resumed && fetched.notes.isEmpty)
        #expect(Set(fetched.manifest.output.map(\.type)) == Set(request.types))
        #expect(fetched.manifest.output.map(\.count) .allSatisfy { ($0 ?? 0) > 0 })
        #expect(fetched.files.allSatisfy { FileManager.default.fileExists(atPath: $0) && $0.hasPrefix(fetched.directory + "/") })
        let report = try importer(store).run(fetched.files)
        #expect(report.failedPatients.isEmpty && !report.notes.contains { $0.kind == .error }, "\(report.notes)")

        let fromFiles = try temporaryStore()
        let fileReport = try importer(fromFiles).run(sampleFiles)
        #expect(report.resources == fileReport.resources)
        #expect(try StoreSnapshot.json(store, notes: [], timeZone: newYork) == StoreSnapshot.json(fromFiles, notes: [], timeZone: newYork))
        #expect(try store.fetchTasks().count == fromFiles.fetchTasks().count && fromFiles.fetchTasks().count > 0)

        #expect(await fetch.finish(fetched).isEmpty)
        #expect(try store.lastTransactionTime(source: fetch.source(of: request)) == fetched.manifest.transactionTime)
        #expect(try store.bulkFetch(source: fetched.source) == nil)
        #expect(!FileManager.default.fileExists(atPath: fetched.directory))
        // The server forgot the job.
        await #expect(throws: FHIRClientError.self) { _ = try await BulkDataClient(client: FHIRRESTClient(base: server.base, retry: .none)).manifest(fetched.statusURL) }
    }

    @Test("a generated population (scripts/population.py: 20 Synthea patients with fresh ids) on the server: a system-level export imports the same store as the population's own files; a Patient-level export holds every patient's compartment; a Group of five of them exports those five and their plans only")
    func generatedPopulation() async throws {
        guard let shared = sharedRoot else { return skipNotice("Bulk Data export of a generated population") }
        guard let server = await LocalFHIRServer() else { return }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-bulk-population-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let script = Process()
        script.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        script.arguments = ["python3", projectRoot.appendingPathComponent("scripts/population.py").path, directory, "--copies", "1", "--shared", shared.path]
        script.standardOutput = FileHandle.nullDevice
        try script.run()
        script.waitUntilExit()
        #expect(script.terminationStatus == 0)
        // The types the mappings read (Synthea has no CareTeams).
        let types = ["Organization", "Practitioner", "Patient", "CarePlan", "MedicationRequest", "Observation"]
        let files = types.map { "\(directory)/\($0).ndjson" }.filter { FileManager.default.fileExists(atPath: $0) }
        #expect(files.count == types.count)
        // Seeded as the population's lines, 500 to a transaction.
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 120)
        var lines: [Element] = []
        for file in files {
            let reader = try NDJSONReader(path: file)
            while let parsed = try reader.next() { lines.append(parsed.resource) }
        }
        for start in stride(from: 0, to: lines.count, by: 500) {
            _ = try await client.transaction(seedTransaction(resources: lines[start..<min(start + 500, lines.count)], base: server.base))
        }
        let store = try temporaryStore()
        let fetch = fetcher(client, store)
        let fetched = try await fetch.fetch(BulkExportRequest(level: .system, types: types))
        let report = try await fetch.importFetched(fetched, into: try importer(store), staging: try SQLiteImportStaging(inMemory: ()))
        let fromFiles = try temporaryStore()
        let fileReport = try await StagedImport(importer: try importer(fromFiles)).run(files, staging: try SQLiteImportStaging(inMemory: ()))
        #expect(report.patients.count == 20 && fileReport.patients.count == 20)
        // Resources counted once each (the files repeat shared Organizations and Practitioners).
        let unique = Set(lines.map { "\($0.resourceType!)/\($0.string("id")!)" }).count
        #expect(unique < lines.count)
        #expect(report.failedPatients.isEmpty && report.resources == unique && fileReport.resources == unique,
                "\(report.failedPatients.map(\.patientID)) \(report.resources) \(fileReport.resources) \(lines.count) \(fetched.manifest.output.map { "\($0.type) \($0.count ?? -1)" })")
        #expect(try StoreSnapshot.json(store, notes: [], timeZone: newYork) == StoreSnapshot.json(fromFiles, notes: [], timeZone: newYork))
        #expect(try store.fetchTasks().count > 20)
        #expect(await fetch.finish(fetched).isEmpty)
        // Patient level: the compartment types, every patient's resources.
        let patientLevel = try await fetcher(client, try temporaryStore()).fetch(BulkExportRequest(level: .patients, types: ["Patient", "CarePlan", "Observation"]))
        let counts = Dictionary(patientLevel.manifest.output.map { ($0.type, $0.count ?? 0) }, uniquingKeysWith: +)
        func count(_ type: String) -> Int { lines.count { $0.resourceType == type } }
        #expect(counts["Patient"] == 20 && counts["CarePlan"] == count("CarePlan") && counts["Observation"] == count("Observation"), "\(counts)")
        // Group level: a Group of five of them; its export imports those five and nobody else.
        let members = lines.filter { $0.resourceType == "Patient" }.prefix(5).map { "Patient/\($0.string("id")!)" }
        var group = Element(resourceType: "Group")
        group.append(Element(name: "id", type: "id", value: "generated-five"))
        group.append(Element(name: "type", type: "code", value: "person"))
        group.append(Element(name: "actual", type: "boolean", value: "true"))
        for member in members {
            var entry = Element(name: "member", type: "Group.member")
            var entity = Element(name: "entity", type: "Reference")
            entity.append(Element(name: "reference", type: "string", value: member))
            entry.append(entity)
            group.append(entry)
        }
        _ = try await client.update(group, at: "Group/generated-five")
        let groupStore = try temporaryStore()
        let groupFetch = fetcher(client, groupStore)
        let groupFetched = try await groupFetch.fetch(BulkExportRequest(level: .group("generated-five"), types: types))
        let groupReport = try await groupFetch.importFetched(groupFetched, into: try importer(groupStore), staging: try SQLiteImportStaging(inMemory: ()))
        #expect(Set(groupReport.patients.map(\.patientID)) == Set(members) && groupReport.failedPatients.isEmpty)
        #expect(try groupStore.fetchPatients().map(\.id).sorted() == members.sorted())
        // Their care plans, as the whole population's import has them, and no one else's.
        func plans(_ store: SQLiteCarePlanStore, of patients: [String]) throws -> [String] {
            let ids = Dictionary(try store.fetchPatients().map { ($0.uuid, $0.id) }, uniquingKeysWith: { a, _ in a })
            return try store.fetchCarePlans().filter { plan in plan.patientUUID.flatMap { ids[$0] }.map(patients.contains) ?? false }.map(\.id).sorted()
        }
        let memberPlans = try plans(store, of: members)
        #expect(!memberPlans.isEmpty)
        #expect(try plans(groupStore, of: members) == memberPlans && groupStore.fetchCarePlans().count == memberPlans.count)
    }

    @Test("a download cut short resumes: the same export, the files done are not fetched again; a Group export holds its members' compartments only")
    func resumesAndGroups() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = try await seeded(server)
        let store = try temporaryStore()
        let request = BulkExportRequest(level: .group("heart-failure"))
        // Files over 4 KB stop the first run after the small ones.
        let small = fetcher(client, store, fileLimit: 4096)
        await #expect(throws: BulkFetchError.self) { _ = try await small.fetch(request) }
        let kept = try #require(try store.bulkFetch(source: small.source(of: request)))
        #expect(kept.manifest != nil && !kept.downloaded.isEmpty)
        let manifest = try BulkManifest.read(kept.manifest!, url: kept.statusURL)
        #expect(kept.downloaded.count < manifest.output.count)
        let firstDone = try #require(manifest.output.firstIndex { $0.url == kept.downloaded[0] })
        let donePath = "\(small.directory(kept.source))/\(firstDone)-\(manifest.output[firstDone].type).ndjson"
        let doneAt = try #require(try FileManager.default.attributesOfItem(atPath: donePath)[.modificationDate] as? Date)

        let fetch = fetcher(client, store)
        let fetched = try await fetch.fetch(request)
        #expect(fetched.resumed && fetched.statusURL == kept.statusURL)
        #expect(try FileManager.default.attributesOfItem(atPath: donePath)[.modificationDate] as? Date == doneAt)
        // Maria's compartment: no Practitioners.
        #expect(Set(fetched.manifest.output.map(\.type)).isSuperset(of: ["Patient", "CarePlan", "MedicationRequest"]))
        #expect(!fetched.manifest.output.contains { ["Practitioner", "PractitionerRole"].contains($0.type) })
        let report = try importer(store).run(fetched.files)
        #expect(report.failedPatients.isEmpty)
        #expect(try store.fetchPatients().map(\.id) == ["Patient/maria-lopez"])
        #expect(await fetch.finish(fetched).isEmpty)
    }

    @Test("--since: the next export asks for what changed after the last one's transaction time; a changed CarePlan becomes new task versions")
    func sinceLastExport() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = try await seeded(server)
        let store = try temporaryStore()
        let fetch = fetcher(client, store)
        let request = BulkExportRequest(level: .patients)
        let first = try await fetch.fetch(request)
        _ = try await fetch.importFetched(first, into: try importer(store), staging: try SQLiteImportStaging(inMemory: ()))
        #expect(await fetch.finish(first).isEmpty)
        let since = try #require(try store.lastTransactionTime(source: fetch.source(of: request)))

        // The plan changes on the server after the export.
        try await Task.sleep(nanoseconds: 1_100_000_000)
        var plan = try await client.read("CarePlan", "maria-lopez-home-care")
        plan.setValue("Home care, revised at the clinic visit", for: "title")
        _ = try await client.update(plan, at: "CarePlan/maria-lopez-home-care")

        let next = try await fetch.fetch(BulkExportRequest(level: .patients, since: since))
        #expect(fetch.source(of: BulkExportRequest(level: .patients, since: since)) == first.source)
        #expect(next.manifest.output.map(\.type) == ["CarePlan"], "\(next.manifest.output)")
        #expect(next.manifest.output.first?.count == 1)
        // Only Maria changed: she is pulled whole, so the plan's MedicationRequests come with it.
        #expect(BulkExportFetch.changedPatients(next).ids == ["maria-lopez"])
        let report = try await fetch.importFetched(next, into: try importer(store, now: local("2026-11-02 09:00")), staging: try SQLiteImportStaging(inMemory: ()))
        #expect(report.failedPatients.isEmpty, "\(report.failedPatients.map { $0.failure ?? "" })")
        // The plan is updated; the care team (not in Maria's compartment on this server, so not in the first export) arrives with her.
        #expect(report.counts[.update] == 1, "\(report.counts)")
        #expect(try store.fetchCarePlans().first { $0.id == "CarePlan/maria-lopez-home-care" }?.title == "Home care, revised at the clinic visit")
        #expect(!report.notes.contains { $0.kind == .warning || $0.kind == .error }, "\(report.notes)")
        #expect(await fetch.finish(next).isEmpty)
        #expect(try store.lastTransactionTime(source: first.source) == next.manifest.transactionTime)
    }

    @Test("a Bulk export holds no forms (they are no patient's): the survey activities' forms are fetched from the server once each, a form it lacks is a loss per patient")
    func formsForAnExport() async throws {
        guard let server = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: server.base, retry: quickRetry, timeout: 20)
        let surveys = projectRoot.appendingPathComponent("FHIRSamples/surveys")
        let bundle = try Data(contentsOf: surveys.appendingPathComponent("sam-rivera-surveys-bundle.json"))
        // Sam and a second patient with the same plan; the server has the PHQ-9 and the weight form, not the GAD-7.
        var resources: [Element] = []
        for text in [String(decoding: bundle, as: UTF8.self), String(decoding: bundle, as: UTF8.self).replacingOccurrences(of: "sam-rivera", with: "sky-rivera")] {
            resources += try FHIRJSONReader().read(Array(text.utf8)).resource.children(named: "entry").compactMap { $0["resource"] }
        }
        resources += try ["phq-9", "weight-height"].map { try FHIRDocument.read(contentsOf: surveys.appendingPathComponent("questionnaires/Questionnaire-\($0).json").path).resource }
        _ = try await client.transaction(seedTransaction(resources: resources, base: server.base))
        let store = try temporaryStore()
        let fetch = fetcher(client, store)
        let fetched = try await fetch.fetch(BulkExportRequest(level: .patients))
        #expect(!fetched.manifest.output.contains { $0.type == "Questionnaire" })
        let report = try await fetch.importFetched(fetched, into: try importer(store), staging: try SQLiteImportStaging(inMemory: ()))
        #expect(report.failedPatients.isEmpty && !report.notes.contains { $0.kind == .error }, "\(report.notes)")
        let tasks = try store.fetchTasks().filter { $0.version.userInfo?[SurveyTask.questionnaireKey] != nil }
        #expect(tasks.count == 4, "\(tasks.map(\.id))")
        for patient in ["Patient/sam-rivera", "Patient/sky-rivera"] {
            #expect(try store.questionnaires(of: patient, url: "https://clinic.example.org/fhir/Questionnaire/phq-9", version: "2.0").count == 1)
        }
        #expect(report.notes.filter { $0.kind == .loss && $0.message.contains("Questionnaire/gad-7") }.count == 2, "\(report.notes)")
        #expect(report.notes.filter { $0.message.contains("the server has no Questionnaire https://clinic.example.org/fhir/Questionnaire/gad-7") }.count == 1)

        // Each form is asked for once in a run, however many patients' activities ask for it.
        let asked = Locked([Canonical]())
        let pull = PatientPull(client: client)
        var staged = StagedImport(importer: try importer(try temporaryStore()), window: 2)
        staged.formSource = { canonicals in
            asked.withLock { $0 += canonicals }
            return await pull.forms(canonicals)
        }
        let again = try await staged.run(fetched.files, staging: try SQLiteImportStaging(inMemory: ()))
        #expect(again.notes.filter { $0.kind == .loss }.count == 2)
        let names = asked.withLock { $0.map(\.description) }
        #expect(names.sorted() == ["https://clinic.example.org/fhir/Questionnaire/gad-7", "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0",
                                   "https://clinic.example.org/fhir/Questionnaire/weight-height"], "\(names)")
        _ = await fetch.finish(fetched)
    }

    @Test("a manifest without transactionTime, or with an output entry without url, is refused naming the status URL")
    func manifestRefusals() throws {
        #expect(throws: FHIRClientError.self) { try BulkManifest.read(Array(#"{"output":[]}"#.utf8), url: "http://x/status") }
        do {
            _ = try BulkManifest.read(Array(#"{"transactionTime":"2026-11-01T00:00:00Z","output":[{"type":"Patient"}]}"#.utf8), url: "http://x/status")
            Issue.record("read a manifest whose output has no url")
        } catch {
            #expect(error.description == "http://x/status: the export's manifest has an output[0] without type or url")
        }
        let manifest = try BulkManifest.read(Array(#"{"transactionTime":"2026-11-01T00:00:00Z","requiresAccessToken":false,"output":[{"type":"Patient","url":"http://x/1.ndjson","count":3}],"error":[]}"#.utf8), url: "u")
        #expect(manifest.output == [BulkManifest.File(type: "Patient", url: "http://x/1.ndjson", count: 3)] && !manifest.requiresAccessToken)
        #expect(BulkExportFetch.safeName("../../etc/passwd") == "etcpasswd")
    }
}
