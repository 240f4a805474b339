import CareStore
import FHIR
import FHIRClient
import Foundation
import Testing

/// `caregate export --profiles`: what leaves claims the target's profiles and meets them, checked
/// again here by `caregate validate` on what was written.
@Suite("caregate export --profiles: US Core claims, checked before anything is written")
struct ExportProfilesTests {
    let cli = CommandLineTests()
    static let packages = CommandLineTests.projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages")
    static func package(_ version: String) -> String { packages.appendingPathComponent("hl7.fhir.us.core-\(version).tgz").path }
    static var available: Bool {
        if FileManager.default.fileExists(atPath: packages.path) { return true }
        print("SKIPPED caregate export --profiles: ../shared/fhir-packages is not present")
        return false
    }

    /// María imported, with a weight, a blood pressure (two values) and a walk recorded by her app.
    func recorded(_ name: String) async throws -> String {
        let store = cli.temporaryPath(name)
        try? FileManager.default.removeItem(atPath: store)
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let care = try SQLiteCarePlanStore(path: store)
        let tasks = Dictionary(uniqueKeysWithValues: try care.fetchTasks().map { ($0.id, $0) })
        let weight = try #require(tasks["CarePlan/maria-lopez-home-care/29463-7"])
        let pressure = try #require(tasks["CarePlan/maria-lopez-home-care/85354-9"])
        let walk = try #require(tasks["CarePlan/maria-lopez-home-care/229065009"])
        try care.add([
            .outcome(Outcome(taskUUID: weight.uuid, taskOccurrenceIndex: 3, values: [OutcomeValue(.double(77.9), units: "kg")], id: "weight-3")),
            .outcome(Outcome(taskUUID: pressure.uuid, taskOccurrenceIndex: 7, values: [OutcomeValue(.integer(128), kind: "8480-6", units: "mm[Hg]"),
                                                                                     OutcomeValue(.integer(82), kind: "8462-4", units: "mm[Hg]")], id: "bp-7")),
            .outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: 2, values: [OutcomeValue(.boolean(true))], id: "walk-2")),
        ])
        return store
    }

    /// A site's codes table in `folder`: weights in stones, which US Core's body-weight profile refuses.
    static func stonesTable(in folder: String) throws {
        try """
            caregate-mapping: 1
            description: A site's export codes.
            tables:
              observation-codes:
                "29463-7":
                  code: {system: http://loinc.org, code: 29463-7, display: Body weight, unit: "[stone_av]"}
                  category: vital-signs
            """.write(toFile: folder + "/observation-codes.yaml", atomically: true, encoding: .utf8)
    }

    /// The resources of an NDJSON export: each line's, or its transaction's entries'.
    func lines(_ path: String) throws -> [[String: Any]] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").flatMap { line -> [[String: Any]] in
            let resource = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
            guard resource["resourceType"] as? String == "Bundle" else { return [resource] }
            return (resource["entry"] as? [[String: Any]] ?? []).compactMap { $0["resource"] as? [String: Any] }
        }
    }

    func observations(_ path: String) throws -> [[String: Any]] { try lines(path).filter { $0["resourceType"] as? String == "Observation" } }

    func claims(_ resource: [String: Any]) -> [String] { (resource["meta"] as? [String: Any])?["profile"] as? [String] ?? [] }
    func tags(_ resource: [String: Any]) -> [String] { ((resource["meta"] as? [String: Any])?["tag"] as? [[String: Any]] ?? []).compactMap { $0["code"] as? String } }

    @Test("each vital sign claims US Core's profile for its code (6.1.0) or R4's (3.1.1), every resource the patient-supplied tag, and caregate validate finds no error in them", arguments: ["6.1.0", "3.1.1"])
    func claimsAndMeets(version: String) async throws {
        guard Self.available else { return }
        let store = try await recorded("export-profiles-\(version).sqlite")
        let output = cli.temporaryPath("us-core-\(version).ndjson")
        let run = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--profiles", "us-core-\(version)", "--package", Self.package(version), "-o", output])
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.contains("exported 3 Observations, 3 Provenances"), "\(run.stderr)")
        let written = try observations(output)
        let byCode = Dictionary(uniqueKeysWithValues: written.map { ((($0["code"] as? [String: Any])?["coding"] as? [[String: Any]])?.first?["code"] as? String ?? "text", $0) })
        let expected = version == "6.1.0"
            ? ["29463-7": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight", "85354-9": "http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure"]
            : ["29463-7": "http://hl7.org/fhir/StructureDefinition/bodyweight", "85354-9": "http://hl7.org/fhir/StructureDefinition/bp"]
        for (code, profile) in expected { #expect(claims(try #require(byCode[code])) == [profile], "\(code)") }
        #expect(written.allSatisfy { tags($0) == ["patient-supplied"] })
        // The walk (category activity): US Core 6.1.0's simple observation; 3.1.1 has none for it.
        let walk = try #require(byCode["229065009"])
        #expect(claims(walk) == (version == "6.1.0" ? ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-simple-observation"] : []))
        // Each in a transaction with its Provenance: the patient its author, US Core's profile claimed.
        let provenances = try lines(output).filter { $0["resourceType"] as? String == "Provenance" }
        #expect(provenances.count == 3 && provenances.allSatisfy { claims($0) == ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-provenance"] })
        #expect(provenances.allSatisfy { String(describing: $0["agent"] ?? "").contains("Patient/maria-lopez") })
        // Checked again, from the file, by the command a CI job would run.
        let check = try await cli.caregate(["validate", output, "--package", Self.package(version)])
        #expect(check.status == 0, "\(check.stdout)")
        #expect(check.stderr.contains("3 resources in 1 file checked: 0 errors"), "\(check.stderr)")
        // The same as a transaction Bundle in XML: each entry meets what it claims.
        let xml = cli.temporaryPath("us-core-\(version).xml")
        let bundle = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--profiles", "us-core-\(version)", "--package", Self.package(version),
                                             "--format", "bundle", "-o", xml])
        #expect(bundle.status == 0, "\(bundle.stderr)")
        #expect(try String(contentsOfFile: xml, encoding: .utf8).contains("<profile value=\"\(expected["29463-7"]!)\"/>"))
        let xmlCheck = try await cli.caregate(["validate", xml, "--package", Self.package(version)])
        #expect(xmlCheck.status == 0 && !xmlCheck.stdout.contains(": error:"), "\(xmlCheck.stdout)")
    }

    @Test("a mapping that breaks the profile refuses the outcome before anything is written, naming the element, the rule and the profile")
    func refusal() async throws {
        guard Self.available else { return }
        let store = try await recorded("export-profiles-broken.sqlite")
        // A site's codes table: weights in stones, which US Core's body-weight profile refuses.
        let site = cli.temporaryPath("site-codes")
        try? FileManager.default.removeItem(atPath: site)
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        try Self.stonesTable(in: site)
        let output = cli.temporaryPath("broken.ndjson")
        let run = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--mappings", site, "--profiles", "us-core-6.1.0", "--package", Self.package("6.1.0"), "-o", output])
        #expect(run.status == 1)
        #expect(run.stderr.contains("refused: outcome weight-3 (occurrence 3 of task CarePlan/maria-lopez-home-care/29463-7, patient Patient/maria-lopez): breaks the profiles of us-core-6.1.0: error: Observation.valueQuantity.code: the code provided ([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required) [Observation.value[x]:valueQuantity.code in http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0]"), "\(run.stderr)")
        #expect(run.stderr.contains("exported 2 Observations"))
        #expect(try lines(output).allSatisfy { !String(describing: $0).contains("stone") })
        // The same store as R4 alone: nothing refused.
        let plain = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--mappings", site, "-o", cli.temporaryPath("plain.ndjson")])
        #expect(plain.status == 0, "\(plain.stderr)")
    }

    @Test("surveys from the shared questionnaires: with 6.1.0 the response claims US Core's QuestionnaireResponse profile and the score its screening and assessment profile; with 3.1.1 (which has neither) the weight its vital sign; everything meets them, in JSON and XML", arguments: ["6.1.0", "3.1.1"])
    func surveys(version: String) async throws {
        guard Self.available else { return }
        let store = try await ExportCommandTests().answeredSurveys("export-profiles-surveys-\(version).sqlite")
        let output = cli.temporaryPath("surveys-\(version).ndjson")
        let common = ["export", "--store", store, "--tz", "America/New_York", "--profiles", "us-core-\(version)", "--package", Self.package(version), "--allow-refusals"]
        let run = try await cli.caregate(common + ["-o", output])
        let resources = try lines(output)
        #expect(!resources.isEmpty, "\(run.stderr)")
        let responses = resources.filter { $0["resourceType"] as? String == "QuestionnaireResponse" }
        let response = version == "6.1.0" ? ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-questionnaireresponse"] : []
        #expect(!responses.isEmpty && responses.allSatisfy { claims($0) == response })
        let observations = resources.filter { $0["resourceType"] as? String == "Observation" }
        let total = try #require(observations.first { String(describing: $0["code"] ?? "").contains("44261-6") })
        #expect(claims(total) == (version == "6.1.0" ? ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-observation-screening-assessment"] : []))
        // A weight a form extracted is a vital sign too: its body-weight profile, with the category it needs.
        let weight = try #require(observations.first { String(describing: $0["code"] ?? "").contains("29463-7") })
        #expect(claims(weight) == [version == "6.1.0" ? "http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight" : "http://hl7.org/fhir/StructureDefinition/bodyweight"])
        #expect(String(describing: weight["category"] ?? "").contains("vital-signs"))
        #expect(resources.filter { $0["resourceType"] as? String == "Provenance" }.count == responses.count, "one Provenance per survey")
        #expect(!run.stderr.contains("breaks the profiles"), "\(run.stderr)")
        let check = try await cli.caregate(["validate", output, "--package", Self.package(version)])
        #expect(!check.stdout.contains(": error:"), "\(check.stdout)")
        // The same as one transaction Bundle in XML.
        let xml = cli.temporaryPath("surveys-\(version).xml")
        #expect(try await cli.caregate(common + ["--format", "bundle", "-o", xml]).status == 0)
        let xmlCheck = try await cli.caregate(["validate", xml, "--package", Self.package(version)])
        #expect(xmlCheck.status == 0 && !xmlCheck.stdout.contains(": error:"), "\(xmlCheck.stdout)")
    }

    @Test("a target whose package is not loaded is a usage error naming the package")
    func missingPackage() async throws {
        let store = try await recorded("export-profiles-missing.sqlite")
        let run = try await cli.caregate(["export", "--store", store, "--profiles", "us-core-6.1.0"])
        #expect(run.status == 64 || run.status == 2, "\(run.status)")
        #expect(run.stderr.contains("the profile target us-core-6.1.0 needs the package hl7.fhir.us.core#6.1.0, which is not loaded"), "\(run.stderr)")
    }
}

