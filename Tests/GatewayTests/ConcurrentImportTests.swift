import CareStore
import FHIR
import Foundation
import Mapping
import Testing
@testable import Gateway

/// Imports racing each other on one store file: each patient is read, planned and written in
/// one transaction, so no writer plans from a state another has changed under it.
@Suite("Concurrent imports")
struct ConcurrentImportTests {
    /// The sample Patient and a version of the sample CarePlan with its own title, in a folder.
    static func variant(_ title: String, in folder: URL) throws -> [String] {
        let samples = projectRoot.appendingPathComponent("FHIRSamples/json")
        let plan = try String(contentsOf: samples.appendingPathComponent("CarePlan-maria-lopez-home-care.json"), encoding: .utf8)
        let retitled = plan.replacingOccurrences(of: #""title": "Home care after hospital discharge""#, with: #""title": "\#(title)""#)
        #expect(retitled != plan, "the sample's title was replaced")
        let directory = folder.appendingPathComponent(title)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try retitled.write(to: directory.appendingPathComponent("plan.json"), atomically: true, encoding: .utf8)
        return [samples.appendingPathComponent("Patient-maria-lopez.json").path, directory.appendingPathComponent("plan.json").path]
    }

    @Test("8 writers, each with its own connection, import 5 versions each of one CarePlan: every version is in the history, one tip, nothing lost")
    func inProcessWriters() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-concurrent-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        let mappings = try MappingSet.load([projectRoot.appendingPathComponent("Mappings").path])
        var titles: [String] = []
        for writer in 0..<8 { for round in 0..<5 { titles.append("Plan w\(writer) r\(round)") } }
        let files = try Dictionary(uniqueKeysWithValues: titles.map { ($0, try Self.variant($0, in: folder)) })
        let failures = try await withThrowingTaskGroup(of: [String].self) { group in
            for writer in 0..<8 {
                let store = try SQLiteCarePlanStore(path: path)
                group.addTask {
                    try await store.perform { store in
                        var failures: [String] = []
                        for round in 0..<5 {
                            let report = FHIRImporter(mappings: mappings, store: store, timeZone: newYork).run(files["Plan w\(writer) r\(round)"]!)
                            failures += report.failedPatients.compactMap(\.failure)
                        }
                        return failures
                    }
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(failures.isEmpty, "\(failures)")
        let store = try SQLiteCarePlanStore(path: path)
        let history = try store.fetchCarePlans(EntityQuery(versions: .history))
        #expect(Set(history.map(\.title)) == Set(titles), "every imported version is in the history")
        #expect(history.count == titles.count)
        #expect(try store.fetchCarePlans().count == 1, "one current version")
        #expect(try store.conflicts().isEmpty, "one tip per id: every version linked after the one before it")
        #expect(try store.fetchPatients(EntityQuery(versions: .history)).count == 1, "the patient was created once")
    }
}
