// profile-validation: US Core vital-sign Observations validated against their profiles, and the
// export with validation beside the export without it (profile-validation.sh runs it beside
// fhirkit-rs's base validation of the same resources, in one run).
//
//   profile-validation PACKAGE.tgz NDJSON-OUT [--count 20000] [--rounds 5] [--validate-only] [--invariants]
//
// Writes the Observations it validates to NDJSON-OUT (for the peer), then prints:
//   validate <resources/s>      one core, compiled profiles (compiled once before timing)
//   export-plain <outcomes/s>   OutcomeExport of a store of weights and blood pressures, base R4
//   export-unvalidated <outcomes/s>  the same to US Core 6.1.0 (claims, Provenance), not validated
//   export-validated <outcomes/s>, and its ratios to the two
//   export-file-unvalidated, export-file-validated <outcomes/s>  the US Core export as `caregate
//                               export` writes it (a Bundle streamed to a file), without and with validation
// Each figure is the best of --rounds runs. `--validate-only` stops after the first figure (for
// profiling the validator alone); `--invariants` also prints what each invariant checked on the
// first Observation costs when evaluated alone (µs per evaluation).
import CareStore
import FHIR
import FHIRPackages
import FHIRPath
import FHIRValidation
import Foundation
import Gateway
import Mapping

let arguments = CommandLine.arguments
guard arguments.count > 2 else {
    print("usage: profile-validation PACKAGE.tgz NDJSON-OUT [--count N] [--rounds N]")
    exit(64)
}
let count = arguments.firstIndex(of: "--count").map { Int(arguments[$0 + 1])! } ?? 20_000
let rounds = arguments.firstIndex(of: "--rounds").map { Int(arguments[$0 + 1])! } ?? 5
let package = try FHIRPackage.load(path: arguments[1])
let target = try ProfileTarget(name: "us-core-6.1.0", packages: [package])

/// The vital signs a patient's app records: LOINC code, display, unit and a base value.
let vitals: [(code: String, display: String, unit: String, value: Double)] = [
    ("29463-7", "Body weight", "kg", 78.4), ("8867-4", "Heart rate", "/min", 72), ("9279-1", "Respiratory rate", "/min", 16),
    ("8310-5", "Body temperature", "Cel", 36.8), ("8302-2", "Body height", "cm", 168), ("39156-5", "BMI", "kg/m2", 27.8),
    ("2708-6", "Oxygen saturation", "%", 97),
]

/// One US Core Observation as the export writes it: the vital's profile claimed, the tag, the category.
func observation(_ i: Int) -> String {
    let effective = String(format: "2026-11-%02dT08:%02d:00-05:00", 1 + i % 28, i % 60)
    let common = """
        "id":"bench-\(i)","meta":{"profile":["PROFILE"],"tag":[{"system":"http://hl7.org/fhir/us/core/CodeSystem/us-core-tags","code":"patient-supplied"}]},\
        "identifier":[{"system":"urn:caregate:outcome","value":"Patient%2Fbench/outcome-\(i)"}],"status":"final",\
        "category":[{"coding":[{"system":"http://terminology.hl7.org/CodeSystem/observation-category","code":"vital-signs"}]}],
        """
    if i % 8 == 7 {
        let body = """
            {"resourceType":"Observation",\(common)"code":{"coding":[{"system":"http://loinc.org","code":"85354-9","display":"Blood pressure panel"}]},\
            "subject":{"reference":"Patient/bench"},"effectiveDateTime":"\(effective)","performer":[{"reference":"Patient/bench"}],\
            "component":[{"code":{"coding":[{"system":"http://loinc.org","code":"8480-6"}]},"valueQuantity":{"value":\(110 + i % 30),"unit":"mm[Hg]","system":"http://unitsofmeasure.org","code":"mm[Hg]"}},\
            {"code":{"coding":[{"system":"http://loinc.org","code":"8462-4"}]},"valueQuantity":{"value":\(70 + i % 20),"unit":"mm[Hg]","system":"http://unitsofmeasure.org","code":"mm[Hg]"}}]}
            """
        return body.replacingOccurrences(of: "PROFILE", with: "http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure")
    }
    let vital = vitals[i % vitals.count]
    let profile = target.profileURL(code: "http://loinc.org|\(vital.code)") ?? "http://hl7.org/fhir/us/core/StructureDefinition/us-core-vital-signs"
    return """
        {"resourceType":"Observation",\(common)"code":{"coding":[{"system":"http://loinc.org","code":"\(vital.code)","display":"\(vital.display)"}]},\
        "subject":{"reference":"Patient/bench"},"effectiveDateTime":"\(effective)","performer":[{"reference":"Patient/bench"}],\
        "valueQuantity":{"value":\(vital.value + Double(i % 7) / 10),"unit":"\(vital.unit)","system":"http://unitsofmeasure.org","code":"\(vital.unit)"}}
        """.replacingOccurrences(of: "PROFILE", with: profile)
}