/// `caregate serve` with `ehr.profiles`: what breaks the profile never reaches the EHR (sekmet-fhir).
@Suite("caregate serve with ehr.profiles: a profile's refusal is a dead letter, sent once after the fix", .serialized)
struct ServeProfilesTests {
    let cli = CommandLineTests()

    /// Observations on the EHR with this LOINC code for María.
    func count(_ code: String, on client: FHIRRESTClient) async throws -> [Element] {
        try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("code", "http://loinc.org|\(code)")])
    }

    @Test("a weight in stones is dead-lettered naming the element and profile, the EHR's count unchanged; the blood pressure arrives claiming US Core; after the mapping is fixed one push --retry-failed sends the weight once")
    func deadLetterThenFix() async throws {
        guard ExportProfilesTests.available, let ehr = await LocalFHIRServer() else { return }
        let client = try await seededWithSamples(ehr)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-serve-profiles-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("site"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try await ExportProfilesTests().recorded("serve-profiles.sqlite")
        try FileManager.default.copyItem(atPath: store, toPath: dir.appendingPathComponent("care.sqlite").path)
        try ExportProfilesTests.stonesTable(in: dir.appendingPathComponent("site").path)
        let package = ExportProfilesTests.package("6.1.0")
        try ServeProcess.writeConfig(in: dir, ehr: ehr.base, ehrLines: ["mappings: [site]", "profiles: us-core-6.1.0", "packages: [\(package)]"])
        let weightsBefore = try await count("29463-7", on: client).count
        let path = dir.appendingPathComponent("care.sqlite").path
        do {
            let serve = try ServeProcess(directory: dir)
            defer { serve.kill() }
            let settled = try await eventually(30) { let c = try SQLiteCarePlanStore(path: path).outboxCounts(); return c.pushed == 2 && c.failed == 1 }
            let counts = try SQLiteCarePlanStore(path: path).outboxCounts()
            #expect(settled, "\(counts)")
        }
        #expect(try await count("29463-7", on: client).count == weightsBefore, "the weight never reached the EHR")
        let pressure = try #require(try await count("85354-9", on: client).first { $0.first("identifier.value")?.value?.hasSuffix("/bp-7") == true })
        #expect(pressure["meta"]?.children(named: "profile").map(\.value) == ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure"])
        let status = try await cli.caregate(["status", "--store", path])
        #expect(status.stdout.contains("failed urn:caregate:outcome|Patient%2Fmaria-lopez/weight-3 after 1 attempt(s): outcome weight-3 (occurrence 3 of task CarePlan/maria-lopez-home-care/29463-7, patient Patient/maria-lopez): breaks the profiles of us-core-6.1.0: error: Observation.valueQuantity.code: the code provided ([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required) [Observation.value[x]:valueQuantity.code in http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0]"), "\(status.stdout)")

        // The site's table fixed (the shipped one used): the dead letter is exported again, checked, and sent once.
        let fixed = try await cli.caregate(["push", "--to", ehr.base, "--store", path, "--tz", "America/New_York", "--retry-failed",
                                            "--profiles", "us-core-6.1.0", "--package", package])
        #expect(fixed.status == 0, "\(fixed.stdout)\(fixed.stderr)")
        #expect(fixed.stdout.contains("1 dead letter exported again"), "\(fixed.stdout)")
        let again = try await cli.caregate(["push", "--to", ehr.base, "--store", path, "--tz", "America/New_York", "--retry-failed",
                                            "--profiles", "us-core-6.1.0", "--package", package])
        #expect(again.status == 0 && again.stdout.contains("0 newly queued, 0 pushed"), "\(again.stdout)")
        let weights = try await count("29463-7", on: client)
        #expect(weights.count == weightsBefore + 1)
        let sent = try #require(weights.first { $0.first("identifier.value")?.value?.hasSuffix("/weight-3") == true })
        #expect(sent["meta"]?.children(named: "profile").map(\.value) == ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight"])
        #expect(sent.first("value.code")?.value == "kg")
    }

    @Test("push --retry-failed --patient sends one patient's dead letters again and leaves another patient's where they are")
    func retryIsPerPatient() async throws {
        guard ExportProfilesTests.available, let ehr = await LocalFHIRServer() else { return }
        _ = try await seededWithSamples(ehr)
        let path = try await ExportProfilesTests().recorded("retry-per-patient.sqlite")
        // John: María's plan under his own ids, with a weight of his own.
        let john = try PushTrailTests().johnsBundle()
        #expect(try await cli.caregate(["import", john, "--store", path, "--tz", "America/New_York"]).status == 0)
        let care = try SQLiteCarePlanStore(path: path)
        let johnsWeight = try #require(care.fetchTasks(EntityQuery(ids: ["CarePlan/john-doe-home-care/29463-7"])).first)
        try care.add([.outcome(Outcome(taskUUID: johnsWeight.uuid, taskOccurrenceIndex: 3, values: [OutcomeValue(.double(91.2), units: "kg")], id: "weight-3"))])
        let site = cli.temporaryPath("retry-site")
        try? FileManager.default.removeItem(atPath: site)
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        try ExportProfilesTests.stonesTable(in: site)
        let package = ExportProfilesTests.package("6.1.0")
        let common = ["--to", ehr.base, "--store", path, "--tz", "America/New_York", "--profiles", "us-core-6.1.0", "--package", package]
        let broken = try await cli.caregate(["push"] + common + ["--mappings", site])
        #expect(broken.status == 1)
        #expect(try SQLiteCarePlanStore(path: path).outboxCounts().failed == 2, "both weights are dead letters")
        // Only María's is sent again; John's (the same outcome id, another patient) stays.
        let maria = try await cli.caregate(["push"] + common + ["--retry-failed", "--patient", "Patient/maria-lopez"])
        #expect(maria.status == 0, "\(maria.stdout)\(maria.stderr)")
        #expect(maria.stdout.contains("1 dead letter exported again"), "\(maria.stdout)")
        #expect(maria.stdout.contains("pushed urn:caregate:outcome|Patient%2Fmaria-lopez/weight-3"))
        #expect(!maria.stdout.contains("john-doe"))
        let status = try await cli.caregate(["status", "--store", path])
        #expect(status.stdout.contains("failed urn:caregate:outcome|Patient%2Fjohn-doe/weight-3"), "\(status.stdout)")
        #expect(!status.stdout.contains("failed urn:caregate:outcome|Patient%2Fmaria-lopez"))
        #expect(try await cli.caregate(["push", "--to", ehr.base, "--store", path, "--patient", "Patient/maria-lopez"]).status != 0, "--patient alone is a usage error")
    }
}
