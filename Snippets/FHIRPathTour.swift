// Compile, check and evaluate a FHIRPath expression, on a resource and inside a Bundle.
import FHIR
import FHIRPath

// snippet.evaluate
let carePlan = try FHIRDocument.read(contentsOf: "FHIRSamples/json/CarePlan-maria-lopez-home-care.json").resource
let codes = try FHIRPathExpression("activity.detail.code.coding.where(system = %sct).code")
let values = try codes.evaluate(on: carePlan)                 // the activities' SNOMED CT codes

// Before any data: errors with positions and suggestions, and the result type.
let checker = FHIRPathChecker(rootType: "CarePlan")
let diagnostics = checker.check(codes)                        // none
let type = checker.resultType(codes)                          // a collection of code
// snippet.end

// snippet.bundle
// Inside a Bundle: references between entries resolve; the index makes resolve() a look-up.
let bundle = try FHIRDocument.read(contentsOf: "FHIRSamples/bundle/maria-lopez-demo-bundle.json").resource
let planInBundle = bundle.children(named: "entry").compactMap { $0.first("resource") }.first { $0.resourceType == "CarePlan" }!
var environment = EvaluationEnvironment(resource: planInBundle, in: bundle)
environment.bundleIndex = BundleIndex(bundle)
let patient = try FHIRPathExpression("subject.resolve()").evaluate(in: environment)
// snippet.end
// snippet.hide
print("codes: \(values.count)")
print("diagnostics: \(diagnostics.count)")
print("type: \(type)")
print("subject resolves: \(patient.count)")
