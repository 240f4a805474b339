import FHIR
import FHIRPackages
import FHIRValidation
import Foundation
import JSON
import Testing

/// A step into JSON: a member name or an array index.
enum JSONStep: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    case member(String)
    case index(Int)
    init(stringLiteral value: String) { self = .member(value) }
    init(integerLiteral value: Int) { self = .index(value) }
}

extension JSONValue {
    /// A copy with the value at `path` replaced (nil removes it).
    func setting(_ path: [JSONStep], to value: JSONValue?) -> JSONValue {
        guard let step = path.first else { return value ?? .null }
        switch (self, step) {
        case (.object(var members), .member(let name)):
            if let i = members.firstIndex(where: { $0.0 == name }) {
                if path.count == 1 && value == nil { members.remove(at: i) } else { members[i].1 = members[i].1.setting(Array(path.dropFirst()), to: value) }
            } else if let value {
                members.append((name, JSONValue.object([]).setting(Array(path.dropFirst()), to: value)))
            }
            return .object(members)
        case (.array(var items), .index(let i)):
            if path.count == 1 && value == nil { items.remove(at: i) } else { items[i] = items[i].setting(Array(path.dropFirst()), to: value) }
            return .array(items)
        default:
            return self
        }
    }
}

@Suite("Profile errors: each broken rule of US Core's vital signs, screening assessments and questionnaire responses gives an error where it is")
struct ProfileErrorTests {
    static let vitalSigns: [(profile: String, example: String)] = [
        ("us-core-blood-pressure", "Observation-blood-pressure.json"),
        ("us-core-bmi", "Observation-bmi.json"),
        ("us-core-body-height", "Observation-height.json"),
        ("us-core-body-temperature", "Observation-temperature.json"),
        ("us-core-body-weight", "Observation-weight.json"),
        ("us-core-head-circumference", "Observation-head-circumference.json"),
        ("us-core-heart-rate", "Observation-heart-rate.json"),
        ("us-core-pulse-oximetry", "Observation-oxygen-saturation.json"),
        ("us-core-respiratory-rate", "Observation-respiratory-rate.json"),
        ("pediatric-bmi-for-age", "Observation-pediatric-bmi-example.json"),
        ("pediatric-weight-for-height", "Observation-pediatric-wt-example.json"),
        ("head-occipital-frontal-circumference-percentile", "Observation-ofc-percentile.json"),
    ]

    struct Fixture {
        let validator: ProfileValidator
        let package: FHIRPackage
        func example(_ file: String) throws -> JSONValue {
            let example = try #require(package.examples.first { $0.file == "package/example/" + file })
            return try JSONValue.parse(example.bytes)
        }
        func errors(_ json: JSONValue) throws -> [ValidationIssue] {
            // Read leniently: a code outside R4's required value sets is the validator's to report.
            let resource = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(json.bytes()).resource
            return validator.validate(resource).errors
        }
    }

    static func fixture() throws -> Fixture? {
        guard let package = try SharedData.usCore("6.1.0") else { return nil }
        return Fixture(validator: ProfileValidator(conformance: ConformanceSet(packages: [package])), package: package)
    }

    static func has(_ errors: [ValidationIssue], at location: String, _ words: String) -> Bool {
        errors.contains { $0.location == location && $0.message.contains(words) }
    }

