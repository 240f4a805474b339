// Check mapping files as CI would, then map a CarePlan with the shipped mappings.
import Diagnostics
import FHIR
import Foundation
import Mapping
// snippet.hide
let carePlan = try FHIRDocument.read(contentsOf: "FHIRSamples/json/CarePlan-maria-lopez-home-care.json").resource
// snippet.show

for path in ["Mappings/careplan.yaml"] {
    let (_, diagnostics) = MappingValidator().check(path: path)
    diagnostics.forEach { print($0) }                    // file:line:col: error: …
}
let mappings = try MappingSet.load(["Mappings"])
let engine = MappingEngine(mappings: mappings, timeZone: TimeZone(identifier: "America/New_York")!)
let output = engine.map([SourcedResource(resource: carePlan, origin: "careplan.json")])
// snippet.hide
print("patients: \(output.batches.count)")
print("notes: \(output.notes.count)")
