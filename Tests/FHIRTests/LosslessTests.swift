import Foundation
import Testing
@testable import FHIR

/// What "lossless" means, case by case, in both formats.
@Suite("Lossless model")
struct LosslessTests {
    func roundTripJSON(_ json: String) throws -> (Element, String) {
        let first = try FHIRJSONReader().read(json).resource
        let written = FHIRJSONWriter(pretty: false).string(first)
        let second = try FHIRJSONReader().read(written).resource
        #expect(first == second)
        // And through XML, where the content allows.
        let xml = FHIRXMLWriter().write(first)
        let fromXML = try FHIRXMLReader().read(xml).resource
        #expect(fromXML == first, "\(firstDifference(fromXML, first))")
        return (first, written)
    }

    @Test("decimals keep their lexical form: 1.50, 1e3, -0.0, 100000000000000000000.000001")
    func decimals() throws {
        let (tree, written) = try roundTripJSON(#"{"resourceType":"Observation","status":"final","code":{"text":"x"},"component":[{"code":{"text":"a"},"valueQuantity":{"value":1.50}},{"code":{"text":"b"},"valueQuantity":{"value":1e3}},{"code":{"text":"c"},"valueQuantity":{"value":-0.0}},{"code":{"text":"d"},"valueQuantity":{"value":100000000000000000000.000001}}]}"#)
        #expect(tree.children(named: "component").map { $0.first("value.value")?.value } == ["1.50", "1e3", "-0.0", "100000000000000000000.000001"])
        #expect(written.contains(#""value":1.50}"#) && written.contains(#""value":1e3}"#) && written.contains("100000000000000000000.000001"))
    }

    @Test("primitive ids and extensions, with null placeholders on either side")
    func primitiveExtensions() throws {
        let json = #"{"resourceType":"Patient","name":[{"given":["Ann",null,"Lee"],"_given":[null,{"id":"g2","extension":[{"url":"http://example.org/x","valueString":"no value"}]},{"extension":[{"url":"http://example.org/y","valueBoolean":true}]}]}],"birthDate":"1970","_birthDate":{"id":"bd"},"_gender":{"extension":[{"url":"http://hl7.org/fhir/StructureDefinition/data-absent-reason","valueCode":"asked-declined"}]}}"#
        let (tree, written) = try roundTripJSON(json)
        let given = tree.first("name")!.children(named: "given")
        #expect(given.map(\.value) == ["Ann", nil, "Lee"])
        #expect(given[1].string("id") == "g2")
        #expect(tree["birthDate"]?.string("id") == "bd")
        #expect(tree["gender"]?.value == nil && tree["gender"]?.first("extension.value")?.value == "asked-declined")
        #expect(JSONValue.difference(try JSONValue.parse(Array(json.utf8)), try JSONValue.parse(Array(written.utf8))) == nil)
    }

    @Test("contained resources, modifierExtension and narrative survive")
    func containedAndModifiers() throws {
        let json = ##"{"resourceType":"CarePlan","text":{"status":"generated","div":"<div xmlns=\"http://www.w3.org/1999/xhtml\"><p>Walk <b>daily</b> &amp; rest</p></div>"},"contained":[{"resourceType":"Goal","id":"g","lifecycleStatus":"active","description":{"text":"walk"},"subject":{"reference":"Patient/p"}},{"resourceType":"Medication","id":"m","code":{"text":"x"}}],"modifierExtension":[{"url":"http://example.org/do-not-import","valueBoolean":true}],"status":"active","intent":"plan","subject":{"reference":"Patient/p"},"goal":[{"reference":"#g"}]}"##
        let (tree, _) = try roundTripJSON(json)
        let contained = tree.children(named: "contained")
        #expect(contained.map(\.resourceType) == ["Goal", "Medication"])
        #expect(tree["modifierExtension"]?.string("url") == "http://example.org/do-not-import")
        #expect(tree.first("text.div")?.value == #"<div xmlns="http://www.w3.org/1999/xhtml"><p>Walk <b>daily</b> &amp; rest</p></div>"#)
    }

    @Test("strings with line breaks, tabs, quotes and non-ASCII survive XML attributes and JSON escapes")
    func strings() throws {
        let (tree, _) = try roundTripJSON(#"{"resourceType":"Patient","name":[{"text":"line one\nline two\ttabbed \"quoted\" <b> & ü 😀 \u00e9"}]}"#)
        #expect(tree.first("name.text")?.value == "line one\nline two\ttabbed \"quoted\" <b> & ü 😀 é")
    }

    @Test("every character an XML attribute escapes, at every position of values 1 to 24 bytes long, is escaped exactly once and reads back (the writer finds them eight bytes at a time)")
    func attributeEscapesAtEveryAlignment() throws {
        let specials: [Character] = ["&", "<", ">", "\"", "\n", "\r", "\t", "é"]
        for length in 1...24 {
            for position in 0..<length {
                for special in specials {
                    var text = Array(repeating: Character("a"), count: length)
                    text[position] = special
                    let value = String(text)
                    var patient = Element(name: "Patient", type: "Patient")
                    patient.append(Element(name: "gender", type: "code", value: "female"))
                    var name = Element(name: "name", type: "HumanName")
                    name.append(Element(name: "text", type: "string", value: value))
                    patient.append(name)
                    let xml = FHIRXMLWriter(pretty: false).string(patient)
                    let escaped = value.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                        .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
                        .replacingOccurrences(of: "\n", with: "&#10;").replacingOccurrences(of: "\r", with: "&#13;")
                        .replacingOccurrences(of: "\t", with: "&#9;")
                    #expect(xml.contains("<text value=\"\(escaped)\"/>"), "\(length) bytes, \(special) at \(position): \(xml)")
                    #expect(try FHIRXMLReader().read(xml).resource.first("name.text")?.value == value)
                }
            }
        }
    }

    @Test("unknown JSON properties are kept verbatim, reported as warnings, and written back")
    func unknownJSON() throws {
        let json = #"{"resourceType":"Patient","id":"p","futureElement":{"a":[1,2.50,{"b":null}]},"gender":"female"}"#
        let parsed = try FHIRJSONReader().read(json)
        #expect(parsed.warnings.count == 1)
        #expect(parsed.warnings[0].code == .unknownElement)
        #expect(parsed.warnings[0].location.path == "Patient.futureElement")
        let unknown = parsed.resource["futureElement"]
        #expect(unknown?.isUnknown == true)
        let written = FHIRJSONWriter(pretty: false).string(parsed.resource)
        #expect(JSONValue.difference(try JSONValue.parse(Array(json.utf8)), try JSONValue.parse(Array(written.utf8))) == nil)
    }

    @Test("unknown XML elements are kept verbatim, reported as warnings, and written back")
    func unknownXML() throws {
        let xml = #"<Patient xmlns="http://hl7.org/fhir"><id value="p"/><futureElement><a value="1"/></futureElement><gender value="female"/></Patient>"#
        let parsed = try FHIRXMLReader().read(xml)
        #expect(parsed.warnings.map(\.code) == [.unknownElement])
        // Kept as a self-contained fragment: libxml2 declares the namespace it was in.
        #expect(parsed.resource["futureElement"]?.value == #"<futureElement xmlns="http://hl7.org/fhir"><a value="1"/></futureElement>"#)
        let rewritten = try FHIRXMLReader().read(FHIRXMLWriter().write(parsed.resource))
        #expect(rewritten.resource == parsed.resource)
    }

    @Test("an unknown XML element between the repeats of an element goes last, so the repeats stay one JSON array")
    func unknownBetweenRepeats() throws {
        let xml = #"<Patient xmlns="http://hl7.org/fhir"><name><given value="A"/><gevin value="x"/><given value="B"/></name></Patient>"#
        let parsed = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(xml).resource
        #expect(parsed.first("name")?.children.map(\.name) == ["given", "given", "gevin"])
        let json = FHIRJSONWriter(pretty: false).string(parsed)
        let back = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(json).resource
        #expect(back.first("name")?.children(named: "given").compactMap(\.value) == ["A", "B"], "\(json)")
    }

    @Test("an <id> element in a datatype is unknown content (id is an attribute there), so two of them write back")
    func idElementInDatatype() throws {
        let xml = #"<Observation xmlns="http://hl7.org/fhir"><code id="c1"><id value="a"/><id value="b"/><text value="t"/></code></Observation>"#
        let parsed = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(xml)
        let code = try #require(parsed.resource.first("code"))
        #expect(code.children.map(\.name) == ["id", "text", "id", "id"])
        #expect(code.children.filter { !$0.isUnknown }.map(\.value) == ["c1", "t"])
        #expect(parsed.warnings.contains { $0.message.contains("<id> in CodeableConcept is an attribute in FHIR XML") }, "\(parsed.warnings)")
        let rewritten = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(FHIRXMLWriter().write(parsed.resource))
        #expect(rewritten.resource == parsed.resource)
        let onlyUnknown = try FHIRXMLReader(options: ParseOptions(lenient: true))
            .read(#"<Observation xmlns="http://hl7.org/fhir"><code id="c1"><id value="a"/></code></Observation>"#).resource
        let onlyUnknownBack = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(FHIRXMLWriter().write(onlyUnknown)).resource
        #expect(onlyUnknownBack == onlyUnknown)
        let extensionURL = #"<Patient xmlns="http://hl7.org/fhir"><extension url="http://x"><url value="http://y"/><valueString value="v"/></extension></Patient>"#
        let withURL = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(extensionURL).resource
        #expect(withURL.first("extension")?.string("url") == "http://x")
    }

    @Test("an element holding only the other format's unknown content is left out, never written empty")
    func emptiedByConversion() throws {
        let xml = #"<Observation xmlns="http://hl7.org/fhir"><status><value value="final"/></status><code><text value="t"/></code></Observation>"#
        let fromXML = try FHIRXMLReader().read(xml).resource
        let json = FHIRJSONWriter(pretty: false).string(fromXML)
        #expect(json == #"{"resourceType":"Observation","code":{"text":"t"}}"#)
        #expect(try FHIRJSONReader().read(json).resource.first("code")?.string("text") == "t")
        let back = try FHIRXMLReader().read(FHIRXMLWriter().write(fromXML)).resource
        #expect(back == fromXML)

        let withUnknown = #"{"resourceType":"Observation","status":"final","code":{"shoeSize":12},"valueQuantity":{"value":1,"_unit":{"shoeSize":1}}}"#
        let fromJSON = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(withUnknown).resource
        let written = String(decoding: FHIRXMLWriter().write(fromJSON), as: UTF8.self)
        #expect(!written.contains("<code") && !written.contains("<unit"), "\(written)")
        let strict = try FHIRXMLReader().read(written).resource
        #expect(strict.string("status") == "final" && strict.first("value")?.string("value") == "1")
        #expect(FHIRJSONWriter(pretty: false).string(fromJSON).contains(#""code":{"shoeSize":12}"#))
    }

    @Test("resourceType may appear anywhere in the object")
    func resourceTypeAnywhere() throws {
        let tree = try FHIRJSONReader().read(#"{"id":"x","gender":"male","resourceType":"Patient"}"#).resource
        #expect(tree.resourceType == "Patient" && tree.string("gender") == "male")
    }

    @Test("children are kept in definition order whatever the input order, so JSON and XML trees agree")
    func definitionOrder() throws {
        let shuffled = try FHIRJSONReader().read(#"{"gender":"male","resourceType":"Patient","name":[{"family":"A"}],"id":"x","active":true}"#).resource
        #expect(shuffled.children.map(\.name) == ["id", "active", "name", "gender"])
    }

    @Test("elements built in code are placed in definition order and written as valid FHIR")
    func building() throws {
        var observation = Element(resourceType: "Observation")
        observation.setValue("final", for: "status")
        observation.append(Element(name: "code", type: "CodeableConcept", children: [Element(name: "text", type: "string", value: "Body weight")]))
        observation.append(Element(name: "value", type: "Quantity", children: [
            Element(name: "value", type: "decimal", value: "78.40"),
            Element(name: "code", type: "code", value: "kg"),
        ]))
        observation.setValue("obs-1", for: "id")
        #expect(observation.children.map(\.name) == ["id", "status", "code", "value"])
        let json = FHIRJSONWriter(pretty: false).string(observation)
        #expect(json == #"{"resourceType":"Observation","id":"obs-1","status":"final","code":{"text":"Body weight"},"valueQuantity":{"value":78.40,"code":"kg"}}"#)
        #expect(try FHIRJSONReader().read(json).resource == observation)
    }
}
