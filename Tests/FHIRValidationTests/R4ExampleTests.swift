import FHIR
import FHIRValidation
import Foundation
import Testing

@Suite("R4's own examples against R4's own definitions")
struct R4ExampleTests {
    /// The two official examples that break R4's rules (as the HL7 validator reports them too).
    static let knownInvalid = [
        // dispenseRequest.performer may name only an Organization.
        "MedicationRequest-medrx0301.json: MedicationRequest.dispenseRequest.performer.reference",
        // performer may not name an Encounter.
        "Observation-clinical-gender.json: Observation.performer[0].reference",
    ]

    @Test("each of the 226 R4 examples validates against its base definition with no error, but two known defects")
    func examples() throws {
        let folder = SharedData.projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-r4/examples/json")
        guard FileManager.default.fileExists(atPath: folder.path) else { return SharedData.skipNotice("R4 examples") }
        let validator = ProfileValidator()
        var failures: [String] = []
        var checked = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() where name.hasSuffix(".json") && !name.hasPrefix("_") {
            let resource = try FHIRDocument.read(contentsOf: folder.appendingPathComponent(name).path, options: ParseOptions(lenient: true)).resource
            checked += 1
            for issue in validator.validate(resource).errors { failures.append("\(name): \(issue.location)") }
        }
        #expect(checked == 226)
        #expect(failures == Self.knownInvalid, Comment(rawValue: failures.joined(separator: "\n")))
    }
}
