import FHIR
import Foundation
import JSON
import Testing
@testable import FHIRPath

@Suite("Existence tests on paths, answered without collections, agree with the tree walker")
struct ExistenceCheckTests {
    @Test("which shapes are recognised")
    func shapes() throws {
        for text in ["contained.meta.security.empty()", "dataAbsentReason.empty() or value.empty()", "text.`div`.exists()",
                     "(component.empty() and hasMember.empty()) implies (dataAbsentReason.exists() or value.exists())",
                     "exists()", "Observation.value.exists().not()", "a.exists() xor b.empty()"] {
            #expect(try FHIRPathExpression(text).existenceCheck != nil, "\(text)")
        }
        for text in ["value.count() > 0", "name.where(use = 'official').exists()", "$this.exists()", "reference.startsWith('#').not()",
                     "%resource.contained.exists()", "value.exists(true)", "value.empty() = false"] {
            #expect(try FHIRPathExpression(text).existenceCheck == nil, "\(text)")
        }
    }

    @Test("a choice's JSON spelling, a path starting with the resource's type, and absent steps, on the sample care plan and an Observation")
    func spellings() throws {
        let observation = try FHIRJSONReader().read(#"{"resourceType":"Observation","status":"final","code":{"text":"w"},"valueQuantity":{"value":72,"code":"kg"}}"#).resource
        for (text, expected) in [("valueQuantity.exists()", true), ("valueString.exists()", false), ("Observation.value.code.exists()", true),
                                 ("Patient.value.exists()", false), ("contained.contained.empty()", true), ("value.empty() implies component.exists()", true),
                                 ("code.text.exists() and status.exists().not()", false), ("Resource.status.exists() xor code.empty()", true)] {
            let expression = try FHIRPathExpression(text)
            let environment = EvaluationEnvironment(resource: observation)
            #expect(try expression.evaluate(in: environment).first?.element == nil)
            #expect(try expression.evaluate(in: environment).description == "[\(FHIRPathValue.boolean(expected))]", "\(text)")
            #expect(try expression.evaluateByTree(in: environment).description == "[\(FHIRPathValue.boolean(expected))]", "\(text) by the tree")
        }
    }

    @Test("every R4 invariant of this shape, on every element of R4's examples it applies to: the same answer both ways")
    func r4Invariants() throws {
        guard let shared = FHIRPathShared.root else { return FHIRPathShared.skipNotice("existence checks against R4's invariants") }
        let definitions = shared.appendingPathComponent("fhir-r4/definitions")
        // Each type's (and backbone element's) invariants that are existence tests, by type name.
        var checks: [String: [FHIRPathExpression]] = [:]
        for file in try FileManager.default.contentsOfDirectory(atPath: definitions.path) where file.hasPrefix("StructureDefinition-") {
            let json = try JSONValue.parse(Array(try Data(contentsOf: definitions.appendingPathComponent(file))))
            for element in json["snapshot"]?["element"]?.arrayValue ?? [] {
                guard let path = element["path"]?.stringValue else { continue }
                for constraint in element["constraint"]?.arrayValue ?? [] {
                    guard let text = constraint["expression"]?.stringValue, let expression = try? FHIRPathExpression(text),
                          expression.existenceCheck != nil else { continue }
                    checks[path, default: []].append(expression)
                }
            }
        }
        #expect(checks.values.map(\.count).reduce(0, +) > 100)
        let examples = shared.appendingPathComponent("fhir-r4/examples/json")
        var compared = 0, held = 0
        func visit(_ element: Element, in resource: Element) throws {
            for expression in checks[element.typeName ?? ""] ?? [] {
                var environment = EvaluationEnvironment(resource: resource)
                environment.context = [.element(element)]
                let fast = try expression.evaluate(in: environment)
                let tree = try expression.evaluateByTree(in: environment)
                #expect(fast.description == tree.description, "\(expression.text) on \(element.typeName ?? "")")
                compared += 1
                if fast.description == "[true]" { held += 1 }
            }
            for child in element.children { try visit(child, in: child.isResource ? child : resource) }
        }
        for file in try FileManager.default.contentsOfDirectory(atPath: examples.path).sorted() where file.hasSuffix(".json") {
            let resource = try FHIRDocument.read(contentsOf: examples.appendingPathComponent(file).path).resource
            try visit(resource, in: resource)
        }
        // Both answers occur, many times.
        #expect(compared > 5_000 && held > 1_000 && compared - held > 10, "\(compared) compared, \(held) held")
    }
}
