import Foundation
import JSON
import Testing
@testable import FHIR

@Suite("FHIR JSON escaping")
struct FHIRJSONEscapingTests {
    @Test("the FHIR writer escapes strings exactly as the JSON module does (\\b, not \\u0008), and the reader reads every escape back")
    func sameRuleAsJSON() throws {
        let text = "a\u{08}b\u{0C}c\u{01}\"\\/é"
        let source = #"{"resourceType": "Patient", "id": "p", "name": [{"text": \#(JSON.JSONValue.string(text).serialized())}]}"#
        let patient = try FHIRJSONReader().read(source).resource
        #expect(patient.first("name.text")?.value == text)
        let written = String(decoding: FHIRJSONWriter(pretty: false).write(patient), as: UTF8.self)
        #expect(written.contains(#""text":\#(JSON.JSONValue.string(text).serialized())"#), "\(written)")
        #expect(written.contains(#"a\bb\fc\u0001\"\\/é"#))
        // Escapes the reader cannot resolve are located errors.
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader().read(#"{"resourceType": "Patient", "id": "a\qb"}"#) }
        do { _ = try FHIRJSONReader().read(#"{"resourceType": "Patient", "id": "a\qb"}"#) } catch {
            #expect(error.description.contains("1:37") && error.description.contains("bad escape '\\q'"), "\(error)")
        }
    }
}