    @Test("the right resource passes; a missing status, a wrong category system, a second VSCat and a missing value each fail where they are", arguments: vitalSigns.map(\.example))
    func vitalSign(example file: String) throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("vital-sign errors") }
        let good = try fixture.example(file)
        #expect(try fixture.errors(good).isEmpty)

        let noStatus = try fixture.errors(good.setting(["status"], to: nil))
        #expect(Self.has(noStatus, at: "Observation", "Observation.status: minimum required = 1, but only found 0"), "\(noStatus)")

        let category = good["category"]!.arrayValue!.firstIndex { $0.serialized().contains("vital-signs") }!
        let wrongSystem = try fixture.errors(good.setting(["category", .index(category), "coding", 0, "system"], to: "http://example.org/categories"))
        #expect(Self.has(wrongSystem, at: "Observation", "slice 'Observation.category:VSCat': minimum required = 1, but only found 0"), "\(wrongSystem)")
        #expect(wrongSystem.allSatisfy { $0.profile?.contains("StructureDefinition/") == true && $0.elementID != nil })

        let twice = good.setting(["category"], to: .array(good["category"]!.arrayValue! + [good["category"]!.arrayValue![category]]))
        let doubled = try fixture.errors(twice)
        #expect(Self.has(doubled, at: "Observation", "slice 'Observation.category:VSCat': max allowed = 1, but found 2"), "\(doubled)")

        // vs-2: without components or members, a value or a reason it is absent.
        var bare = good.setting(["valueQuantity"], to: nil)
        if good["component"] != nil { bare = bare.setting(["component"], to: nil) }
        let noValue = try fixture.errors(bare)
        #expect(noValue.contains { $0.key == "vs-2" && $0.location == "Observation" }, "\(noValue)")
    }

    @Test("a unit outside the profile's binding or fixed code fails at the unit's code")
    func units() throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("unit errors") }
        let weight = try fixture.example("Observation-weight.json")
        let stones = try fixture.errors(weight.setting(["valueQuantity", "code"], to: "[stone_av]").setting(["valueQuantity", "unit"], to: "st"))
        #expect(Self.has(stones, at: "Observation.valueQuantity.code", "(http://unitsofmeasure.org#[stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required)")
                || Self.has(stones, at: "Observation.valueQuantity.code", "([stone_av]) is not in the value set http://hl7.org/fhir/ValueSet/ucum-bodyweight|4.0.1 (required)"), "\(stones)")
        let error = try #require(stones.first { $0.location == "Observation.valueQuantity.code" })
        #expect(error.elementID == "Observation.value[x]:valueQuantity.code")
        #expect(error.profile == "http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0")
        #expect(error.code == "code-invalid")

        let pressure = try fixture.example("Observation-blood-pressure.json")
        let kilopascals = try fixture.errors(pressure.setting(["component", 1, "valueQuantity", "code"], to: "kPa"))
        #expect(Self.has(kilopascals, at: "Observation.component[1].valueQuantity.code", "the value must be exactly \"mm[Hg]\""), "\(kilopascals)")
    }

    @Test("a blood pressure without its components, or with two systolic ones, fails on the slices")
    func bloodPressureComponents() throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("blood pressure errors") }
        let pressure = try fixture.example("Observation-blood-pressure.json")
        let without = try fixture.errors(pressure.setting(["component"], to: nil))
        #expect(Self.has(without, at: "Observation", "slice 'Observation.component:systolic': minimum required = 1, but only found 0"), "\(without)")
        #expect(Self.has(without, at: "Observation", "slice 'Observation.component:diastolic': minimum required = 1, but only found 0"))
        #expect(Self.has(without, at: "Observation", "Observation.component: minimum required = 2, but only found 0"))

        let components = pressure["component"]!.arrayValue!
        let systolic = components.first { $0.serialized().contains("8480-6") }!
        let two = try fixture.errors(pressure.setting(["component"], to: .array([systolic, systolic])))
        #expect(Self.has(two, at: "Observation", "slice 'Observation.component:systolic': max allowed = 1, but found 2"), "\(two)")
        #expect(Self.has(two, at: "Observation", "slice 'Observation.component:diastolic': minimum required = 1, but only found 0"))
    }

    @Test("a screening assessment without its survey category, or with a broken invariant, fails where it is")
    func screeningAssessment() throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("screening assessment errors") }
        let item = try fixture.example("Observation-PHQ9-item-example-44250-9.json")
        #expect(try fixture.errors(item).isEmpty)
        let noCategory = try fixture.errors(item.setting(["category"], to: nil))
        #expect(noCategory.contains { $0.location == "Observation" && $0.message.contains("Observation.category") && $0.message.contains("minimum required") }, "\(noCategory)")
        // obs-6: a value and a reason it is absent, both.
        let both = try fixture.errors(item.setting(["dataAbsentReason"], to: ["text": "asked, not answered"]))
        #expect(both.contains { $0.key == "obs-6" && $0.location == "Observation" }, "\(both)")
    }

    @Test("a questionnaire response without its questionnaire or with an unknown status fails where it is")
    func questionnaireResponse() throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("questionnaire response errors") }
        let response = try fixture.example("QuestionnaireResponse-hunger-vital-sign-example.json")
        #expect(try fixture.errors(response).isEmpty)
        // The example carries the questionnaire's url and an extension on it (`_questionnaire`): both go.
        let noQuestionnaire = try fixture.errors(response.setting(["questionnaire"], to: nil).setting(["_questionnaire"], to: nil))
        #expect(Self.has(noQuestionnaire, at: "QuestionnaireResponse", "QuestionnaireResponse.questionnaire: minimum required = 1, but only found 0"), "\(noQuestionnaire)")
        let status = try fixture.errors(response.setting(["status"], to: "finished"))
        #expect(status.contains { $0.location == "QuestionnaireResponse.status" && $0.code == "code-invalid" }, "\(status)")
    }

    @Test("the report is an OperationOutcome carrying severity, code, location, profile and element")
    func operationOutcome() throws {
        guard let fixture = try Self.fixture() else { return SharedData.skipNotice("OperationOutcome") }
        let weight = try fixture.example("Observation-weight.json").setting(["status"], to: nil)
        let report = fixture.validator.validate(try FHIRJSONReader().read(weight.bytes()).resource)
        let outcome = report.operationOutcome
        #expect(ResourceValidator().validate(outcome).isEmpty)
        let issue = try #require(outcome.children(named: "issue").first { $0.string("severity") == "error" })
        #expect(issue.string("code") == "structure")
        #expect(issue.children(named: "expression").first?.value == "Observation")
        #expect(issue.string("diagnostics")?.contains("profile http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight|6.1.0") == true)
        #expect(issue["details"]?.string("text")?.contains("Observation.status: minimum required = 1") == true)
    }
}

