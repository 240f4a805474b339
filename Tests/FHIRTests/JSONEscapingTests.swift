import Foundation
import JSON
import Testing
@testable import FHIR

@Suite("FHIR JSON escaping")
struct FHIRJSONEscapingTests {
    @Test("the FHIR writer escapes strings exactly as the JSON module does (\\b, not \\u0008), and the reader reads every escape FHIR allows back")
    func sameRuleAsJSON() throws {
        // The writer escapes whatever a string holds, control characters included.
        let text = "a\u{08}b\u{0C}c\u{01}\"\\/é"
        var patient = Element(resourceType: "Patient")
        patient.append(Element(name: "name", type: "HumanName", children: [Element(name: "text", type: "string", value: text)]))
        let written = String(decoding: FHIRJSONWriter(pretty: false).write(patient), as: UTF8.self)
        #expect(written.contains(#""text":\#(JSON.JSONValue.string(text).serialized())"#), "\(written)")
        #expect(written.contains(#"a\bb\fc\u0001\"\\/é"#))
        // The reader resolves every escape of a string FHIR allows.
        let allowed = "tab\tline\ncr\r\"\\/é\u{1F600}"
        let source = #"{"resourceType": "Patient", "id": "p", "name": [{"text": \#(JSON.JSONValue.string(allowed).serialized())}]}"#
        let read = try FHIRJSONReader().read(source)
        #expect(read.resource.first("name.text")?.value == allowed && read.warnings.isEmpty)
        // Escapes the reader cannot resolve are located errors.
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader().read(#"{"resourceType": "Patient", "id": "a\qb"}"#) }
        do { _ = try FHIRJSONReader().read(#"{"resourceType": "Patient", "id": "a\qb"}"#) } catch {
            #expect(error.description.contains("1:37") && error.description.contains("bad escape '\\q'"), "\(error)")
        }
    }

    @Test("an escaped control character FHIR forbids is an error naming its place, a warning when lenient; the text keeps U+FFFD and XML written from it reads back")
    func controlCharacters() throws {
        for (escape, name) in [(#"\u0000"#, "U+0000"), (#"\u001f"#, "U+001F"), (#"\b"#, "U+0008"), (#"\f"#, "U+000C")] {
            let source = #"{"resourceType": "Patient", "id": "p", "name": [{"family": "X\#(escape)Y"}]}"#
            do {
                _ = try FHIRJSONReader().read(source)
                Issue.record("accepted \(escape)")
            } catch {
                #expect(error.description.contains("1:62: error: Patient.name[0].family: control character \(name)"), "\(error)")
            }
            let lenient = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(source)
            #expect(lenient.warnings.count == 1 && lenient.warnings[0].message.contains(name))
            #expect(lenient.resource.first("name.family")?.value == "X\u{FFFD}Y")
        }
        // The XML writer never writes a character XML cannot carry, whoever built the element.
        var patient = Element(resourceType: "Patient")
        patient.append(Element(name: "name", type: "HumanName", children: [Element(name: "family", type: "string", value: "X\u{01}Y\tZ")]))
        let xml = FHIRXMLWriter().write(patient)
        #expect(!xml.contains(0x01))
        let back = try FHIRXMLReader().read(xml)
        #expect(back.resource.first("name.family")?.value == "X\u{FFFD}Y\tZ")
    }
}

@Suite("Truncated FHIR JSON")
struct TruncatedJSONTests {
    @Test("a document cut after any property name or inside any value is a located syntax error, never a read past the input")
    func everyCut() throws {
        let whole = #"{"resourceType": "Patient", "id": "p1", "active": true, "_birthDate": {"extension": [{"url": "http://x", "valueString": "y"}]}, "birthDate": "1960-02-03", "name": [{"family": "López", "given": ["María", "Ana"]}], "contained": [{"resourceType": "Practitioner", "id": "d"}]}"#
        let bytes = Array(whole.utf8)
        #expect(try FHIRJSONReader().read(bytes).resource.string("id") == "p1")
        // Every prefix (all of them end before the document does), with and without trailing space.
        for length in 1..<bytes.count {
            for suffix in [[], Array(" \n".utf8)] {
                do {
                    _ = try FHIRJSONReader().read(Array(bytes[..<length]) + suffix)
                    Issue.record("a truncated document was accepted: \(String(decoding: bytes[..<length], as: UTF8.self))")
                } catch {
                    #expect(error.issues.allSatisfy { $0.location.line >= 1 }, "\(error)")
                }
            }
        }
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader().read(#"{"resourceType":"Patient","active":"#) }
    }
}

@Suite("Invalid UTF-8 in FHIR JSON")
struct InvalidUTF8Tests {
    @Test("invalid UTF-8 in a string is an error naming its place, a warning when lenient; valid non-ASCII text is untouched")
    func invalidBytes() throws {
        let bytes = Array(#"{"resourceType": "Patient", "id": "p", "name": [{"family": "L"#.utf8) + [0xFF, 0xFE] + Array(#"pez"}]}"#.utf8)
        do {
            _ = try FHIRJSONReader().read(bytes)
            Issue.record("accepted invalid UTF-8")
        } catch {
            #expect(error.description.contains("1:62: error: Patient.name[0].family: invalid UTF-8 (byte 0xFF)"), "\(error)")
        }
        let lenient = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(bytes)
        #expect(lenient.warnings.contains { $0.message.hasPrefix("invalid UTF-8") })
        #expect(lenient.resource.first("name.family")?.value == "L\u{FFFD}\u{FFFD}pez")
        let fine = try FHIRJSONReader().read(#"{"resourceType": "Patient", "id": "p", "name": [{"family": "López 😀"}]}"#)
        #expect(fine.resource.first("name.family")?.value == "López 😀" && fine.warnings.isEmpty)
    }
}
