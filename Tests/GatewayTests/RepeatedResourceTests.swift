import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import Gateway

@Suite("Resources read more than once in one import")
struct RepeatedResourceTests {
    /// A folder with the given files (name: JSON text).
    func folder(_ files: [String: String]) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-repeated-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        for (name, text) in files { try text.write(to: url.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        return url
    }

    @Test("the same Bundle twice, or a file and its copy, gives one store entry per resource (15 created, not 26)")
    func identicalCopies() throws {
        let copy = try folder([:]).appendingPathComponent("copy-of-demo.json")
        try FileManager.default.copyItem(atPath: demoBundle, toPath: copy.path)
        for paths in [[demoBundle, demoBundle], [demoBundle, copy.path]] {
            let store = try temporaryStore()
            let report = try importer(store).run(paths)
            #expect(report.counts[.create] == 15, "\(paths)")
            #expect(report.resources == 15 && report.repeated == 15)
            #expect(try store.fetchTasks().allSatisfy { !$0.id.contains("#") })
            #expect(!report.notes.contains { $0.kind == .warning }, "identical copies are not worth a warning")
        }
    }

    /// The sample Patient with a versionId, a lastUpdated and a family name.
    func patient(version: String?, updated: String?, family: String) throws -> String {
        var meta: [String] = []
        if let version { meta.append(#""versionId": "\#(version)""#) }
        if let updated { meta.append(#""lastUpdated": "\#(updated)""#) }
        return #"{"resourceType": "Patient", "id": "p1", \#(meta.isEmpty ? "" : #""meta": {\#(meta.joined(separator: ", "))}, "#)"name": [{"family": "\#(family)", "given": ["Ana"]}], "gender": "female", "birthDate": "1960-02-03"}"#
    }

    func importedFamily(_ files: [String: String], order: [String]) throws -> (family: String?, notes: [ImportNote]) {
        let directory = try folder(files)
        let store = try temporaryStore()
        let report = try importer(store).run(order.map { directory.appendingPathComponent($0).path })
        #expect(report.failedPatients.isEmpty && report.resources == 1 && report.repeated == 1)
        return (try store.fetchPatients().first?.name.familyName, report.notes.filter { $0.kind == .warning })
    }

    @Test("different contents for one identity: the higher versionId wins whichever is read first, and both files are named")
    func newerVersion() throws {
        let files = ["a.json": try patient(version: "2", updated: nil, family: "Newer"), "b.json": try patient(version: "1", updated: nil, family: "Older")]
        for order in [["a.json", "b.json"], ["b.json", "a.json"]] {
            let (family, warnings) = try importedFamily(files, order: order)
            #expect(family == "Newer", "\(order)")
            #expect(warnings.count == 1)
            let warning = try #require(warnings.first)
            #expect(warning.resource == "Patient/p1")
            #expect(warning.message.contains("versionId 2 is newer than 1"))
            #expect(warning.description.contains("a.json") && warning.description.contains("b.json"), "\(warning)")
        }
    }

    @Test("without versionIds, the later meta.lastUpdated wins (zones compared as instants); without either, the copy read last")
    func lastUpdatedThenOrder() throws {
        // 10:00+01:00 is 09:00Z, before 09:30Z.
        let files = ["a.json": try patient(version: nil, updated: "2026-11-02T10:00:00+01:00", family: "Earlier"),
                     "b.json": try patient(version: nil, updated: "2026-11-02T09:30:00Z", family: "Later")]
        for order in [["a.json", "b.json"], ["b.json", "a.json"]] {
            let (family, warnings) = try importedFamily(files, order: order)
            #expect(family == "Later", "\(order)")
            #expect(warnings.first?.message.contains("meta.lastUpdated 2026-11-02T09:30:00Z is later than 2026-11-02T10:00:00+01:00") == true)
        }
        let bare = ["a.json": try patient(version: nil, updated: nil, family: "First"), "b.json": try patient(version: nil, updated: nil, family: "Second")]
        #expect(try importedFamily(bare, order: ["a.json", "b.json"]).family == "Second")
        let (family, warnings) = try importedFamily(bare, order: ["b.json", "a.json"])
        #expect(family == "First")
        #expect(warnings.first?.message.contains("neither meta.versionId nor meta.lastUpdated tells them apart") == true)
    }
}
