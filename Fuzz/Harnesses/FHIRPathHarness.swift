import Diagnostics
import FHIR
import FHIRPath

/// FHIRPath expressions: parsed, type-checked against a Patient and an Observation, and evaluated
/// on one of each. The checker is the gate mapping files pass through, so an expression it
/// refuses with an error must never yield a value: evaluation throws or gives an empty collection.
public enum FHIRPathHarness: FuzzHarness {
    public static let name = "fhirpath"
    /// Longer expressions are not tried (mapping files hold lines, not pages).
    static let longest = 4096

    static let resources: [Element] = [
        #"""
        {"resourceType": "Patient", "id": "p1", "active": true, "gender": "female", "birthDate": "1974-12-25",
         "name": [{"use": "official", "family": "Chalmers", "given": ["Peter", "James"]}, {"use": "usual", "given": ["Jim"]}],
         "telecom": [{"system": "phone", "value": "(03) 5555 6473", "use": "work", "rank": 1}],
         "address": [{"line": ["534 Erewhon St"], "city": "PleasantVille", "postalCode": "3999", "period": {"start": "1974-12-25"}}],
         "extension": [{"url": "http://example.org/birthTime", "valueDateTime": "1974-12-25T14:35:45-05:00"}],
         "deceasedBoolean": false, "multipleBirthInteger": 2}
        """#,
        #"""
        {"resourceType": "Observation", "id": "o1", "status": "final",
         "code": {"coding": [{"system": "http://loinc.org", "code": "8867-4", "display": "Heart rate"}]},
         "subject": {"reference": "Patient/p1"}, "effectiveDateTime": "2026-03-01T08:30:00Z",
         "valueQuantity": {"value": 72.5, "unit": "beats/minute", "system": "http://unitsofmeasure.org", "code": "/min"},
         "component": [{"code": {"text": "systolic"}, "valueQuantity": {"value": 120, "code": "mm[Hg]"}},
                       {"code": {"text": "note"}, "valueString": "after walking"}]}
        """#,
    ].map { try! FHIRJSONReader().read($0).resource }

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        guard input.count <= longest, let expression = try? FHIRPathExpression(String(decoding: input, as: UTF8.self)) else { return }
        for resource in resources {
            let refusal = FHIRPathChecker(rootType: resource.name).check(expression).first { $0.severity == .error }
            let values = try? expression.evaluate(on: resource)
            if let refusal, let values, !values.isEmpty {
                throw PropertyFailure("\"\(expression.text)\" on \(resource.name): the checker refused it (\(refusal.message)) but it evaluated to \(values)")
            }
        }
    }
}
