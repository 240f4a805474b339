import Foundation
import Testing

@Suite("caregate validate")
struct ValidateCommandTests {
    let cli = CommandLineTests()

    func mappingFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-validate-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    let broken = """
        caregate-mapping: 1
        resource: CarePlan
        patient: subject
        care-plan:
          id: "'CarePlan/' & id"
        tasks:
          - name: detail
            each: activity
            id: "%resource.id & '/' & %index.toString()"
            title: detial.description
        """

    @Test("the shipped mappings are clean: exit 0")
    func shipped() async throws {
        let run = try await cli.caregate(["validate", "Mappings"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("11 mapping files checked: 0 errors, 0 warnings"))
    }

    @Test("errors print like a compiler's and exit 1; github and json formats")
    func errors() async throws {
        let path = try mappingFile(broken)
        let text = try await cli.caregate(["validate", path])
        #expect(text.status == 1)
        #expect(text.stdout == "\(path):10:12: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?\n")
        let github = try await cli.caregate(["validate", path, "--format", "github"])
        #expect(github.stdout == "::error file=\(path),line=10,col=12::'detial' is not an element of CarePlan.activity; did you mean 'detail'?\n")
        let json = try await cli.caregate(["validate", path, "--format", "json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as! [String: Any]
        let first = (object["diagnostics"] as! [[String: Any]])[0]
        #expect(first["line"] as? Int == 10 && first["column"] as? Int == 12 && first["severity"] as? String == "error")
    }

    @Test("usage errors exit 2")
    func usage() async throws {
        #expect(try await cli.caregate(["validate", "no-such-dir"]).status == 2)
        #expect(try await cli.caregate(["validate", "--format", "xml"]).status == 2)
    }
}

/// `caregate validate` on FHIR resources, with US Core's package from ../shared.
@Suite("caregate validate: resources against profiles")
struct ValidateResourcesTests {
    let cli = CommandLineTests()
    static let packages = CommandLineTests.projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages")
    static var usCore: String { packages.appendingPathComponent("hl7.fhir.us.core-6.1.0.tgz").path }

    /// US Core 6.1.0's weight example, unpacked by tar into a scratch folder.
    func example(_ name: String) async throws -> (folder: URL, json: [String: Any])? {
        guard FileManager.default.fileExists(atPath: Self.usCore) else {
            print("SKIPPED caregate validate on resources: ../shared/fhir-packages is not present")
            return nil
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-validate-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let tar = try await cli.run(["/usr/bin/tar", "xzf", Self.usCore, "-C", folder.path, "package/example/\(name)"])
        #expect(tar.status == 0, "\(tar.stderr)")
        let data = try Data(contentsOf: folder.appendingPathComponent("package/example/\(name)"))
        return (folder, try JSONSerialization.jsonObject(with: data) as! [String: Any])
    }

    func write(_ json: [String: Any], to url: URL) throws {
        try JSONSerialization.data(withJSONObject: json).write(to: url)
    }

    @Test("a resource that meets its claimed profile exits 0; one that breaks it prints each error at its element and exits 1")
    func claims() async throws {
        guard let (folder, weight) = try await example("Observation-weight.json") else { return }
        defer { try? FileManager.default.removeItem(at: folder) }
        let good = folder.appendingPathComponent("good.json")
        try write(weight, to: good)
        let passed = try await cli.caregate(["validate", good.path, "--package", Self.usCore])
        #expect(passed.status == 0, "\(passed.stdout)\(passed.stderr)")
        #expect(passed.stderr.contains("1 resource in 1 file checked: 0 errors"))
        // US Core 6.1.0 names dependencies that are not here: each is noted once.
        #expect(passed.stderr.contains("note: hl7.fhir.us.core#6.1.0 depends on packages not loaded here: hl7.terminology.r4#5.0.0, hl7.fhir.uv.extensions.r4#1.0.0, "))
        #expect(passed.stderr.components(separatedBy: "hl7.terminology.r4#5.0.0").count == 2)

        var broken = weight
        broken["status"] = nil
        var quantity = weight["valueQuantity"] as! [String: Any]
        quantity["code"] = "[stone_av]"
        broken["valueQuantity"] = quantity
        let bad = folder.appendingPathComponent("bad.json")
        try write(broken, to: bad)
        let failed = try await cli.caregate(["validate", bad.path, "--package", Self.usCore])
        #expect(failed.status == 1)
        #expect(failed.stdout.contains("\(bad.path): error: Observation: Observation.status: minimum required = 1, but only found 0 (Observation.status in http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0)"), "\(failed.stdout)")
        #expect(failed.stdout.contains("\(bad.path): error: Observation.valueQuantity.code: the code provided ([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required)"))

        // Without the package the claim cannot be checked: a warning, and only R4's own rules.
        let alone = try await cli.caregate(["validate", bad.path])
        #expect(alone.status == 1)
        #expect(alone.stdout.contains("warning: Observation: profile http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight: it is not loaded here"))
        #expect(!alone.stdout.contains("ucum-bodyweight"))

        let json = try await cli.caregate(["validate", bad.path, "--package", Self.usCore, "--format", "json"])
        let outcome = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as! [String: Any]
        #expect(outcome["resourceType"] as? String == "OperationOutcome")
        let issues = outcome["issue"] as! [[String: Any]]
        let code = try #require(issues.first { ($0["expression"] as? [String]) == ["Observation.valueQuantity.code"] })
        #expect(code["severity"] as? String == "error" && code["code"] as? String == "code-invalid")
        #expect((code["diagnostics"] as? String)?.contains("element Observation.value[x]:valueQuantity.code; profile http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0") == true)
        #expect((code["location"] as? [String]) == ["\(bad.path) Observation/weight"])
    }

    @Test("NDJSON lines, XML files and folders; --profile with a site's loose StructureDefinition; usage errors exit 2")
    func formatsAndProfiles() async throws {
        guard let (folder, weight) = try await example("Observation-weight.json") else { return }
        defer { try? FileManager.default.removeItem(at: folder) }
        var unclaimed = weight
        unclaimed["meta"] = nil
        var bad = unclaimed
        bad["status"] = nil
        let lines = [unclaimed, bad].map { String(decoding: try! JSONSerialization.data(withJSONObject: $0), as: UTF8.self) }.joined(separator: "\n") + "\n"
        let ndjson = folder.appendingPathComponent("outcomes.ndjson")
        try lines.write(to: ndjson, atomically: true, encoding: .utf8)
        let profile = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight"
        let run = try await cli.caregate(["validate", ndjson.path, "--package", Self.usCore, "--profile", profile])
        #expect(run.status == 1)
        #expect(run.stdout.contains("\(ndjson.path):2: error: Observation: Observation.status: minimum required = 1"), "\(run.stdout)")
        #expect(!run.stdout.contains("\(ndjson.path):1:"))
        #expect(run.stderr.contains("2 resources in 1 file checked: 1 error"))

        // A folder of FHIR files (no mapping files in it) is read file by file, XML too.
        let xmlFolder = folder.appendingPathComponent("xml")
        try FileManager.default.createDirectory(at: xmlFolder, withIntermediateDirectories: true)
        let source = folder.appendingPathComponent("bad.json")
        try write(bad, to: source)
        let converted = try await cli.caregate(["convert", source.path, "--to", "xml", "-o", xmlFolder.appendingPathComponent("bad.xml").path])
        #expect(converted.status == 0, "\(converted.stderr)")
        let folderRun = try await cli.caregate(["validate", xmlFolder.path, "--package", Self.usCore, "--profile", profile])
        #expect(folderRun.status == 1, "\(folderRun.stdout)\(folderRun.stderr)")
        #expect(folderRun.stdout.contains("bad.xml: error: Observation: Observation.status: minimum required = 1"), "\(folderRun.stdout)")

        // A site's profile as a loose file, a differential only: its snapshot is generated.
        let extracted = try await cli.run(["/usr/bin/tar", "xzf", Self.usCore, "-C", folder.path, "package/StructureDefinition-us-core-body-weight.json"])
        #expect(extracted.status == 0)
        var site = try JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("package/StructureDefinition-us-core-body-weight.json"))) as! [String: Any]
        site["url"] = "http://example.org/fhir/StructureDefinition/site-weight"
        site["snapshot"] = nil
        let siteFile = folder.appendingPathComponent("site-weight.json")
        try write(site, to: siteFile)
        var stones = unclaimed
        var quantity = unclaimed["valueQuantity"] as! [String: Any]
        quantity["code"] = "[stone_av]"
        stones["valueQuantity"] = quantity
        let stonesFile = folder.appendingPathComponent("stones.json")
        try write(stones, to: stonesFile)
        let siteRun = try await cli.caregate(["validate", stonesFile.path, "--package", Self.usCore, "--package", siteFile.path,
                                              "--profile", "http://example.org/fhir/StructureDefinition/site-weight"])
        #expect(siteRun.status == 1)
        #expect(siteRun.stdout.contains("error: Observation.valueQuantity.code: the code provided ([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required) (Observation.value[x]:valueQuantity.code in http://example.org/fhir/StructureDefinition/site-weight|6.1.0)"), "\(siteRun.stdout)")

        #expect(try await cli.caregate(["validate", ndjson.path, "--profile", "http://example.org/none"]).status == 2)
        #expect(try await cli.caregate(["validate", ndjson.path, "--package", folder.appendingPathComponent("none.tgz").path]).status == 2)
        let stray = try await cli.caregate(["validate", "Mappings", "--profile", profile])
        #expect(stray.status == 2 && stray.stderr.contains("--profile applies to FHIR resources"))
        // --package with mapping files that name no export-profiles is as stray.
        let strayPackage = try await cli.caregate(["validate", "Mappings", "--package", ExportProfilesTests.package("6.1.0")])
        #expect(strayPackage.status == 2 && strayPackage.stderr.contains("--package applies to FHIR resources and to mapping folders that name export-profiles"), "\(strayPackage.stderr)")
    }
}
