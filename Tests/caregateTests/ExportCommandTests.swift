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

    @Test("a note said of many outcomes is printed for the first 20, then counted in one line; --verbose prints every one")
    func repeatedNotes() async throws {
        let store = cli.temporaryPath("export-notes.sqlite")
        try? FileManager.default.removeItem(atPath: store)
        let care = try SQLiteCarePlanStore(path: store)
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSince1970: 1_767_243_600)  // 2026-01-01 00:00 in New York
        let patient = Patient(id: "Patient/walker", name: PersonName(givenName: "Walker"), effectiveDate: start, timezone: zone)
        let plan = CarePlan(id: "CarePlan/walks", title: "Walks", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        // A task with no group: no observation-codes entry names it, so each export notes it.
        var walk = CareTask(id: "CarePlan/walks/walk", title: "Walk", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
        walk.effectiveDate = start
        let outcomes = (0..<25).map { day in
            CareEntity.outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: day, values: [OutcomeValue(.boolean(true))],
                                       effectiveDate: start.addingTimeInterval(Double(day) * 86_400), timezone: zone))
        }
        try care.add([.patient(patient), .carePlan(plan), .task(walk)] + outcomes)
        let quiet = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "-o", cli.temporaryPath("notes.ndjson")])
        #expect(quiet.status == 0, "\(quiet.stderr)")
        let noted = quiet.stderr.split(separator: "\n").filter { $0.hasPrefix("Observation for outcome") && $0.contains("no observation-codes entry") }
        #expect(noted.count == 20, "\(quiet.stderr)")
        #expect(quiet.stderr.contains("... and 5 more outcomes: no observation-codes entry for the task's group (none): the code is the task's title as text (--verbose prints them)"), "\(quiet.stderr)")
        #expect(quiet.stderr.contains("exported 25 Observations"))
        let verbose = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--verbose", "-o", cli.temporaryPath("notes-all.ndjson")])
        #expect(verbose.stderr.split(separator: "\n").filter { $0.contains("no observation-codes entry") }.count == 25, "\(verbose.stderr)")
        #expect(!verbose.stderr.contains("more outcomes"))
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
