import FHIR
import FHIRPackages
@testable import FHIRValidation
import Foundation
import Testing

/// The validator remembers elements it found clean (`CleanVerdicts`) and does not walk an equal
/// element against the same definition again. These tests hold it to giving every verdict the
/// walk without memory gives, including where an element's verdict depends on what is around it.
@Suite("Elements remembered as clean: the same verdicts as walking every element each time")
struct CleanVerdictTests {
    /// Each issue as a line to compare.
    static func lines(_ report: ValidationReport) -> [String] {
        report.issues.map { "\($0.severity.rawValue) \($0.code) \($0.location) \($0.key ?? "") \($0.message)" }
    }

    /// Every resource validated three times by a validator that remembers (the second and third
    /// times mostly from memory) and once by one that does not: the same issues each time.
    func compare(_ resources: [(name: String, resource: Element)], conformance: ConformanceSet) -> (differences: [String], issues: Int, remembered: Int) {
        let remembering = ProfileValidator(conformance: conformance)
        let walking = ProfileValidator(conformance: conformance, cleanVerdicts: 0)
        var differences: [String] = []
        var issues = 0
        for pass in 1...3 {
            for (name, resource) in resources {
                let expected = Self.lines(walking.validate(resource))
                let found = Self.lines(remembering.validate(resource))
                issues += expected.count
                if found != expected {
                    differences.append("pass \(pass), \(name):\n  walked: \(expected)\n  remembered: \(found)")
                }
            }
        }
        return (differences, issues, remembering.cleanVerdicts.count)
    }

    @Test("R4's 226 examples: the same issues with and without remembered verdicts")
    func r4Examples() throws {
        let folder = SharedData.projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-r4/examples/json")
        guard FileManager.default.fileExists(atPath: folder.path) else { return SharedData.skipNotice("R4 examples (remembered verdicts)") }
        let resources = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            .filter { $0.hasSuffix(".json") && !$0.hasPrefix("_") }
            .map { name in (name, try FHIRDocument.read(contentsOf: folder.appendingPathComponent(name).path, options: ParseOptions(lenient: true)).resource) }
        #expect(resources.count == 226)
        let (differences, issues, remembered) = compare(resources, conformance: ConformanceSet(packages: []))
        #expect(differences.isEmpty, Comment(rawValue: differences.prefix(5).joined(separator: "\n")))
        #expect(issues > 0)
        #expect(remembered > 100, "elements were remembered")
    }

    @Test("US Core's examples against their profiles: the same issues with and without remembered verdicts", arguments: ["3.1.1", "6.1.0"])
    func usCoreExamples(version: String) throws {
        guard let package = try SharedData.usCore(version) else { return SharedData.skipNotice("US Core \(version) examples (remembered verdicts)") }
        let resources = try package.examples.map { example in
            (example.file, try FHIRJSONReader(options: ParseOptions(lenient: true, sourceName: example.file)).read(example.bytes).resource)
        }
        let (differences, issues, remembered) = compare(resources, conformance: ConformanceSet(packages: [package]))
        #expect(differences.isEmpty, Comment(rawValue: differences.prefix(5).joined(separator: "\n")))
        #expect(issues > 0)
        #expect(remembered > 100, "elements were remembered")
    }

    static func resource(_ json: String) throws -> Element {
        try FHIRJSONReader().read(json).resource
    }

    @Test("a reference to a contained resource: clean where the resource contains it, an error where it does not, in either order")
    func containedReference() throws {
        let containing = try Self.resource("""
            {"resourceType":"Observation","contained":[{"resourceType":"Patient","id":"p1"}],"status":"final",\
            "code":{"text":"weight"},"subject":{"reference":"#p1"}}
            """)
        let bare = try Self.resource("""
            {"resourceType":"Observation","status":"final","code":{"text":"weight"},"subject":{"reference":"#p1"}}
            """)
        for order in [[containing, bare], [bare, containing]] {
            let validator = ProfileValidator()
            let reports = order.map { validator.validate($0) }
            let bareReport = order[0] == bare ? reports[0] : reports[1]
            let containingReport = order[0] == bare ? reports[1] : reports[0]
            #expect(containingReport.errors.isEmpty, Comment(rawValue: Self.lines(containingReport).joined(separator: "\n")))
            #expect(bareReport.errors.contains { $0.key == "ref-1" && $0.location == "Observation.subject" },
                    Comment(rawValue: Self.lines(bareReport).joined(separator: "\n")))
        }
    }

    @Test("a reference between Bundle entries: the target's type is checked in the Bundle after the same element was clean alone")
    func bundleReference() throws {
        let observation = """
            {"resourceType":"Observation","status":"final","code":{"text":"weight"},\
            "performer":[{"reference":"urn:uuid:8f3c4c55-0b1a-4d0e-9c83-1b2f6b1f0a01"}]}
            """
        let alone = try Self.resource(observation)
        let bundle = try Self.resource("""
            {"resourceType":"Bundle","type":"collection","entry":[\
            {"fullUrl":"urn:uuid:5e0f0a2c-1111-4a8e-a5e4-3a1c2f7b9d02","resource":\(observation)},\
            {"fullUrl":"urn:uuid:8f3c4c55-0b1a-4d0e-9c83-1b2f6b1f0a01","resource":{"resourceType":"Device","id":"d1"}}]}
            """)
        let validator = ProfileValidator()
        for _ in 1...2 {
            #expect(validator.validate(alone).errors.isEmpty)
            let errors = validator.validate(bundle).errors
            #expect(errors.contains { $0.location == "Bundle.entry[0].resource.performer[0].reference" && $0.message.contains("names a Device") },
                    Comment(rawValue: errors.map(\.description).joined(separator: "\n")))
        }
    }

    @Test("an issue reported once per validation is reported by every validation of the same element")
    func reportedOnce() throws {
        guard let package = try SharedData.usCore("6.1.0") else { return SharedData.skipNotice("US Core 6.1.0 (remembered verdicts)") }
        // An extension US Core does not define, under a US Core profile: not loaded, said once.
        let patient = try Self.resource("""
            {"resourceType":"Patient","meta":{"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"]},\
            "identifier":[{"system":"urn:example","value":"1"}],"name":[{"family":"Doe","given":["Jo"]}],"gender":"female",\
            "address":[{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/geolocation-missing","valueString":"x"}],"city":"Boston"}]}
            """)
        let validator = ProfileValidator(conformance: ConformanceSet(packages: [package]))
        let first = Self.lines(validator.validate(patient))
        #expect(first.contains { $0.contains("geolocation-missing") }, Comment(rawValue: first.joined(separator: "\n")))
        #expect(Self.lines(validator.validate(patient)) == first)
    }
}

