import CareStore
import Foundation
import Testing

@Suite("caregate export")
struct ExportCommandTests {
    let cli = CommandLineTests()

    @Test("exports app outcomes as NDJSON, a transaction Bundle (JSON or XML) or one file per Observation; imported results are not sent back")
    func export() async throws {
        let store = cli.temporaryPath("export.sqlite")
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        // Only imported outcomes so far: nothing to export unless asked.
        let none = try await cli.caregate(["export", "--store", store])
        #expect(none.status == 0 && none.stdout.isEmpty)
        #expect(none.stderr.contains("exported 0 Observations"))
        let imported = try await cli.caregate(["export", "--store", store, "--include-imported", "--tz", "America/New_York"])
        let lines = imported.stdout.split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("{\"resourceType\":\"Observation\"") })
        let bundlePath = cli.temporaryPath("push.xml")
        let bundle = try await cli.caregate(["export", "--store", store, "--include-imported", "--format", "bundle", "-o", bundlePath])
        #expect(bundle.status == 0)
        #expect(try String(contentsOfFile: bundlePath, encoding: .utf8).contains("<type value=\"transaction\"/>"))
        let directory = cli.temporaryPath("observations")
        #expect(try await cli.caregate(["export", "--store", store, "--include-imported", "--format", "json", "-o", directory]).status == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).count == 2)
    }

    @Test("with a site mapping that says export-as MedicationAdministration, a recorded dose is written as one, named as one")
    func administrations() async throws {
        let store = cli.temporaryPath("export-ma.sqlite")
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        let care = try SQLiteCarePlanStore(path: store)
        let metformin = try #require(care.fetchTasks(EntityQuery(ids: ["MedicationRequest/metformin/dosage-1"])).first)
        try care.add([.outcome(Outcome(taskUUID: metformin.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.double(500), kind: "dose", units: "mg")]))])
        // A site folder: the shipped mappings, with medicationrequest.yaml replaced by one that extends it.
        let site = cli.temporaryPath("site-mappings")
        try? FileManager.default.removeItem(atPath: site)
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        let shipped = CommandLineTests.projectRoot.appendingPathComponent("Mappings")
        try """
            caregate-mapping: 1
            resource: MedicationRequest
            extends: \(shipped.appendingPathComponent("medicationrequest.yaml").path)
            export-as:
              resource: MedicationAdministration
              medication-system: http://www.nlm.nih.gov/research/umls/rxnorm
            """.write(toFile: site + "/medicationrequest.yaml", atomically: true, encoding: .utf8)
        let others = try FileManager.default.contentsOfDirectory(atPath: shipped.path).filter { $0.hasSuffix(".yaml") && $0 != "medicationrequest.yaml" }
        let mappings = others.flatMap { ["--mappings", shipped.appendingPathComponent($0).path] }
            + ["--mappings", shipped.appendingPathComponent("shared").path, "--mappings", site + "/medicationrequest.yaml"]
        let directory = cli.temporaryPath("administrations")
        try? FileManager.default.removeItem(atPath: directory)
        let run = try await cli.caregate(["export", "--store", store, "--format", "json", "-o", directory, "--tz", "America/New_York"] + mappings)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("exported 0 Observations and 1 MedicationAdministration"), "\(run.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.count == 1 && files[0].hasPrefix("MedicationAdministration-"), "\(files)")
    }
}
