import Foundation
import Testing
@testable import FHIR

@Suite("Generated R4 type table")
struct ModelInfoTests {
    @Test("the table knows R4's types, choices, cardinalities, modifiers and required bindings")
    func facts() throws {
        let model = ModelInfo.r4
        #expect(model.types.filter { $0.kind == .resource && !$0.isAbstract }.count == 146)
        #expect(model.types.filter { $0.kind == .primitive }.count == 20)
        let carePlan = try #require(model.resourceType(named: "CarePlan"))
        let status = try #require(carePlan.element(named: "status"))
        #expect(status.min == 1 && status.max == 1 && status.isModifier)
        #expect(status.binding?.codes == ["draft", "active", "on-hold", "revoked", "completed", "entered-in-error", "unknown"])
        let scheduled = try #require(model.type(named: "CarePlan.activity.detail")?.element(named: "scheduled"))
        #expect(scheduled.isChoice && scheduled.typeNames == ["Timing", "Period", "string"])
        #expect(model.type(named: "CarePlan.activity.detail")?.property(named: "scheduledTiming")?.element.name == "scheduled")
        #expect(model.type(named: "Timing.repeat")?.element(named: "when")?.binding?.codes.contains("ACM") == true)
        #expect(model.type(named: "Timing.repeat")?.element(named: "dayOfWeek")?.binding?.codes == ["mon", "tue", "wed", "thu", "fri", "sat", "sun"])
        #expect(model.type(named: "Questionnaire.item")?.element(named: "item")?.typeNames == ["Questionnaire.item"])
        #expect(model.isType(model.type(named: "Age")!, derivedFrom: "Quantity"))
        #expect(model.isType(model.type(named: "Patient")!, derivedFrom: "DomainResource"))
        #expect(model.type(named: "Extension")?.element(named: "value")?.typeNames.count == 50)
    }

    @Test("every type that is not a resource has its id first, as the XML reader assumes when it tells an <id> element from the id attribute")
    func idFirst() {
        let withId = ModelInfo.r4.types.filter { $0.kind != .resource && $0.element(named: "id") != nil }
        #expect(withId.count > 100)
        #expect(withId.filter { $0.elements.first?.name != "id" }.map(\.name) == [])
    }

    @Test("the committed table, views and core conformance resources are what fhir-tablegen makes from the R4 definitions")
    func tableIsUpToDate() throws {
        guard let shared = SharedData.root else { return SharedData.skipNotice("generated table drift check") }
        let binary = SharedData.projectRoot.appendingPathComponent(".build/debug/fhir-tablegen").path
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            Issue.record("fhir-tablegen is not built at \(binary) (swift build builds it)")
            return
        }
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-tables-\(getpid())")
        try FileManager.default.createDirectory(at: output, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: output) }
        let result = try ExternalTool.run(binary, [shared.appendingPathComponent("fhir-r4/definitions").path, output.path, output.path])
        #expect(result.status == 0, "\(result.stderr)")
        for file in ["R4Definitions.swift", "R4Views.swift"] {
            let generated = try String(contentsOf: output.appendingPathComponent(file), encoding: .utf8)
            let committed = try String(contentsOfFile: SharedData.projectRoot.appendingPathComponent("Sources/FHIR/Generated/" + file).path, encoding: .utf8)
            #expect(generated == committed, "Sources/FHIR/Generated/\(file) is stale: run swift run fhir-tablegen")
        }
        let conformance = try String(contentsOf: output.appendingPathComponent("R4CoreConformance.swift"), encoding: .utf8)
        let committed = try String(contentsOfFile: SharedData.projectRoot.appendingPathComponent("Sources/FHIRPackages/Generated/R4CoreConformance.swift").path, encoding: .utf8)
        #expect(conformance == committed, "Sources/FHIRPackages/Generated/R4CoreConformance.swift is stale: run swift run fhir-tablegen")
    }
}