extension CleanVerdictTests {
    @Test("what is remembered is bounded: elements over the size limit are walked each time, and a full memory starts again")
    func bounded() throws {
        let long = String(repeating: "x", count: 20_000)
        let observation = try Self.resource("""
            {"resourceType":"Observation","text":{"status":"generated","div":"<div xmlns=\\"http://www.w3.org/1999/xhtml\\">\(long)</div>"},\
            "status":"final","code":{"text":"weight"}}
            """)
        let validator = ProfileValidator()
        _ = validator.validate(observation)
        let kept = validator.cleanVerdicts.count
        #expect(kept > 0, "code was remembered")
        #expect(validator.cleanVerdicts.bytes < 20_000, "the narrative was not")
        let small = CleanVerdicts(capacity: 2)
        let node = try #require(validator.profile("http://hl7.org/fhir/StructureDefinition/Observation"))
        for text in ["a", "b", "c"] {
            let element = Element(name: "code", type: "CodeableConcept", children: [Element(name: "text", type: "string", value: text)])
            small.insert(.init(node: node.root, profile: node, package: nil, inBundle: false, content: .element(element)))
        }
        #expect(small.count == 1, "the third verdict found the memory full and started it again")
    }
}

extension CleanVerdictTests {
    @Test("a sliced element's items are remembered together: a vital sign's category is matched to its slice once, and a category missing its slice is still an error after clean ones")
    func slicedItems() throws {
        guard let package = try SharedData.usCore("6.1.0") else { return SharedData.skipNotice("US Core 6.1.0 (remembered sliced items)") }
        func weight(categorySystem: String) throws -> Element {
            try Self.resource("""
                {"resourceType":"Observation","meta":{"profile":["http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight"]},\
                "status":"final","category":[{"coding":[{"system":"\(categorySystem)","code":"vital-signs"}]}],\
                "code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},"subject":{"reference":"Patient/p1"},\
                "effectiveDateTime":"2026-01-01","valueQuantity":{"value":78,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"}}
                """)
        }
        let conformance = ConformanceSet(packages: [package])
        let validator = ProfileValidator(conformance: conformance)
        let walking = ProfileValidator(conformance: conformance, cleanVerdicts: 0)
        let clean = try weight(categorySystem: "http://terminology.hl7.org/CodeSystem/observation-category")
        for _ in 1...3 { #expect(validator.validate(clean).errors.isEmpty, Comment(rawValue: Self.lines(validator.validate(clean)).joined(separator: "\n"))) }
        let profile = try #require(validator.profile("http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight"))
        let category = try #require(profile.root.children.first { $0.name == "category" })
        #expect(category.isSliced)
        #expect(category.slicedItemsHitRate.hitCount == 2, "the second and third times, the category was found in memory")
        let wrong = try weight(categorySystem: "http://example.org/category")
        let found = Self.lines(validator.validate(wrong))
        #expect(found == Self.lines(walking.validate(wrong)))
        #expect(found.contains { $0.contains("VSCat") && $0.hasPrefix("error") }, Comment(rawValue: found.joined(separator: "\n")))
    }

    @Test("a definition whose elements are never found in memory stops being looked up, but for one in 64; one whose are keeps being")
    func hitRate() {
        let missing = VerdictHitRate()
        #expect((0..<32).allSatisfy { _ in missing.shouldLookUp() }, "the first 32 are looked up")
        let later = (0..<640).filter { _ in missing.shouldLookUp() }.count
        #expect(later == 10, "then one in 64 (\(later))")
        let finding = VerdictHitRate()
        for _ in 0..<672 {
            #expect(finding.shouldLookUp())
            finding.noteHit()
        }
    }
}