@Suite("Extensions used where their definitions allow them")
struct ExtensionContextTests {
    @Test("US Core's race extension is fine on a Patient and an error on an Observation, naming where it may go")
    func raceOnAnObservation() throws {
        guard let fixture = try ProfileErrorTests.fixture() else { return SharedData.skipNotice("extension contexts") }
        let patient = try fixture.example("Patient-example.json")
        #expect(try fixture.errors(patient).isEmpty)
        let race = try #require(patient["extension"]?.arrayValue?.first { $0["url"]?.stringValue?.hasSuffix("us-core-race") == true })
        let weight = try fixture.example("Observation-weight.json").setting(["extension"], to: .array([race]))
        let errors = try fixture.errors(weight)
        #expect(errors.contains { $0.location == "Observation.extension[0]" && $0.message.contains("extension http://hl7.org/fhir/us/core/StructureDefinition/us-core-race is not allowed here: its definition allows Patient") && $0.message.hasSuffix("this element is Observation") },
                Comment(rawValue: "\(errors)"))
    }
}

@Suite("Trees built by hand: children out of definition order, or one name in two runs, are validated as the sorted tree is")
struct HandBuiltTreeTests {
    @Test("the blood pressure's children reversed, and its categories split around its code, give the sorted tree's errors")
    func unsortedChildren() throws {
        guard let fixture = try ProfileErrorTests.fixture() else { return SharedData.skipNotice("hand-built trees") }
        let pressure = try fixture.example("Observation-blood-pressure.json")
        // A category outside the profile's slices and no status: two errors the walk must still find.
        let broken = pressure.setting(["status"], to: nil)
        let sorted = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(broken.bytes()).resource
        let expected = fixture.validator.validate(sorted).errors.map(\.message).sorted()
        #expect(expected.contains { $0.contains("Observation.status: minimum required = 1") }, "\(expected)")

        var reversed = sorted
        reversed.children.reverse()
        #expect(fixture.validator.validate(reversed).errors.map(\.message).sorted() == expected)

        var split = sorted
        let categories = split.children.filter { $0.name == "category" }
        #expect(categories.count == 1)
        split.children.removeAll { $0.name == "category" }
        let code = try #require(split.children.firstIndex { $0.name == "code" })
        split.children.insert(categories[0], at: code)
        split.children.insert(contentsOf: categories + categories.prefix(1), at: code + 2)
        let splitErrors = fixture.validator.validate(split).errors.map(\.message)
        // The one VSCat category three times, in two runs (before and after the code): all three count.
        #expect(splitErrors.contains { $0.contains("slice 'Observation.category:VSCat': max allowed = 1, but found 3") }, "\(splitErrors)")
        #expect(splitErrors.contains { $0.contains("Observation.status: minimum required = 1") })
    }
}
