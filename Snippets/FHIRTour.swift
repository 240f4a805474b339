// Read a resource (JSON or XML), walk it, build one in definition order, write it, and stream
// a Bundle and an NDJSON file.
import FHIR

// snippet.read
// Read (JSON or XML, by extension or content)
let parsed = try FHIRDocument.read(contentsOf: "FHIRSamples/json/CarePlan-maria-lopez-home-care.json")
let plan = parsed.resource
for activity in plan.children(named: "activity") {
    if let timing = activity.first("detail.scheduled"), timing.typeName == "Timing" {
        print(activity.first("detail.code.text")?.value ?? "-", timing.first("repeat.timeOfDay")?.value ?? "")
    }
}
// snippet.end

// snippet.build
// Build, in definition order whatever the order of the calls
var observation = Element(resourceType: "Observation")
observation.setValue("final", for: "status")
observation.append(Element(name: "value", type: "Quantity", children: [
    Element(name: "value", type: "decimal", value: "78.40"),   // stays 78.40
    Element(name: "unit", type: "string", value: "kg"),
]))

// Write
let json = FHIRJSONWriter().string(observation)        // {"resourceType": "Observation", ... "valueQuantity": {...}}
let xml = FHIRXMLWriter().string(observation)          // <Observation xmlns="http://hl7.org/fhir">...
// snippet.end
// snippet.hide
print(json)
// snippet.show

// snippet.stream
// Stream: a Bundle entry by entry, NDJSON line by line
let stream = try BundleEntryStream(path: "FHIRSamples/bundle/maria-lopez-demo-bundle.xml")
while let entry = try stream.next() { print(entry.first("resource")?.resourceType ?? "-") }
let lines = try NDJSONReader(path: "FHIRSamples/ndjson/maria-lopez-demo.ndjson")
while let line = try lines.next() { print(line.resource.resourceType!) }
// snippet.end
