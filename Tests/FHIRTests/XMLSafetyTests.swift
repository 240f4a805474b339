import Foundation
import Testing
@testable import FHIR

/// FHIR XML is read safely: no DTD, no entity expansion, no network or file access.
@Suite("XML safety")
struct XMLSafetyTests {
    func expectForbidden(_ xml: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) {
        do {
            _ = try FHIRXMLReader(options: ParseOptions(sourceName: "attack.xml")).read(xml)
            Issue.record("the document was accepted", sourceLocation: sourceLocation)
        } catch {
            guard case .malformed(let issue) = error else {
                Issue.record("unexpected error \(error)", sourceLocation: sourceLocation)
                return
            }
            #expect(issue.code == .forbidden, sourceLocation: sourceLocation)
            #expect(issue.description.contains("attack.xml"), sourceLocation: sourceLocation)
            #expect(issue.message.contains("DTD") || issue.message.contains("entity"), sourceLocation: sourceLocation)
        }
    }

    @Test("an XXE document (external entity to a local file) is rejected, and the file is never read")
    func xxe() {
        expectForbidden("""
            <?xml version="1.0"?>
            <!DOCTYPE Patient [ <!ENTITY xxe SYSTEM "file:///etc/passwd"> ]>
            <Patient xmlns="http://hl7.org/fhir"><id value="&xxe;"/></Patient>
            """)
    }

    @Test("a billion-laughs document is rejected without expanding anything")
    func billionLaughs() {
        var entities = "<!ENTITY lol \"lol\">"
        for level in 1...9 {
            let previous = level == 1 ? "lol" : "lol\(level - 1)"
            entities += "<!ENTITY lol\(level) \"" + String(repeating: "&\(previous);", count: 10) + "\">"
        }
        expectForbidden("""
            <?xml version="1.0"?>
            <!DOCTYPE lolz [\(entities)]>
            <Patient xmlns="http://hl7.org/fhir"><id value="x"/><gender value="&lol9;"/></Patient>
            """)
    }

    @Test("a plain DTD (external or internal) is rejected")
    func plainDTD() {
        expectForbidden("""
            <?xml version="1.0"?>
            <!-- a comment first -->
            <!DOCTYPE Patient SYSTEM "http://example.org/fhir.dtd">
            <Patient xmlns="http://hl7.org/fhir"><id value="x"/></Patient>
            """)
        expectForbidden("<!DOCTYPE Patient [<!ELEMENT Patient ANY>]><Patient xmlns=\"http://hl7.org/fhir\"/>")
    }

    @Test("a DTD in a file is refused before libxml2 reads it")
    func dtdInFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-dtd-\(getpid()).xml").path
        try "<?xml version=\"1.0\"?>\n<!DOCTYPE Patient [ <!ENTITY x SYSTEM \"file:///etc/hostname\"> ]>\n<Patient xmlns=\"http://hl7.org/fhir\"><id value=\"&x;\"/></Patient>"
            .write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(throws: FHIRFormatError.self) { try FHIRXMLReader().read(contentsOf: path) }
        do { _ = try FHIRXMLReader().read(contentsOf: path) } catch {
            #expect(error.issues.first?.location.line == 2)
            #expect(error.issues.first?.location.file == path)
        }
    }

    @Test("elements outside the FHIR namespace at the root and XML that is not well-formed are clear errors")
    func notFHIR() {
        #expect(throws: FHIRFormatError.self) { try FHIRXMLReader().read("<Patient><id value=\"x\"/></Patient>") }
        #expect(throws: FHIRFormatError.self) { try FHIRXMLReader().read("") }
        do { _ = try FHIRXMLReader(options: ParseOptions(sourceName: "broken.xml")).read("<Patient xmlns=\"http://hl7.org/fhir\">\n  <id value=\"x\">\n</Patient>") } catch {
            guard case .malformed(let issue) = error else { Issue.record("expected malformed, got \(error)"); return }
            #expect(issue.code == .syntax)
            #expect(issue.location.file == "broken.xml")
            #expect(issue.location.line == 3)
        }
    }
}
