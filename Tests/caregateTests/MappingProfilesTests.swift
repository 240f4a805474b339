import Foundation
import Testing

/// `export-profiles:` in a mapping folder: `caregate validate` exports what the folder's golden
/// tests make and checks it against the profiles, so a mapping change that breaks US Core fails
/// CI at the mapping file's line.
@Suite("caregate validate on a mapping folder that names its export profiles")
struct MappingProfilesTests {
    let cli = CommandLineTests()

    /// A site folder: an observation-codes table weighing in `unit`, and the targets named.
    func site(_ name: String, unit: String, profiles: String = "[us-core-6.1.0]") throws -> String {
        let folder = cli.temporaryPath(name)
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        try """
            caregate-mapping: 1
            description: A site's export codes, and the profiles its EHR takes.
            export-profiles: \(profiles)
            tables:
              observation-codes:
                "29463-7":
                  code: {system: http://loinc.org, code: 29463-7, display: Body weight, unit: "\(unit)"}
                  category: vital-signs
            """.write(toFile: folder + "/observation-codes.yaml", atomically: true, encoding: .utf8)
        // A golden test of the site's own: the demo patient, mapped as the shipped files map it.
        try FileManager.default.copyItem(atPath: "FHIRSamples/bundle/maria-lopez-demo-bundle.json", toPath: folder + "/maria.json")
        try """
            caregate-mapping: 1
            resource: CarePlan
            extends: builtin:careplan.yaml
            tests:
              - input: maria.json
                expect: maria.expected.json
            """.write(toFile: folder + "/careplan.yaml", atomically: true, encoding: .utf8)
        return folder
    }

    @Test("weights in stones fail at the observation-codes entry's line with the element, rule and profile; in kilograms the folder passes; a target without its package is an error at its line")
    func goldenOutputsMeetTheProfiles() async throws {
        guard ExportProfilesTests.available else { return }
        let package = ExportProfilesTests.package("6.1.0")
        let broken = try site("profiles-stones", unit: "[stone_av]")
        let run = try await cli.caregate(["validate", broken, "--package", package])
        #expect(run.status == 1)
        // Line 6: the "29463-7" entry; the site's golden test made the weight task.
        #expect(run.stdout.contains("\(broken)/observation-codes.yaml:6:"), "\(run.stdout)")
        #expect(run.stdout.contains("breaks the profiles of us-core-6.1.0: error: Observation.valueQuantity.code: the code provided ([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required)"), "\(run.stdout)")
        #expect(run.stdout.contains("(the golden test maria.json, task CarePlan/maria-lopez-home-care/29463-7)"), "\(run.stdout)")
        #expect(!run.stdout.contains("85354-9"), "the blood pressure meets its profile")

        let fixed = try site("profiles-kg", unit: "kg")
        let passing = try await cli.caregate(["validate", fixed, "--package", package])
        #expect(passing.status == 0, "\(passing.stdout)\(passing.stderr)")

        let unloaded = try await cli.caregate(["validate", try site("profiles-3", unit: "kg", profiles: "[us-core-3.1.1]"), "--package", package])
        #expect(unloaded.status == 1)
        #expect(unloaded.stdout.contains("observation-codes.yaml:3:") && unloaded.stdout.contains("needs the package hl7.fhir.us.core#3.1.1"), "\(unloaded.stdout)")
    }
}
