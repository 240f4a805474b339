import Foundation
import Testing
@testable import FHIR

/// Every read error names its place: source, line, column and element path, and what was expected.
@Suite("Error reporting")
struct ErrorReportingTests {
    func jsonIssues(_ json: String, lenient: Bool = false) -> [ParseIssue] {
        do {
            let parsed = try FHIRJSONReader(options: ParseOptions(lenient: lenient, sourceName: "in.json")).read(json)
            return parsed.warnings
        } catch {
            return error.issues
        }
    }

    @Test("a code outside its required value set names the element, the codes and the value")
    func bindingError() throws {
        let issues = jsonIssues("""
            {
              "resourceType": "Observation",
              "status": "done",
              "code": { "text": "weight" }
            }
            """)
        let issue = try #require(issues.first)
        #expect(issue.description == #"in.json:3:13: error: Observation.status: expected one of registered|preliminary|final|amended|corrected|cancelled|entered-in-error|unknown, found "done""#)
        #expect(issue.code == .binding)
    }

    @Test("malformed JSON stops with line, column and the path being read")
    func syntaxError() throws {
        let issues = jsonIssues("""
            {
              "resourceType": "Patient",
              "name": [
                { "family": "Smith", "given": ["Ann" "Lee"] }
              ]
            }
            """)
        #expect(issues.count == 1)
        let issue = try #require(issues.first)
        #expect(issue.code == .syntax)
        #expect(issue.location.line == 4)
        #expect(issue.location.column == 42)
        #expect(issue.location.path == "Patient.name[0]")
        #expect(issue.message.contains("expected ',' or ']'"))
    }

    @Test("invalid primitives are each reported, with the rule they break")
    func lexicalErrors() {
        let issues = jsonIssues("""
            {"resourceType": "Patient", "id": "has space",
             "birthDate": "1990-02-30",
             "active": "yes",
             "multipleBirthInteger": 1.5,
             "telecom": [{"system": "phone", "value": "1", "rank": 0}],
             "meta": {"lastUpdated": "2020-01-01T10:00:00"}}
            """)
        let messages = issues.map { "\($0.location.path): \($0.message)" }
        #expect(issues.count == 6, "\(messages)")
        #expect(messages.contains { $0.hasPrefix("Patient.id: \"has space\" is not a valid id") })
        #expect(messages.contains { $0.hasPrefix("Patient.birthDate: \"1990-02-30\" is not a valid date") })
        #expect(messages.contains { $0 == "Patient.active: expected a JSON boolean for boolean, found a string" })
        #expect(messages.contains { $0.hasPrefix("Patient.multipleBirthInteger: \"1.5\" is not a valid integer") })
        #expect(messages.contains { $0.hasPrefix("Patient.telecom[0].rank: \"0\" is not a valid positiveInt") })
        #expect(messages.contains { $0.hasPrefix("Patient.meta.lastUpdated: \"2020-01-01T10:00:00\" is not a valid instant") })
    }

    @Test("shape errors: array where one value belongs, single value where an array belongs, choice given twice, empty object")
    func shapeErrors() {
        let issues = jsonIssues("""
            {"resourceType": "Observation", "status": ["final"], "code": {"text": "x"},
             "category": {"text": "vital"}, "valueString": "a", "valueBoolean": true, "subject": {}}
            """)
        let messages = issues.map { "\($0.location.path): \($0.message)" }
        #expect(messages.contains("Observation.status: expected a single value, found an array"))
        #expect(messages.contains("Observation.category: expected an array"))
        #expect(messages.contains("Observation: 'valueBoolean': value[x] can have only one type (the second is left out)"))
        #expect(messages.contains("Observation.subject: empty object (FHIR JSON has no empty objects)"))
    }

    @Test("a property given twice keeps the first, leniently too, so the tree writes back as read (found by fuzz-fhir-json)")
    func repeatedProperty() throws {
        let text = #"{"resourceType": "Observation", "status": "final", "code": {"text": "x"}, "status": "amended", "_status": {"id": "a"}, "_status": {"id": "b"}, "valueString": "s", "valueBoolean": true}"#
        let parsed = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(text)
        #expect(parsed.resource.children(named: "status").count == 1)
        #expect(parsed.resource.string("status") == "final" && parsed.resource["status"]?.string("id") == "a")
        #expect(parsed.resource.children(named: "value").count == 1 && parsed.resource["value"]?.value == "s")
        #expect(parsed.warnings.map(\.message).filter { $0.contains("(the second is left out)") }.count == 3)
        let again = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(FHIRJSONWriter().write(parsed.resource)).resource
        #expect(again == parsed.resource)
    }

