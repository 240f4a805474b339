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

    /// A file in the temporary folder holding `bytes`, removed by the caller.
    func temporaryFile(_ bytes: [UInt8], _ name: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-\(name)-\(UUID().uuidString).xml").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The first issue of what reading `bytes` (from memory, then from a file) throws; both must agree.
    func refusal(_ bytes: [UInt8], sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ParseIssue? {
        let path = try temporaryFile(bytes, "scan")
        defer { try? FileManager.default.removeItem(atPath: path) }
        var issues: [ParseIssue] = []
        for fromFile in [false, true] {
            do {
                _ = fromFile ? try FHIRXMLReader().read(contentsOf: path) : try FHIRXMLReader().read(bytes)
                Issue.record("the document was accepted", sourceLocation: sourceLocation)
            } catch {
                issues.append(contentsOf: error.issues.prefix(1))
            }
        }
        #expect(issues.count == 2 && issues[0].code == issues[1].code && issues[0].location.line == issues[1].location.line,
                "memory and file agree: \(issues)", sourceLocation: sourceLocation)
        return issues.last
    }

    @Test("a DOCTYPE past the first 64 KiB, after a long comment, is refused with its line before libxml2 reads it")
    func lateDoctype() throws {
        let comment = "<!-- " + String(repeating: "padding <!DOCTYPE inside a comment is text>\n", count: 2_000) + "-->\n"
        let xml = comment + "<!DOCTYPE Patient [ <!ENTITY x SYSTEM \"file:///etc/hostname\"> ]>\n<Patient xmlns=\"http://hl7.org/fhir\"><id value=\"&x;\"/></Patient>"
        #expect(xml.utf8.count > 64 * 1024)
        let issue = try #require(try refusal(Array(xml.utf8)))
        #expect(issue.code == .forbidden && issue.message.contains("DTD"), "\(issue)")
        #expect(issue.location.line == 2_002)
    }

    @Test("an element with more attributes than the scan allows is refused with its line, in milliseconds; one at the limit reads")
    func attributeLimit() throws {
        func patient(_ count: Int) -> [UInt8] {
            let attributes = (0..<count).map { " a\($0)=\"x\"" }.joined()
            return Array("<Patient xmlns=\"http://hl7.org/fhir\">\n<id value=\"p\"/>\n<active value=\"true\"\(attributes)/></Patient>".utf8)
        }
        let issue = try #require(try refusal(patient(200_000)))
        #expect(issue.code == .limit && issue.message.contains("more than \(XMLMarkupScan.maximumAttributes) attributes"), "\(issue)")
        #expect(issue.location.line == 3)
        // The namespace declaration is one of the element's attributes; the root has only that.
        let read = try FHIRXMLReader(options: ParseOptions(lenient: true)).read(patient(XMLMarkupScan.maximumAttributes - 1))
        #expect(read.resource.string("active") == "true")
        // Quoted `=` and `>` in values, comments, CDATA and processing instructions are not attributes.
        let quoted = "<Patient xmlns=\"http://hl7.org/fhir\"><!-- \(String(repeating: "a=\"b\" ", count: 2_000)) --><?pi \(String(repeating: "=", count: 2_000))?>"
            + "<name><text value=\"\(String(repeating: "=>", count: 2_000))\"/></name></Patient>"
        #expect(try FHIRXMLReader().read(quoted).resource.first("name.text")?.value?.count == 4_000)
    }

    @Test("FHIR XML is read as UTF-8 whatever it declares: UTF-16 (even with a DOCTYPE inside) and Latin-1 bytes are errors naming their line")
    func onlyUTF8() throws {
        let doctype = "<?xml version=\"1.0\" encoding=\"UTF-16\"?>\n<!DOCTYPE Patient [ <!ENTITY x SYSTEM \"file:///etc/hostname\"> ]>\n<Patient xmlns=\"http://hl7.org/fhir\"><id value=\"&x;\"/></Patient>"
        let utf16: [UInt8] = [0xFF, 0xFE] + Array(doctype.utf16).flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] }
        let refused = try #require(try refusal(utf16))
        #expect(refused.code == .syntax && refused.message.contains("UTF-16") && refused.location.line == 1, "\(refused)")
        var latin1 = Array("<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<Patient xmlns=\"http://hl7.org/fhir\">\n<name><family value=\"Fran".utf8)
        latin1 += [0xE7] + Array("ois\"/></name></Patient>".utf8)
        let issue = try #require(try refusal(latin1))
        #expect(issue.code == .syntax && issue.message.contains("not UTF-8") && issue.message.contains("0xE7") && issue.location.line == 3, "\(issue)")
        // Declared UTF-8 with a byte-order mark reads.
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Patient xmlns=\"http://hl7.org/fhir\"><active value=\"true\"/></Patient>".utf8)
        #expect(try FHIRXMLReader().read(bom).resource.string("active") == "true")
    }

    @Test("a JSON narrative with a DOCTYPE or too many attributes is refused by the same scan")
    func narrativeScan() {
        let many = (0..<5_000).map { " a\($0)='x'" }.joined()
        for div in ["<div xmlns='http://www.w3.org/1999/xhtml'><!DOCTYPE div>x</div>", "<div xmlns='http://www.w3.org/1999/xhtml'\(many)>x</div>"] {
            let json = #"{"resourceType": "Patient", "text": {"status": "generated", "div": "\#(div)"}}"#
            do { _ = try FHIRJSONReader().read(json); Issue.record("accepted") } catch {
                #expect(error.issues.contains { $0.message.contains("DTD") || $0.message.contains("attributes") }, "\(error.issues)")
            }
        }
    }
}
