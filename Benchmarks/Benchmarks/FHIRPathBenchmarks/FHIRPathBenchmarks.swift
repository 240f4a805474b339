// FHIRPath benchmarks (package-benchmark): typical mapping expressions over the 20 Synthea
// bundles in ../../shared/synthea, measured next to parsing the same bundles in the same run.
// Goal: mapping all 20 bundles costs less than parsing them. Resources/s = 5,840 / seconds.
import Benchmark
import FHIR
import FHIRPath
import Foundation

let bundleBytes: [[UInt8]] = {
    var dir = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { dir.deleteLastPathComponent() }
    let synthea = dir.deletingLastPathComponent().appendingPathComponent("shared/synthea")
    let names = (try? FileManager.default.contentsOfDirectory(atPath: synthea.path))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
    if names.isEmpty { print("SKIPPED: \(synthea.path) not found; FHIRPath benchmarks need ../shared") }
    return names.compactMap { try? Array(Data(contentsOf: synthea.appendingPathComponent($0))) }
}()

let bundles: [Element] = bundleBytes.compactMap { try? FHIRJSONReader().read($0).resource }

/// The expressions a mapping file would hold, compiled once, by resource type.
let mappingExpressions: [String: [FHIRPathExpression]] = [
    // Activity codes, selected with where().
    "CarePlan": [
        "activity.detail.where(status != 'cancelled').code.coding.where(system = %sct).code",
        "period.start",
        // A resolve() through the Bundle (urn:uuid fullUrls).
        "subject.resolve().name.where(use = 'official').given.first()",
    ],
    // A Timing extraction.
    "MedicationRequest": [
        "dosageInstruction.timing.repeat.select(frequency.toString() & '/' & period.toString() & ' ' & periodUnit)",
        "medication.ofType(CodeableConcept).coding.code",
        "subject.resolve().id",
    ],
    "Observation": [
        "value.ofType(Quantity).where(system = %ucum).value",
        "code.coding.where(system = %loinc).code",
        "subject.resolve().id",
    ],
    "Encounter": ["type.coding.code", "subject.resolve().id"],
    "Procedure": ["code.coding.code", "subject.resolve().id"],
    "Condition": ["code.coding.code", "subject.resolve().id"],
    "Immunization": ["vaccineCode.coding.code", "patient.resolve().id"],
].mapValues { $0.map { try! FHIRPathExpression($0) } }

/// Evaluates the expressions for every entry resource; returns how many resources were mapped.
func mapAll() throws -> Int {
    var mapped = 0
    for bundle in bundles {
        let index = BundleIndex(bundle)
        for entry in bundle.children where entry.name == "entry" {
            guard let resource = entry["resource"], let type = resource.resourceType else { continue }
            mapped += 1
            guard let expressions = mappingExpressions[type] else { continue }
            var environment = EvaluationEnvironment(resource: resource, in: bundle)
            environment.bundleIndex = index
            for expression in expressions { blackHole(try expression.evaluate(in: environment)) }
        }
    }
    return mapped
}

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .mallocCountTotal],
        maxDuration: .seconds(10),
        maxIterations: 30
    )

    Benchmark("Synthea JSON parse, 20 bundles (the yardstick)", configuration: configuration) { _ in
        for file in bundleBytes { blackHole(try FHIRJSONReader().read(file)) }
    }

    Benchmark("Synthea mapping expressions, 20 bundles (5,840 resources)", configuration: configuration) { _ in
        blackHole(try mapAll())
    }

    Benchmark("Compile three mapping expressions", configuration: configuration) { _ in
        for text in ["activity.detail.where(status != 'cancelled').code.coding.where(system = %sct).code",
                     "dosageInstruction.timing.repeat.select(frequency.toString() & '/' & period.toString() & ' ' & periodUnit)",
                     "subject.resolve().name.where(use = 'official').given.first()"] {
            blackHole(try FHIRPathExpression(text))
        }
    }
}
