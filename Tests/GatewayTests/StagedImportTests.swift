import CareStore
import FHIR
import Foundation
import GRDB
import JSON
import Mapping
import Testing
@testable import Gateway

/// Staged imports against whole-run imports of the same files: the stores must say the same.
@Suite("Staged import: one patient at a time, in bounded memory")
struct StagedImportTests {
    /// Both ways into fresh stores; the snapshots (every entity, notes left out), the reports'
    /// figures, changes counted and notes must be equal; `inOrder`: the patients' order too (see
    /// the official examples below for when it differs).
    func compare(_ paths: [String], window: Int = 2, inOrder: Bool = true, staging: () throws -> any ImportStaging = { try SQLiteImportStaging(inMemory: ()) },
                 sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let whole = try temporaryStore()
        let wholeReport = try importer(whole).run(paths)
        let staged = try temporaryStore()
        let stagedReport = try await StagedImport(importer: try importer(staged), window: window).run(paths, staging: try staging())
        #expect(try StoreSnapshot.json(staged, notes: [], timeZone: newYork) == StoreSnapshot.json(whole, notes: [], timeZone: newYork), sourceLocation: sourceLocation)
        #expect(stagedReport.files == wholeReport.files && stagedReport.resources == wholeReport.resources && stagedReport.repeated == wholeReport.repeated,
                "\(stagedReport.resources) \(wholeReport.resources) \(stagedReport.repeated) \(wholeReport.repeated)", sourceLocation: sourceLocation)
        #expect(stagedReport.unmapped == wholeReport.unmapped, sourceLocation: sourceLocation)
        #expect(stagedReport.dispositions.count == wholeReport.dispositions.count, sourceLocation: sourceLocation)
        #expect(Set(stagedReport.notes.map(\.description)) == Set(wholeReport.notes.map(\.description)),
                "\(Set(stagedReport.notes.map(\.description)).symmetricDifference(Set(wholeReport.notes.map(\.description))))", sourceLocation: sourceLocation)
        #expect(Set(stagedReport.patients.map(\.patientID)) == Set(wholeReport.patients.map(\.patientID)), sourceLocation: sourceLocation)
        #expect(stagedReport.counts == wholeReport.counts, sourceLocation: sourceLocation)
        if inOrder {
            #expect(stagedReport.patients.map(\.patientID) == wholeReport.patients.map(\.patientID), sourceLocation: sourceLocation)
        }
    }

    /// Staged one patient at a time (in a scratch file) and four at once (in memory): the same
    /// store, the same report, in order.
    func serialEqualsParallel(_ paths: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws {
        let serial = try temporaryStore(), parallel = try temporaryStore()
        let one = try await StagedImport(importer: try importer(serial), window: 1).run(paths, staging: try SQLiteImportStaging())
        let four = try await StagedImport(importer: try importer(parallel), window: 4).run(paths, staging: InMemoryImportStaging())
        #expect(try StoreSnapshot.json(serial, notes: one.notes, timeZone: newYork) == StoreSnapshot.json(parallel, notes: four.notes, timeZone: newYork), sourceLocation: sourceLocation)
        #expect(one.patients.map { "\($0.patientID) \($0.changes.map(\.description))" } == four.patients.map { "\($0.patientID) \($0.changes.map(\.description))" }, sourceLocation: sourceLocation)
        #expect(one.counts == four.counts && one.unmapped == four.unmapped && one.resources == four.resources, sourceLocation: sourceLocation)
    }

    @Test("a staged item's type, and the Type/id a reference names (relative, absolute or versioned)")
    func keys() {
        let item = StagedItem(group: "", identity: "Practitioner/dr-amy-chen", fullURL: nil, container: 0, origin: "a.json", bytes: [])
        #expect(StagedImport.type(of: item) == "Practitioner")
        #expect(StagedImport.type(of: StagedItem(group: "", identity: nil, fullURL: "urn:uuid:1", container: 0, origin: "a.json", bytes: [])) == nil)
        #expect(Element.relativeReference(of: "Practitioner/dr-amy-chen") == "Practitioner/dr-amy-chen")
        #expect(Element.relativeReference(of: "https://ehr.example.org/fhir/Medication/m-é/_history/4") == "Medication/m-é")
        #expect(Element.relativeReference(of: "urn:uuid:0b9c") == nil)
        #expect(Element.relativeReference(of: "Patient") == nil)
    }

    @Test("a Bundle's entries are staged as the file has them in memory, and compacted in a scratch database")
    func stagedText() async throws {
        for (staging, start): (any ImportStaging, String) in [(InMemoryImportStaging(), "{\n"), (try SQLiteImportStaging(inMemory: ()), #"{"resourceType":"Patient","#)] {
            _ = try await StagedImport(importer: try importer(try temporaryStore()), window: 1).run([demoBundle], staging: staging, dryRun: true)
            let patient = try #require(try staging.items(group: "Patient/maria-lopez").first { $0.identity == "Patient/maria-lopez" })
            let text = String(decoding: patient.bytes, as: UTF8.self)
            #expect(text.hasPrefix(start), "\(type(of: staging)): \(text.prefix(40))")
        }
    }

    @Test("the samples as files, as a Bundle (JSON and XML) and as NDJSON: the same store as a whole-run import, staged in a scratch database or in memory")
    func samples() async throws {
        try await compare(sampleFiles)
        try await compare(sampleFiles, staging: { InMemoryImportStaging() })
        try await compare([demoBundle])
        try await compare([projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.xml").path])
        try await compare([projectRoot.appendingPathComponent("FHIRSamples/ndjson").path])
        // Everything at once: each resource read several times, collapsed as the whole run does.
        try await compare([projectRoot.appendingPathComponent("FHIRSamples").path], window: 1)
        try await compare([projectRoot.appendingPathComponent("FHIRSamples").path], window: 1, staging: { InMemoryImportStaging() })
    }

    @Test("the Synthea bundles and the official examples: the same store as a whole-run import; one patient at a time or four at once, the same store and report")
    func sharedData() async throws {
        guard let shared = sharedRoot else { return skipNotice("staged import of ../shared") }
        let synthea = try FileManager.default.contentsOfDirectory(atPath: shared.appendingPathComponent("synthea").path).sorted()
            .prefix(5).map { shared.appendingPathComponent("synthea/\($0)").path }
        try await compare(Array(synthea))
        try await compare(Array(synthea), staging: { InMemoryImportStaging() })
        try await serialEqualsParallel(Array(synthea))
        // The examples' Patients without an id are refused both ways, never merged into one. The
        // patients come in another order: a whole run lists them as their resources come, a
        // staged one as their groups were first staged.
        let examples = shared.appendingPathComponent("fhir-r4/examples/json").path
        try await compare([examples], inOrder: false)
        try await serialEqualsParallel([examples])
    }

    @Test("resources of types no mapping maps are skimmed, not validated: a Claim with a bad code and an unknown element leaves the patient's import as it was, without the warnings a whole-run import gives; a Claim that is not JSON refuses the file with its line")
    func skimmedTypes() async throws {
        let text = try String(contentsOfFile: demoBundle, encoding: .utf8)
        let claim = """
            {"fullUrl": "urn:uuid:claim-1", "resource": {"resourceType": "Claim", "id": "claim-1", "status": "not-a-status",
              "made-up": {"a": [1, 2]}, "patient": {"reference": "Patient/maria-lopez"}}},
            """
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-skim-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        func bundle(_ name: String, _ entry: String) throws -> String {
            let path = directory.appendingPathComponent(name).path
            try text.replacingOccurrences(of: "\"entry\": [\n", with: "\"entry\": [\n" + entry + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let withClaim = try bundle("with-claim.json", claim)
        let plain = try temporaryStore(), skimmed = try temporaryStore()
        let plainReport = try await StagedImport(importer: try importer(plain)).run([demoBundle], staging: try SQLiteImportStaging(inMemory: ()))
        let report = try await StagedImport(importer: try importer(skimmed)).run([withClaim], staging: try SQLiteImportStaging(inMemory: ()))
        #expect(report.unmapped["Claim"] == 1 && report.resources == plainReport.resources + 1)
        #expect(!report.notes.contains { $0.kind == .error } && report.counts == plainReport.counts)
        #expect(try StoreSnapshot.json(skimmed, notes: [], timeZone: newYork) == StoreSnapshot.json(plain, notes: [], timeZone: newYork))
        // A whole-run import (leniently, as both read) warns about the Claim's code and element.
        let whole = try importer(try temporaryStore()).run([withClaim])
        let claimNotes = whole.notes.filter { $0.kind == .warning && $0.message.contains("not-a-status") || $0.message.contains("'made-up' in Claim") }
        #expect(claimNotes.map(\.origin) == [withClaim + ":10:98", withClaim + ":11:3"])
        #expect(Set(report.notes.map(\.description)) == Set(whole.notes.map(\.description)).subtracting(claimNotes.map(\.description)))
        // Skimmed is still read as JSON: a broken Claim is the file's error, with its line.
        let broken = try bundle("broken-claim.json", claim.replacingOccurrences(of: "[1, 2]", with: "[1, 2"))
        let refused = try await StagedImport(importer: try importer(try temporaryStore())).run([broken], staging: try SQLiteImportStaging(inMemory: ()))
        #expect(refused.patients.isEmpty)
        #expect(refused.notes.contains { $0.kind == .error && $0.origin.hasPrefix(broken + ":11:") }, "\(refused.notes)")
    }

    @Test("a large import keeps the first 20 quiet notes of each kind and spills the rest to a file: the report's JSON and counts hold them all, as an import that kept them in memory")
    func spilledNotes() async throws {
        guard let shared = sharedRoot else { return skipNotice("spilled notes of the Synthea bundles") }
        let synthea = try FileManager.default.contentsOfDirectory(atPath: shared.appendingPathComponent("synthea").path).sorted()
            .prefix(4).map { shared.appendingPathComponent("synthea/\($0)").path }
        let held = try await StagedImport(importer: try importer(try temporaryStore()), window: 2).run(synthea, staging: try SQLiteImportStaging(inMemory: ()))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-spill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var spill: SpilledNotes? = SpilledNotes(directory: directory.path, threshold: 100)
        let spilled = try await StagedImport(importer: try importer(try temporaryStore()), window: 2)
            .run(synthea, staging: try SQLiteImportStaging(inMemory: ()), spill: spill)
        // Hundreds of skipped Observations: no more than the threshold in memory (the first 20
        // and those since the last spill), the rest in the file.
        #expect(held.notes.filter { $0.kind == .skipped }.count > 300)
        #expect(spilled.notes.filter { $0.kind == .skipped }.count <= 100)
        #expect(Array(spilled.notes.filter { $0.kind == .skipped }.prefix(20)) == Array(held.notes.filter { $0.kind == .skipped }.prefix(20)))
        #expect(spilled.notes.filter { ![.skipped, .ended, .deleted].contains($0.kind) } == held.notes.filter { ![.skipped, .ended, .deleted].contains($0.kind) })
        #expect(try spilled.allNotes().map(\.description).sorted() == held.notes.map(\.description).sorted())
        #expect(spilled.noteCounts == held.noteCounts && spilled.logCounts == held.logCounts)
        // --report's JSON: every note; the log's: those in memory and how many were spilled.
        func notes(_ json: JSONValue) -> [String] { (json["notes"]?.arrayValue ?? []).map { $0.bytes(sortedKeys: true) }.map { String(decoding: $0, as: UTF8.self) }.sorted() }
        var full: [UInt8] = []
        try spilled.writeJSON(dryRun: false, withSpilledNotes: true) { full += $0 }
        let heldJSON = try JSONValue.parse(held.json(dryRun: false))
        #expect(notes(try JSONValue.parse(full)) == notes(heldJSON))
        #expect(try JSONValue.parse(full)["patients"] == heldJSON["patients"])
        let logged = try JSONValue.parse(spilled.json(dryRun: false))
        #expect(logged["notes"]?.arrayValue?.count == spilled.notes.count)
        #expect(logged["spilledNotes"]?.numberValue == Double(held.notes.count - spilled.notes.count))
        #expect(heldJSON["spilledNotes"] == nil)
        // The file goes with the spill.
        let files = { try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasPrefix("caregate-notes-") } }
        #expect(try files().count == 1)
        spill = nil
        _ = consume spilled
        #expect(try files().isEmpty)
    }

    @Test("patients stored many to a commit, each in a savepoint: a patient the store refuses keeps nothing and the others are stored, as one transaction per patient leaves them")
    func groupedCommits() async throws {
        guard let shared = sharedRoot else { return skipNotice("grouped commits on the Synthea bundles") }
        let synthea = try FileManager.default.contentsOfDirectory(atPath: shared.appendingPathComponent("synthea").path).sorted()
            .prefix(3).map { shared.appendingPathComponent("synthea/\($0)").path }
        let probe = try importer(try temporaryStore()).run(synthea)
        let refused = try #require(probe.patients.dropFirst().first?.patientID)
        /// A store whose database refuses that patient's Patient entry (a trigger: a real SQLite error).
        func refusing() throws -> SQLiteCarePlanStore {
            let store = try temporaryStore()
            let queue = try DatabaseQueue(path: store.path)
            try queue.write { db in
                // Triggers take no bound values: the id (letters, digits, '/' and '-') spelled in.
                #expect(refused.allSatisfy { $0.isLetter || $0.isNumber || $0 == "/" || $0 == "-" })
                try db.execute(sql: "CREATE TRIGGER refuse BEFORE INSERT ON entity_version WHEN NEW.kind = 'patient' AND NEW.id = '\(refused)' BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
            }
            try queue.close()
            return store
        }
        let onePerPatient = try refusing(), grouped = try refusing()
        let whole = try importer(onePerPatient).run(synthea)
        let staged = try await StagedImport(importer: try importer(grouped), window: 2).run(synthea, staging: try SQLiteImportStaging(inMemory: ()))
        #expect(whole.failedPatients.map(\.patientID) == [refused])
        #expect(staged.failedPatients.map(\.patientID) == [refused])
        #expect(staged.failedPatients.first?.failure == whole.failedPatients.first?.failure)
        #expect(staged.failedPatients.first?.failure?.hasSuffix("the database refused it: refused by the test") == true, "\(staged.failedPatients)")
        #expect(staged.patients.count == 3 && staged.counts == whole.counts)
        #expect(try StoreSnapshot.json(grouped, notes: [], timeZone: newYork) == StoreSnapshot.json(onePerPatient, notes: [], timeZone: newYork))
        #expect(try grouped.fetchPatients().map(\.id).sorted() == probe.patients.map(\.patientID).filter { $0 != refused }.sorted())
    }
}
