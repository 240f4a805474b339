import Testing
@testable import FHIR

@Suite("What a lenient read keeps, the writers keep")
struct LenientRoundTripTests {
    @Test("several values of a single-valued element (an array for MedicationRequest.priorPrescription) are written back as an array, not cut to the first (found by fuzz-fhir-json)")
    func severalValuesOfASingleElement() throws {
        let source = #"{"resourceType":"MedicationRequest","status":"completed","intent":"order","subject":{"reference":"Patient/p"},"medicationCodeableConcept":{"text":"x"},"priorPrescription":[{"display":"a"},{"display":"b"}]}"#
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader().read(source) }
        let lenient = ParseOptions(lenient: true)
        let read = try FHIRJSONReader(options: lenient).read(source)
        #expect(read.warnings.map(\.message).contains("expected a single value, found an array"))
        let written = String(decoding: FHIRJSONWriter(pretty: false).write(read.resource), as: UTF8.self)
        #expect(written.contains(#""priorPrescription":[{"display":"a"},{"display":"b"}]"#), "\(written)")
        let again = try FHIRJSONReader(options: lenient).read(written)
        #expect(again.resource == read.resource)
        // XML repeats elements anyway.
        let xml = try FHIRXMLReader(options: lenient).read(FHIRXMLWriter().write(read.resource))
        #expect(xml.resource.children(named: "priorPrescription").count == 2)
    }
}

@Suite("Narrative written as XML")
struct NarrativeNamespaceTests {
    @Test("the XHTML namespace is declared once, however the div's start tag spaces it (xmlns=, a line break, then the value: found by fuzz-fhir-json)")
    func namespaceOnce() throws {
        for div in [#"<div xmlns=\n\"http://www.w3.org/1999/xhtml\">x</div>"#, #"<div\n  xmlns = 'http://www.w3.org/1999/xhtml'>x</div>"#,
                    #"<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>"#] {
            let source = #"{"resourceType": "Organization", "id": "o", "text": {"status": "generated", "div": "\#(div)"}}"#
            let read = try FHIRJSONReader().read(source)
            let xml = FHIRXMLWriter().write(read.resource)
            let text = String(decoding: xml, as: UTF8.self)
            #expect(text.components(separatedBy: "xmlns").count == 3, "\(text)")  // the resource's and the div's
            let back = try FHIRXMLReader().read(xml)
            #expect(back.resource.first("text.div")?.value?.contains(">x</div>") == true)
        }
    }
}

@Suite("Narrative read from JSON")
struct NarrativeNamespacePrefixTests {
    @Test("an element with a namespace prefix the div never declares (<b:r/>) is refused as the XML reader refuses it (found by fuzz-fhir-json)")
    func undeclaredPrefix() throws {
        let source = #"{"resourceType": "Organization", "id": "o", "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">a<b:r/></div>"}}"#
        do {
            _ = try FHIRJSONReader().read(source)
            Issue.record("an undeclared prefix was accepted")
        } catch {
            #expect(error.description.contains("Namespace prefix b on r is not defined"), "\(error)")
        }
        let declared = #"{"resourceType": "Organization", "id": "o", "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\" xmlns:b=\"urn:b\">a<b:r/></div>"}}"#
        let read = try FHIRJSONReader().read(declared)
        #expect(try FHIRXMLReader().read(FHIRXMLWriter().write(read.resource)).resource.first("text.div") != nil)
    }
}

@Suite("The narrative's own id")
struct NarrativeIDTests {
    @Test("'_div' with an id is read, not a trap: xhtml.id is a string, though the R4 definition types it System.String without saying so (found by fuzz-fhir-json)")
    func divID() throws {
        let source = #"{"resourceType": "Patient", "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">x</div>", "_div": {"id": "a"}}}"#
        let read = try FHIRJSONReader().read(source)
        #expect(read.resource.first("text.div.id")?.value == "a")
        let written = try FHIRJSONReader().read(FHIRJSONWriter(pretty: false).write(read.resource))
        #expect(written.resource == read.resource)
    }

    @Test("every element's types are in the table (none left unresolved for a reader to index)")
    func everyTypeResolves() {
        for type in ModelInfo.r4.types {
            for element in type.elements {
                #expect(element.typeIndices.allSatisfy { $0 >= 0 }, "\(type.name).\(element.name): \(element.typeNames)")
            }
        }
    }
}