let texts = (0..<count).map(observation)
try (texts.joined(separator: "\n") + "\n").write(toFile: arguments[2], atomically: true, encoding: .utf8)
let resources = try texts.map { try FHIRJSONReader().read($0).resource }

func best(_ body: () throws -> Void) rethrows -> Double {
    var fastest = Double.infinity
    for _ in 0..<rounds {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        fastest = min(fastest, Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
    return fastest
}

// Compiled once: the profiles, their value sets and invariants (as a running gateway holds them).
var errors = 0
for resource in resources.prefix(16) { errors += target.validate(resource).errors.count }
guard errors == 0 else {
    print("profile-validation: the generated Observations do not meet their profiles (\(errors) errors)")
    exit(1)
}
let validating = try best { for resource in resources { _ = target.validate(resource) } }
print(String(format: "validate %.0f resources/s (%d US Core vital-sign Observations, best of %d)", Double(count) / validating, count, rounds))
// `--invariants`: what each invariant costs, evaluated alone on the first resource and its children.
if arguments.contains("--invariants"), let claimed = resources[0]["meta"]?["profile"]?.value,
   let structure = target.validator.profile(claimed)?.structure, let root = structure.snapshot?.first {
    var environment = EvaluationEnvironment(resource: resources[0])
    environment.lenientCollections = true
    let elements = [("Observation", resources[0])] + resources[0].children.map { ("Observation." + $0.name, $0) }
    for element in structure.snapshot ?? [] {
      guard let item = elements.first(where: { $0.0 == element.path.replacingOccurrences(of: "[x]", with: "") })?.1 else { continue }
      environment.context = [.element(item)]
      for constraint in element.constraints ?? [] where constraint.key != "ele-1" {
        guard let text = constraint.expression, let expression = try? FHIRPathExpression(text) else { continue }
        let seconds = best { for _ in 0..<20_000 { _ = try? expression.evaluate(in: environment) } }
        print(String(format: "  %@ on %@ %.2f µs", constraint.key, element.path, seconds / 20_000 * 1e6))
      }
    }
    // The invariants of the children's types (`ref-1` on a Reference, `qty-3` on a Quantity).
    for (path, item) in elements.dropFirst() {
        guard let type = item.typeName, let root = target.validator.profile("http://hl7.org/fhir/StructureDefinition/" + type)?.structure.snapshot?.first else { continue }
        environment.context = [.element(item)]
        for constraint in root.constraints ?? [] where constraint.key != "ele-1" {
            guard let text = constraint.expression, let expression = try? FHIRPathExpression(text) else { continue }
            let seconds = best { for _ in 0..<20_000 { _ = try? expression.evaluate(in: environment) } }
            print(String(format: "  %@ on %@ (%@) %.2f µs", constraint.key, path, type, seconds / 20_000 * 1e6))
        }
    }
}
// `--validate-only` stops here (for profiling the validator alone).
if arguments.contains("--validate-only") { exit(0) }

// The export: a store of one patient's weights and blood pressures, exported without and with validation.
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("profile-validation-\(getpid())")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: folder) }
let store = try SQLiteCarePlanStore(path: folder.appendingPathComponent("bench.sqlite").path)
let zone = TimeZone(identifier: "America/New_York")!
let start = Date(timeIntervalSince1970: 1_767_243_600)
let patient = Patient(id: "Patient/bench", name: PersonName(givenName: "Bench"), effectiveDate: start, timezone: zone)
let plan = CarePlan(id: "CarePlan/bench", title: "Vitals", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
var weight = CareTask(id: "CarePlan/bench/29463-7", title: "Weight", carePlanUUID: plan.uuid,
                      schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
weight.version.groupIdentifier = "29463-7"
weight.effectiveDate = start
var pressure = CareTask(id: "CarePlan/bench/85354-9", title: "Blood pressure", carePlanUUID: plan.uuid,
                        schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
pressure.version.groupIdentifier = "85354-9"
pressure.effectiveDate = start
var entities: [CareEntity] = [.patient(patient), .carePlan(plan), .task(weight), .task(pressure)]
let days = count / 2
for day in 0..<days {
    entities.append(.outcome(Outcome(taskUUID: weight.uuid, taskOccurrenceIndex: day, values: [OutcomeValue(.double(78 + Double(day % 9) / 10), units: "kg")])))
    entities.append(.outcome(Outcome(taskUUID: pressure.uuid, taskOccurrenceIndex: day, values: [
        OutcomeValue(.integer(110 + day % 30), kind: "8480-6", units: "mm[Hg]"), OutcomeValue(.integer(70 + day % 20), kind: "8462-4", units: "mm[Hg]")])))
}
try store.add(entities)
let mappings = try MappingSet.load(site: [])
let builder = ObservationBuilder(mappings: mappings, timeZone: zone)
let plain = OutcomeExport(store: store, builder: builder)
var validated = OutcomeExport(store: store, builder: builder)
validated.profiles = target
var refused = 0
try validated.forEach { if $0.refusal != nil { refused += 1 } }
guard refused == 0 else {
    print("profile-validation: the export refused \(refused) outcomes")
    exit(1)
}
var unvalidated = validated
unvalidated.validatesProfiles = false
let exportPlain = try best { try plain.forEach { _ in } }
let exportUnvalidated = try best { try unvalidated.forEach { _ in } }
let exportValidated = try best { try validated.forEach { _ in } }
// The same two exports as `caregate export` makes them: a transaction Bundle streamed to a file.
let bundlePath = folder.appendingPathComponent("export.json").path
func exportingToFile(_ export: OutcomeExport) throws {
    try FHIROutput.writing(to: bundlePath) { sink in try export.writeBundle(to: sink) }
}
let fileUnvalidated = try best { try exportingToFile(unvalidated) }
let fileValidated = try best { try exportingToFile(validated) }
let outcomes = Double(days * 2)
print(String(format: "export-plain %.0f outcomes/s (base R4: nothing claimed, no Provenance)", outcomes / exportPlain))
print(String(format: "export-unvalidated %.0f outcomes/s (US Core claimed, with Provenance, not validated)", outcomes / exportUnvalidated))
print(String(format: "export-validated %.0f outcomes/s (%.2f× the same export unvalidated, %.2f× the base R4 export)",
             outcomes / exportValidated, exportUnvalidated / exportValidated, exportPlain / exportValidated))
print(String(format: "export-file-unvalidated %.0f outcomes/s (the US Core export written as a Bundle file, as `caregate export` does, not validated)",
             outcomes / fileUnvalidated))
print(String(format: "export-file-validated %.0f outcomes/s (%.2f× the same file export unvalidated)", outcomes / fileValidated, fileUnvalidated / fileValidated))
