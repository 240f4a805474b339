import Foundation
import Testing
@testable import FHIR

/// The project's own demo set in FHIRSamples/: JSON, XML, the Bundle and NDJSON agree.
@Suite("FHIRSamples demo set")
struct SampleTests {
    static let samples = SharedData.projectRoot.appendingPathComponent("FHIRSamples")

    static func files(_ folder: String, _ suffix: String) -> [URL] {
        let dir = samples.appendingPathComponent(folder)
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? [])
            .filter { $0.hasSuffix(suffix) }.sorted().map { dir.appendingPathComponent($0) }
    }

    @Test("every JSON sample has an XML twin that reads to the same tree, narrative included")
    func jsonAndXMLAgree() throws {
        let jsonFiles = Self.files("json", ".json")
        #expect(jsonFiles.count == 16)
        for json in jsonFiles {
            let xml = Self.samples.appendingPathComponent("xml/" + json.deletingPathExtension().lastPathComponent + ".xml")
            let fromJSON = try FHIRJSONReader().read(contentsOf: json.path)
            let fromXML = try FHIRXMLReader().read(contentsOf: xml.path)
            #expect(fromJSON.resource == fromXML.resource, "\(json.lastPathComponent): \(firstDifference(fromJSON.resource, fromXML.resource))")
            #expect(fromJSON.warnings.isEmpty && fromXML.warnings.isEmpty)
        }
    }

    @Test("the demo care plan keeps what matters: activities, contained resources, decimals, narrative")
    func carePlanContent() throws {
        let plan = try FHIRJSONReader().read(contentsOf: Self.samples.appendingPathComponent("json/CarePlan-maria-lopez-home-care.json").path).resource
        #expect(plan.resourceType == "CarePlan")
        let activities = plan.children(named: "activity")
        #expect(activities.count == 9)
        #expect(activities.filter { $0["reference"] != nil }.count == 4)
        let walk = activities[4].first("detail.scheduled")
        #expect(walk?.typeName == "Timing")
        #expect(walk?.first("repeat.timeOfDay")?.value == "17:30:00")
        #expect(activities[7].first("detail.scheduled")?.typeName == "string")
        #expect(activities[8].first("detail.doNotPerform")?.value == "true")
        #expect(plan.first("text.div")?.value?.hasPrefix("<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Home care plan") == true)

        let weight = try FHIRXMLReader().read(contentsOf: Self.samples.appendingPathComponent("xml/Observation-maria-lopez-weight.xml").path).resource
        #expect(weight.first("value.value")?.value == "78.40")
        #expect(weight["value"]?.typeName == "Quantity")

        let patient = try FHIRJSONReader().read(contentsOf: Self.samples.appendingPathComponent("json/Patient-maria-lopez.json").path).resource
        let given = patient.children(named: "name")[0].children(named: "given")
        #expect(given.map(\.value) == ["María", "Elena"])
        #expect(given[0].children.isEmpty)
        #expect(given[1].first("extension.value")?.value == "MID")
    }

    @Test("the Bundle streamed entry by entry (JSON and XML) equals the Bundle read whole and the NDJSON file")
    func bundleStreamsAgree() throws {
        let jsonPath = Self.samples.appendingPathComponent("bundle/maria-lopez-demo-bundle.json").path
        let xmlPath = Self.samples.appendingPathComponent("bundle/maria-lopez-demo-bundle.xml").path
        let whole = try FHIRJSONReader().read(contentsOf: jsonPath).resource
        let wholeXML = try FHIRXMLReader().read(contentsOf: xmlPath).resource
        #expect(whole == wholeXML)
        let entries = whole.children(named: "entry")
        #expect(entries.count == 15)

        for path in [jsonPath, xmlPath] {
            let stream = try BundleEntryStream(path: path)
            var streamed: [Element] = []
            while let entry = try stream.next() { streamed.append(entry) }
            #expect(streamed == entries, "\(path)")
            var shell = whole
            shell.removeChildren(named: "entry")
            #expect(stream.bundle == shell)
        }

        let ndjson = try NDJSONReader(path: Self.samples.appendingPathComponent("ndjson/maria-lopez-demo.ndjson").path)
        var lines: [Element] = []
        while let parsed = try ndjson.next() { lines.append(parsed.resource) }
        #expect(lines.count == 15)
        for (line, entry) in zip(lines, entries) {
            var resource = entry["resource"]!
            resource.name = resource.resourceType!
            #expect(line == resource)
        }
    }
}