    @Test("lenient reading turns content errors into warnings but still refuses malformed JSON")
    func lenient() throws {
        let parsed = try FHIRJSONReader(options: ParseOptions(lenient: true)).read(#"{"resourceType": "Observation", "status": "done", "code": {"text": "x"}}"#)
        #expect(parsed.resource.string("status") == "done")
        #expect(parsed.warnings.map(\.severity) == [.warning])
        #expect(throws: FHIRFormatError.self) { try FHIRJSONReader(options: ParseOptions(lenient: true)).read(#"{"resourceType": "Observation", "status": }"#) }
    }

    @Test("unknown resource types and non-resources are refused with their names")
    func unknownResource() {
        let issues = jsonIssues(#"{"resourceType": "CarePlann", "status": "active"}"#)
        #expect(issues.first?.message == "'CarePlann' is not an R4 resource type")
        #expect(issues.first?.location.column == 18)
        let notObject = jsonIssues("[1, 2]")
        #expect(notObject.first?.message == "expected a FHIR resource (a JSON object), found '['")
    }

    @Test("XML errors carry line, column and the element path too")
    func xmlErrors() throws {
        let xml = """
            <Observation xmlns="http://hl7.org/fhir">
              <status value="done"/>
              <code><text value="x"/></code>
              <valueQuantity><value value="1,5"/></valueQuantity>
            </Observation>
            """
        do {
            _ = try FHIRXMLReader(options: ParseOptions(sourceName: "in.xml")).read(xml)
            Issue.record("accepted")
        } catch {
            let issues = error.issues
            #expect(issues.count == 2)
            #expect(issues[0].description.hasPrefix("in.xml:2:11: error: Observation.status: expected one of"))
            #expect(issues[0].location.path == "Observation.status")
            #expect(issues[0].message.hasPrefix("expected one of registered|preliminary"))
            #expect(issues[1].location.path == "Observation.valueQuantity.value")
            #expect(issues[1].location.line == 4)
            #expect(issues[1].location.column == 25)
            #expect(issues[1].message.hasPrefix("\"1,5\" is not a valid decimal"))
        }
    }

    @Test("nesting and size limits are configurable and reported when hit")
    func limits() throws {
        var deep = #"{"resourceType": "Patient", "extension": ["#
        for _ in 0..<40 { deep += #"{"url": "http://x", "extension": ["# }
        deep += #"{"url": "http://x", "valueString": "leaf"}"#
        for _ in 0..<40 { deep += "]}" }
        deep += "]}"
        #expect(try FHIRJSONReader().read(deep).resource.resourceType == "Patient")
        do {
            _ = try FHIRJSONReader(options: ParseOptions(maximumDepth: 20)).read(deep)
            Issue.record("depth limit not applied")
        } catch {
            guard case .limitExceeded(let issue) = error else { Issue.record("\(error)"); return }
            #expect(issue.message == "nesting deeper than the limit of 20")
            #expect(issue.location.path.hasPrefix("Patient.extension[0].extension[0]"))
        }
        do {
            _ = try FHIRJSONReader(options: ParseOptions(maximumDocumentSize: 100)).read(deep)
            Issue.record("size limit not applied")
        } catch {
            guard case .limitExceeded(let issue) = error else { Issue.record("\(error)"); return }
            #expect(issue.message.contains("larger than the limit of 100"))
        }
        var deepXML = "<Patient xmlns=\"http://hl7.org/fhir\">"
        for _ in 0..<30 { deepXML += "<extension url=\"http://x\">" }
        deepXML += "<valueString value=\"leaf\"/>" + String(repeating: "</extension>", count: 30) + "</Patient>"
        #expect(try FHIRXMLReader().read(deepXML).resource.resourceType == "Patient")
        #expect(throws: FHIRFormatError.self) { try FHIRXMLReader(options: ParseOptions(maximumDepth: 10)).read(deepXML) }
    }

    @Test("a missing file is a clear error naming the path")
    func missingFile() {
        do {
            _ = try FHIRJSONReader().read(contentsOf: "/nonexistent/plan.json")
            Issue.record("read a missing file")
        } catch {
            #expect(error.description == "/nonexistent/plan.json: cannot read: No such file or directory")
        }
    }
}

/// The R4 lexical rules for primitives.
@Suite("Primitive lexical rules")
struct PrimitiveTests {
    @Test("valid and invalid forms", arguments: [
        (PrimitiveKind.decimal, ["0", "-0", "1.50", "1e3", "-1.000000000000000000E+245", "1E-22", "100"], ["01", "1.", ".5", "+1", "1e", "NaN", "1,5", ""]),
        (.integer, ["0", "-2147483648", "2147483647", "+5"], ["2147483648", "01", "1.0", "", "1e2"]),
        (.positiveInt, ["1", "2147483647"], ["0", "-1", ""]),
        (.unsignedInt, ["0", "7"], ["-1", "+1"]),
        (.date, ["2026", "2026-11", "2026-11-21", "2024-02-29"], ["2026-13", "2026-11-31", "2023-02-29", "26-11-21", "2026-1-1"]),
        (.dateTime, ["2026", "2026-11-21", "2026-11-21T08:00:00Z", "2026-11-21T08:00:00.123+05:30"], ["2026-11-21T08:00", "2026-11-21T08:00:00", "2026-11-21T25:00:00Z", "2026-11-21 08:00:00Z"]),
        (.instant, ["2026-11-21T08:00:00Z", "2026-11-21T08:00:00.5-05:00"], ["2026-11-21", "2026-11-21T08:00:00"]),
        (.time, ["08:00:00", "23:59:59.999"], ["8:00:00", "08:00", "24:01:00"]),
        (.code, ["final", "in progress", "a-b"], [" final", "final ", "in  progress", ""]),
        (.id, ["example", "a.b-C9", String(repeating: "x", count: 64)], ["has space", "x_y", String(repeating: "x", count: 65)]),
        (.oid, ["urn:oid:2.16.840.1.113883"], ["urn:oid:3.1", "2.16.840", "urn:oid:1.02"]),
        (.uuid, ["urn:uuid:c757873d-ec9a-4326-a141-556f43239520"], ["urn:uuid:C757873D-EC9A-4326-A141-556F43239520", "c757873d-ec9a-4326-a141-556f43239520"]),
        (.uri, ["http://loinc.org", "urn:x"], ["has space", ""]),
        (.boolean, ["true", "false"], ["True", "1"]),
        (.base64Binary, ["aGVsbG8=", "aGVs\nbG8="], ["not base64!"]),
    ])
    func lexicalForms(kind: PrimitiveKind, valid: [String], invalid: [String]) {
        for value in valid { #expect(kind.isValid(value), "\(kind) should accept \"\(value)\"") }
        for value in invalid { #expect(!kind.isValid(value), "\(kind) should refuse \"\(value)\"") }
    }
}
