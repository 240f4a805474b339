import FHIR
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
@testable import FHIRPath

/// The official FHIRPath R4 test suite (`../shared/fhirpath/r4/tests-fhir-r4.xml`): reading it,
/// running one case, and judging the result the way the suite's harness does.
struct OfficialCase {
    var group = ""
    var name = ""
    var inputFile: String?
    var expression = ""
    /// `syntax`, `semantic`, `execution` (or `true`): the expression must be rejected.
    var invalid: String?
    var mode: String?
    var predicate = false
    var outputs: [(type: String, text: String)] = []
}

enum OfficialSuite {
    static var directory: URL? { FHIRPathShared.root?.appendingPathComponent("fhirpath/r4") }

    /// Every `<test>` of the suite (mode tests, which need engine options, are not part of it).
    static func cases() throws -> [OfficialCase] {
        guard let directory else { return [] }
        let data = try Data(contentsOf: directory.appendingPathComponent("tests-fhir-r4.xml"))
        let reader = SuiteReader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        guard parser.parse() else { throw CocoaError(.fileReadCorruptFile) }
        return reader.cases
    }

    final class SuiteReader: NSObject, XMLParserDelegate {
        var cases: [OfficialCase] = []
        private var current: OfficialCase?
        private var group = ""
        private var text = ""
        private var outputType = ""

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            text = ""
            switch name {
            case "group": group = attributes["name"] ?? ""
            case "test":
                current = OfficialCase(group: group, name: attributes["name"] ?? "", inputFile: attributes["inputfile"],
                                       mode: attributes["mode"], predicate: attributes["predicate"] == "true")
            case "expression":
                current?.invalid = attributes["invalid"]
                if let mode = attributes["mode"] { current?.mode = mode }
            case "output": outputType = attributes["type"] ?? ""
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            switch name {
            case "expression": current?.expression = text
            case "output": current?.outputs.append((outputType, text))
            case "test":
                if let c = current { cases.append(c) }
                current = nil
            default: break
            }
        }
    }

    nonisolated(unsafe) private static var inputs: [String: Element] = [:]
    private static let inputLock = NSLock()

    static func input(_ file: String) throws -> Element {
        inputLock.lock()
        defer { inputLock.unlock() }
        if let cached = inputs[file] { return cached }
        let parsed = try FHIRDocument.read(contentsOf: directory!.appendingPathComponent(file).path, options: ParseOptions(lenient: true))
        inputs[file] = parsed.resource
        return parsed.resource
    }

    /// Runs one case: nil when it passes, else why not.
    static func run(_ test: OfficialCase) -> String? {
        let expression: FHIRPathExpression
        do {
            expression = try FHIRPathExpression(test.expression)
        } catch {
            return test.invalid != nil ? nil : "syntax error: \(error)"
        }
        if test.invalid == "syntax" { return "parsed, but the suite expects a syntax error" }
        let resource: Element
        do {
            resource = try input(test.inputFile ?? "patient-example.xml")
        } catch {
            return "input file \(test.inputFile ?? "?") unreadable: \(error)"
        }
        if test.invalid == "semantic", let type = resource.resourceType {
            let diagnostics = FHIRPathChecker(rootType: type).check(expression)
            if diagnostics.contains(where: { $0.severity == .error }) { return nil }
        }
        var result: [FHIRPathValue]
        do {
            result = try expression.evaluate(on: resource)
        } catch {
            return test.invalid != nil ? nil : "evaluation error: \(error)"
        }
        if test.invalid != nil { return "evaluated to \(result), but the suite expects it rejected (\(test.invalid!))" }
        if test.predicate { result = [.boolean(!result.isEmpty)] }
        guard result.count == test.outputs.count else {
            return "expected \(test.outputs.map { "\($0.type) \($0.text)" }), got \(result)"
        }
        for (item, expected) in zip(result, test.outputs) where !matches(item, expected) {
            return "expected \(expected.type) \(expected.text), got \(item)"
        }
        return nil
    }

    static func matches(_ item: FHIRPathValue, _ expected: (type: String, text: String)) -> Bool {
        let value = item.systemValue
        switch (expected.type, value) {
        case ("boolean", .boolean(let b)): return expected.text == (b ? "true" : "false")
        case ("integer", .integer(let i)): return Int(expected.text) == i
        case ("decimal", .decimal(let d)): return FHIRPathDecimal(expected.text).map { $0 == d } ?? false
        case ("decimal", .integer(let i)): return FHIRPathDecimal(expected.text).map { $0 == FHIRPathDecimal(i) } ?? false
        case ("string", .string(let s)), ("code", .string(let s)), ("id", .string(let s)), ("uri", .string(let s)): return s == expected.text
        case ("date", .date(let d)), ("dateTime", .dateTime(let d)): return "@" + d.description == expected.text
        case ("time", .time(let t)): return "@T" + t.description == expected.text
        case ("Quantity", .quantity(let q)):
            guard let parsed = Conversions.parseQuantity(expected.text) else { return false }
            return parsed.value == q.value && parsed.unit == q.unit
        case ("", _):
            // Outputs without a type: compared as written (`@2014-01`, `1.58650000`, `1.5 'cm'`).
            return value.literalText == expected.text || Functions.string(of: value) == expected.text
        default: return false
        }
    }
}

/// `../shared` for these tests, or nil with a visible notice.
enum FHIRPathShared {
    static let root: URL? = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        url.appendPathComponent("shared")
        return FileManager.default.fileExists(atPath: url.appendingPathComponent("fhirpath").path) ? url : nil
    }()

    static func skipNotice(_ test: String) {
        print("SKIPPED \(test): ../shared is not present beside the project; FHIRPath conformance data unavailable")
    }
}
