import Foundation
import Testing
@testable import FHIR

@Suite("Resource validator")
struct ResourceValidatorTests {
    @Test("the sample resources are valid; missing required elements, repeats, bad codes and lexical forms are reported with paths")
    func validation() throws {
        let samples = SampleTests.samples.appendingPathComponent("json")
        for name in try FileManager.default.contentsOfDirectory(atPath: samples.path).sorted() {
            let resource = try FHIRJSONReader().read(contentsOf: samples.appendingPathComponent(name).path).resource
            #expect(ResourceValidator().validate(resource).isEmpty, "\(name): \(ResourceValidator().validate(resource))")
        }
        var observation = Element(resourceType: "Observation")
        observation.append(Element(name: "status", type: "code", value: "done"))
        observation.append(Element(name: "subject", type: "Reference", children: [Element(name: "reference", type: "string", value: "Patient/p")]))
        observation.append(Element(name: "subject", type: "Reference", children: [Element(name: "reference", type: "string", value: "Patient/q")]))
        observation.append(Element(name: "effective", type: "dateTime", value: "2026-13-01"))
        #expect(ResourceValidator().validate(observation) == [
            "Observation.code: required (1..1), missing",
            "Observation.subject: at most 1, found 2",
            "Observation.status: 'done' is not in http://hl7.org/fhir/ValueSet/observation-status",
            "Observation.effective: '2026-13-01' is not a valid dateTime (YYYY, YYYY-MM, YYYY-MM-DD or YYYY-MM-DDThh:mm:ss(.sss)(Z|+hh:mm))",
        ])
    }
}
