import CareStore
import FHIR
import FHIRClient
import Foundation
import Testing

/// An EHR's own rules, declared in mapping files (`ehr-rules`): the two files docs/pushing.md
/// shows, used as they are, on María's weight, blood pressure and walk.
@Suite("Site rules for an EHR (ehr-rules in mapping files)")
struct SiteRulesTests {
    let cli = CommandLineTests()
    static let oracle = "docs/site-rules/oracle-health-vitals.yaml"
    static let epic = "docs/site-rules/epic-flowsheets.yaml"

    /// The line of `key:` in a file, as a refusal names it.
    static func line(of key: String, in path: String) throws -> Int {
        let lines = try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "\n")
        return try #require(lines.firstIndex { $0.trimmingCharacters(in: .whitespaces) == "\(key):" }) + 1
    }

    @Test("Oracle-style: the walk is refused naming the rule, its file and line; weight and blood pressure pass; a weight in stones is refused at its unit")
    func oracleStyle() async throws {
        let store = try await ExportProfilesTests().recorded("site-rules-oracle.sqlite")
        let output = cli.temporaryPath("oracle.ndjson")
        let run = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--mappings", Self.oracle, "-o", output])
        #expect(run.status == 1)
        let line = try Self.line(of: "listed-vitals", in: Self.oracle)
        #expect(run.stderr.contains("refused: outcome walk-2 (occurrence 2 of task CarePlan/maria-lopez-home-care/229065009, patient Patient/maria-lopez): refused by the site rule 'listed-vitals' (\(Self.oracle):\(line)): the EHR takes no Observation coded http://snomed.info/sct|229065009"), "\(run.stderr)")
        #expect(run.stderr.contains("exported 2 Observations"), "\(run.stderr)")
        // The guide's example line, word for word.
        let guide = try String(contentsOfFile: "docs/pushing.md", encoding: .utf8)
        #expect(guide.contains("refused by the site rule 'listed-vitals' (\(Self.oracle):\(line)): the EHR takes no Observation coded http://snomed.info/sct|229065009"))

        // Weights in stones (a site's codes table beside the rules): the units rule refuses them.
        let site = cli.temporaryPath("oracle-stones")
        try? FileManager.default.removeItem(atPath: site)
        try FileManager.default.createDirectory(atPath: site, withIntermediateDirectories: true)
        try ExportProfilesTests.stonesTable(in: site)
        let stones = try await cli.caregate(["export", "--store", store, "--tz", "America/New_York", "--mappings", site, "--mappings", Self.oracle,
                                             "-o", cli.temporaryPath("stones.ndjson")])
        let units = try Self.line(of: "units", in: Self.oracle)
        #expect(stones.stderr.contains("outcome weight-3 (occurrence 3 of task CarePlan/maria-lopez-home-care/29463-7, patient Patient/maria-lopez): refused by the site rule 'units' (\(Self.oracle):\(units)): Observation.valueQuantity.code: the EHR takes http://loinc.org|29463-7 in [lb_av], g, kg, not [stone_av]"), "\(stones.stderr)")
    }

    @Test("Epic-style: each vital gets its flowsheet row's coding and still meets US Core; an amended weight is refused by final-only")
    func epicStyle() async throws {
        guard ExportProfilesTests.available else { return }
        let store = try await ExportProfilesTests().recorded("site-rules-epic.sqlite")
        let output = cli.temporaryPath("epic.ndjson")
        let common = ["export", "--store", store, "--tz", "America/New_York", "--mappings", Self.epic]
        let run = try await cli.caregate(common + ["--profiles", "us-core-6.1.0", "--package", ExportProfilesTests.package("6.1.0"), "-o", output])
        #expect(run.status == 0, "\(run.stderr)")
        let observations = try ExportProfilesTests().observations(output)
        func codings(_ code: String) throws -> [String] {
            let observation = try #require(observations.first { String(describing: $0["code"] ?? "").contains(code) })
            return ((observation["code"] as? [String: Any])?["coding"] as? [[String: Any]] ?? []).map { "\($0["system"] ?? "")|\($0["code"] ?? "")" }
        }
        #expect(try codings("29463-7") == ["http://loinc.org|29463-7", "urn:oid:1.2.840.114350.1.13.0.1.7.2.707679|14"])
        #expect(try codings("85354-9") == ["http://loinc.org|85354-9", "urn:oid:1.2.840.114350.1.13.0.1.7.2.707679|5"])
        #expect(try codings("229065009") == ["http://snomed.info/sct|229065009"], "no row for a walk: nothing added")
        let check = try await cli.caregate(["validate", output, "--package", ExportProfilesTests.package("6.1.0")])
        #expect(check.status == 0, "\(check.stdout)")

        // The weight corrected on the device: its Observation would be `amended`, which the EHR does not take.
        let care = try SQLiteCarePlanStore(path: store)
        var corrected = try #require(try care.fetchOutcomes(EntityQuery(ids: ["weight-3"])).first)
        corrected.values = [OutcomeValue(.double(78.1), units: "kg")]
        _ = try care.update([.outcome(corrected)])
        let amended = try await cli.caregate(common + ["-o", cli.temporaryPath("epic-amended.ndjson")])
        let line = try Self.line(of: "final-only", in: Self.epic)
        #expect(amended.stderr.contains("outcome weight-3 (occurrence 3 of task CarePlan/maria-lopez-home-care/29463-7, patient Patient/maria-lopez): refused by the site rule 'final-only' (\(Self.epic):\(line)): the EHR takes no Observation with status amended (only final)"), "\(amended.stderr)")
    }

    @Test("the example files validate; a rule file's mistakes are errors at their lines")
    func validation() async throws {
        let good = try await cli.caregate(["validate", "docs/site-rules"])
        #expect(good.status == 0, "\(good.stdout)\(good.stderr)")
        let folder = cli.temporaryPath("bad-rules")
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try """
            caregate-mapping: 1
            description: Mistakes.
            tables:
              ehr-rules:
                codes:
                  accept-codes: ["29463-7"]
                units:
                  accept-units: {"http://loinc.org|29463-7": [kilos]}
                statuses:
                  accept-statuses: [done]
                typo:
                  accept-code: ["http://loinc.org|29463-7"]
            """.write(toFile: folder + "/rules.yaml", atomically: true, encoding: .utf8)
        let bad = try await cli.caregate(["validate", folder])
        #expect(bad.status == 1)
        let out = bad.stdout + bad.stderr
        #expect(out.contains("rules.yaml:6:") && out.contains("keyed by SYSTEM|CODE"), "\(out)")
        #expect(out.contains("rules.yaml:8:") && out.contains("'kilos' is not a valid UCUM unit"), "\(out)")
        #expect(out.contains("rules.yaml:10:") && out.contains("'done' is not a status"), "\(out)")
        #expect(out.contains("rules.yaml:12:") && out.contains("accept-code"), "\(out)")
    }

    @Test("through caregate push with sekmet-fhir as the EHR: a refused walk is a dead letter and never sent (the EHR's count unchanged); without the rule, --retry-failed sends it once")
    func pushedOnceAfterTheFix() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        let client = try await seededWithSamples(ehr)
        let store = try await ExportProfilesTests().recorded("site-rules-push.sqlite")
        let walks = { try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("code", "http://snomed.info/sct|229065009")]).count }
        let before = try await walks()
        let common = ["push", "--to", ehr.base, "--store", store, "--tz", "America/New_York"]
        let refused = try await cli.caregate(common + ["--mappings", Self.oracle])
        #expect(refused.status == 1)
        #expect(try SQLiteCarePlanStore(path: store).outboxCounts().failed == 1)
        #expect(try await walks() == before, "the walk never reached the EHR")
        let status = try await cli.caregate(["status", "--store", store])
        #expect(status.stdout.contains("failed urn:caregate:outcome|Patient%2Fmaria-lopez/walk-2") && status.stdout.contains("refused by the site rule 'listed-vitals' (\(Self.oracle):"), "\(status.stdout)")
        // The EHR lifts its list (the rule file is dropped): the dead letter goes, once.
        let fixed = try await cli.caregate(common + ["--retry-failed"])
        #expect(fixed.status == 0, "\(fixed.stdout)\(fixed.stderr)")
        _ = try await cli.caregate(common + ["--retry-failed"])
        #expect(try await walks() == before + 1)
    }

    @Test("through caregate serve with sekmet-fhir as the EHR: the rule file in the gateway's mapping folder refuses the walk (a dead letter naming the rule and its line, the EHR's count unchanged) while the weight and blood pressure arrive; the file fixed, one push --retry-failed sends the walk once")
    func serveRefusesThenSendsOnce() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        let client = try await seededWithSamples(ehr)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-serve-site-rules-\(UUID().uuidString)")
        let site = dir.appendingPathComponent("site")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let rules = site.appendingPathComponent("oracle-health-vitals.yaml").path
        try FileManager.default.copyItem(atPath: Self.oracle, toPath: rules)
        let store = dir.appendingPathComponent("care.sqlite").path
        try FileManager.default.copyItem(atPath: try await ExportProfilesTests().recorded("site-rules-serve.sqlite"), toPath: store)
        try ServeProcess.writeConfig(in: dir, ehr: ehr.base, ehrLines: ["mappings: [site]"])
        let walks = { try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("code", "http://snomed.info/sct|229065009")]).count }
        let weights = { try await client.search("Observation", [("subject", "Patient/maria-lopez"), ("code", "http://loinc.org|29463-7")]).count }
        let (walksBefore, weightsBefore) = (try await walks(), try await weights())
        do {
            let serve = try ServeProcess(directory: dir)
            defer { serve.kill() }
            let settled = try await eventually(30) { let c = try SQLiteCarePlanStore(path: store).outboxCounts(); return c.pushed == 2 && c.failed == 1 }
            let counts = try SQLiteCarePlanStore(path: store).outboxCounts()
            #expect(settled, "\(counts)")
        }
        #expect(try await walks() == walksBefore, "the walk never reached the EHR")
        #expect(try await weights() == weightsBefore + 1, "the weight, which the rules take, arrived")
        let line = try Self.line(of: "listed-vitals", in: rules)
        let status = try await cli.caregate(["status", "--store", store])
        #expect(status.stdout.contains("failed urn:caregate:outcome|Patient%2Fmaria-lopez/walk-2")
                && status.stdout.contains("refused by the site rule 'listed-vitals' (") && status.stdout.contains("oracle-health-vitals.yaml:\(line)): the EHR takes no Observation coded http://snomed.info/sct|229065009"),
                "\(status.stdout)")
        // The site's list gains the walk: the dead letter is exported again under the fixed file and sent once.
        let text = try String(contentsOfFile: rules, encoding: .utf8)
        try text.replacingOccurrences(of: "        - \"http://loinc.org|59408-5\"", with: "        - \"http://snomed.info/sct|229065009\"\n        - \"http://loinc.org|59408-5\"")
            .write(toFile: rules, atomically: true, encoding: .utf8)
        let common = ["push", "--to", ehr.base, "--store", store, "--tz", "America/New_York", "--mappings", site.path, "--retry-failed"]
        let fixed = try await cli.caregate(common)
        #expect(fixed.status == 0 && fixed.stdout.contains("1 dead letter exported again"), "\(fixed.stdout)\(fixed.stderr)")
        _ = try await cli.caregate(common)
        #expect(try await walks() == walksBefore + 1)
        #expect(try await weights() == weightsBefore + 1)
    }
}
