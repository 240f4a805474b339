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
        #expect(run.stderr.contains("exported 0 Observations, 1 MedicationAdministration"), "\(run.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(files.count == 1 && files[0].hasPrefix("MedicationAdministration-"), "\(files)")
    }

    /// A store with Sam's three surveys answered: the PHQ-9 whole, the weight and height whole,
    /// the GAD-7 without its last (required) question, and the weight and height again with text
    /// where a quantity goes.
    func answeredSurveys(_ name: String) async throws -> String {
        let store = cli.temporaryPath(name)
        try? FileManager.default.removeItem(atPath: store)
        let imported = try await cli.caregate(["import", "FHIRSamples/surveys/sam-rivera-surveys-bundle.json", "--questionnaires", "FHIRSamples/surveys/questionnaires",
                                               "--store", store, "--tz", "America/New_York"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let care = try SQLiteCarePlanStore(path: store)
        let tasks = Dictionary(uniqueKeysWithValues: try care.fetchTasks().map { ($0.id, $0) })
        let phq = try #require(tasks["CarePlan/sam-rivera-wellbeing/44249-1"])
        let body = try #require(tasks["CarePlan/sam-rivera-wellbeing/29463-7"])
        let gad = try #require(tasks["ServiceRequest/sam-rivera-gad-7"])
        let coded = { (code: String, linkId: String) in OutcomeValue(.text(#"{"code":"\#(code)","system":"http://loinc.org"}"#), kind: linkId) }
        let phqValues = zip(["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"], [1, 2, 0, 3, 1, 1, 2, 0, 0])
            .map { coded(["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"][$1], "/\($0)") }
        let gadValues = ["/69725-0", "/68509-9", "/69733-4", "/69734-2", "/69735-9", "/69689-8"].map { coded("LA6569-3", $0) }
        try care.add([
            .outcome(Outcome(taskUUID: phq.uuid, taskOccurrenceIndex: 0, values: phqValues, id: "phq-1")),
            .outcome(Outcome(taskUUID: body.uuid, taskOccurrenceIndex: 0,
                             values: [OutcomeValue(.double(81.5), kind: "weight", units: "kg"), OutcomeValue(.integer(178), kind: "height", units: "cm")], id: "body-1")),
            .outcome(Outcome(taskUUID: gad.uuid, taskOccurrenceIndex: 0, values: gadValues, id: "gad-1")),
            .outcome(Outcome(taskUUID: body.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.text("heavy"), kind: "weight")], id: "body-2")),
        ])
        return store
    }

    @Test("refused surveys are named on standard error (outcome, task, patient, reason), written nowhere, and make the exit status 1 unless --allow-refusals; the summary counts what was written by type")
    func refusals() async throws {
        let store = try await answeredSurveys("export-refusals.sqlite")
        let file = cli.temporaryPath("surveys.ndjson")
        let run = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "-o", file])
        #expect(run.status == 1, "\(run.stderr)")
        let refused = run.stderr.split(separator: "\n").filter { $0.hasPrefix("refused: ") }
        #expect(refused.count == 2, "\(run.stderr)")
        #expect(refused.contains { $0.contains("outcome gad-1 (occurrence 0 of task ServiceRequest/sam-rivera-gad-7, patient Patient/sam-rivera): item '/69736-7': required, and not answered") },
                "\(run.stderr)")
        #expect(refused.contains { $0.contains("outcome body-2 (occurrence 1 of task CarePlan/sam-rivera-wellbeing/29463-7, patient Patient/sam-rivera): item 'weight'") },
                "\(run.stderr)")
        #expect(run.stderr.contains("2 outcomes were refused (named above) and written nowhere; --allow-refusals accepts that"), "\(run.stderr)")
        // The file holds the two accepted surveys' transactions, nothing else.
        let lines = try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix(#"{"resourceType":"Bundle""#) } && !lines.contains { $0.contains("OperationOutcome") })
        var written: [String: Int] = [:]
        for line in lines {
            for entry in try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["entry"] as? [[String: Any]] ?? [] {
                written[(entry["resource"] as? [String: Any])?["resourceType"] as? String ?? "?", default: 0] += 1
            }
        }
        #expect(written["QuestionnaireResponse"] == 2 && (written["Observation"] ?? 0) >= 2, "\(written)")
        #expect(run.stderr.contains("exported \(written["Observation"]!) Observations, 2 QuestionnaireResponses to \(file)"), "\(run.stderr)")
        // What docs/pushing.md shows, line for line.
        let guide = try String(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("docs/pushing.md"), encoding: .utf8)
        for line in run.stderr.split(separator: "\n") {
            #expect(guide.contains(line.replacingOccurrences(of: file, with: "surveys.ndjson")), "docs/pushing.md lacks: \(line)")
        }
        // A Bundle: the same refusals said, none of them in it; accepted, exit 0.
        let bundle = cli.temporaryPath("surveys.json")
        let allowed = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--format", "bundle", "-o", bundle, "--allow-refusals"])
        #expect(allowed.status == 0, "\(allowed.stderr)")
        #expect(allowed.stderr.split(separator: "\n").filter { $0.hasPrefix("refused: ") }.count == 2, "\(allowed.stderr)")
        #expect(allowed.stderr.contains("2 outcomes were refused (named above) and written nowhere"))
        let entries = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: bundle))) as? [String: Any])["entry"] as? [[String: Any]]
        #expect(entries?.count == written.values.reduce(0, +))
        let refusedBundle = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--format", "bundle", "-o", cli.temporaryPath("refused.json")])
        #expect(refusedBundle.status == 1)
    }
}
