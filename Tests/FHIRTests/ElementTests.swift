import Testing
import FHIR

@Suite("References made relative")
struct RelativeReferenceTests {
    /// What `relativeReference(of:)` answers, written the plain way: the `/`-separated steps
    /// (empty ones dropped) before the last `_history` step, the last two of them.
    static func expected(_ reference: String) -> String? {
        var steps = reference.split(separator: "/")
        if let history = steps.lastIndex(of: "_history") { steps = Array(steps[..<history]) }
        guard steps.count >= 2 else { return nil }
        return "\(steps[steps.count - 2])/\(steps[steps.count - 1])"
    }

    @Test("the same answer as splitting at every slash, on references of every shape")
    func sameAsSplitting() {
        let steps = ["Patient", "p-1", "_history", "4", "", "https:", "ehr.example.org", "fhir", "m-é", "urn:uuid:0b9c"]
        var references: [String] = []
        // Every sequence of up to four steps joined by slashes, and with a leading or trailing one.
        func build(_ prefix: [String]) {
            if !prefix.isEmpty {
                let joined = prefix.joined(separator: "/")
                references += [joined, "/" + joined, joined + "/"]
            }
            guard prefix.count < 4 else { return }
            for step in steps { build(prefix + [step]) }
        }
        build([])
        #expect(references.count == 3 * (10 + 100 + 1_000 + 10_000))
        for reference in references {
            #expect(Element.relativeReference(of: reference) == Self.expected(reference), "\(reference)")
        }
        #expect(Element.relativeReference(of: "https://ehr.example.org/fhir/Medication/m-é/_history/4") == "Medication/m-é")
        #expect(Element.relativeReference(of: "Patient/1/_history/_history/2") == "1/_history")
        #expect(Element.relativeReference(of: "") == nil)
    }
}
