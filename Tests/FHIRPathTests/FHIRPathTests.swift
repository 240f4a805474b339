import Diagnostics
import FHIR
import Foundation
import Testing
@testable import FHIRPath

/// The project's sample files (no ../shared needed).
enum Samples {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("FHIRSamples")

    static func resource(_ relative: String) throws -> Element {
        try FHIRDocument.read(contentsOf: root.appendingPathComponent(relative).path).resource
    }

    static let carePlan = try! resource("json/CarePlan-maria-lopez-home-care.json")
    static let bundle = try! resource("bundle/maria-lopez-demo-bundle.json")
}

func evaluate(_ text: String, on resource: Element = Samples.carePlan, variables: [String: [FHIRPathValue]] = [:]) throws -> [String] {
    try FHIRPathExpression(text).evaluate(on: resource, variables: variables).map { Functions.string(of: $0) ?? $0.description }
}

@Suite("FHIRPath parser")
struct ParserTests {
    @Test("syntax errors point at line and column and say what was expected")
    func errors() {
        func message(_ text: String) -> String {
            do { _ = try FHIRPathExpression(text); return "parsed" } catch { return error.description }
        }
        #expect(message("activity.where(detail.status = 'scheduled'") == "1:43: expected ')' after the arguments of where(...), found the end of the expression")
        #expect(message("activity.detail.\n  code..coding") == "2:8: expected a name or function after '.', found '.'")
        #expect(message("status = 'active") == "1:10: unterminated string: missing closing '")
        #expect(message("2 + 2 /* open") == "1:7: unterminated comment: '/*' without '*/'")
        #expect(message("status and") == "1:11: expected an expression after 'and'")
        #expect(message("@2026-13-01") == "1:1: invalid date literal @2026-13-01")
        #expect(message("(1 + 2") == "1:7: expected ')' to close '(' opened at 1:1, found the end of the expression")
        #expect(message("$that") == "1:1: unknown special variable '$that' (expected $this, $index or $total)")
    }

    @Test("precedence follows the normative grammar, and every node keeps its position")
    func precedence() throws {
        #expect(try FHIRPathExpression("1 + 2 * 3 = 7 and true implies false or x is Quantity").root.description
            == "(((((1 + (2 * 3)) = 7) and true) implies (false or (x is Quantity))))".dropFirst().dropLast().description)
        #expect(try FHIRPathExpression("a | b.c[0] - -d").root.description == "(a | (b.c[0] - -d))")
        let tree = try FHIRPathExpression("name.where(\n  use = 'official').given").root
        guard case .member(let base?, "given") = tree.kind, case .function(_, "where", let arguments) = base.kind else {
            Issue.record("unexpected tree \(tree)"); return
        }
        #expect(arguments[0].position.description == "2:7")
        #expect(try FHIRPathExpression("4.5 'mg' + 7 days + @2026-11-21T08:00:00-05:00 + @T08:30 + 10L").root.description
            == "((((4.5 'mg' + 7 days) + @2026-11-21T08:00:00-05:00) + @T08:30) + 10)")
    }
}

@Suite("FHIRPath literals past a decimal's precision")
struct LongNumberTests {
    @Test("a number literal with more digits than a decimal holds is a syntax error, not a crash (found by fuzz-fhirpath)")
    func tooManyDigits() throws {
        let digits = String(repeating: "7", count: 200)
        for text in ["'a'.trim() = \(digits)", "\(digits) 'mg'", "\(digits) days", "\(digits).5"] {
            #expect(throws: FHIRPathError.self) { try FHIRPathExpression(text) }
            do { _ = try FHIRPathExpression(text) } catch { #expect(error.message.contains("has more digits than a FHIRPath decimal holds"), "\(error)") }
        }
        #expect(try evaluate("12345678901234567890123456 > 1") == ["true"])
    }
}

@Suite("FHIRPath expressions nested past the parser's depth")
struct NestingDepthTests {
    /// The message a too-deep expression gets, or nil when it parses.
    func refusal(_ text: String) -> String? {
        do { _ = try FHIRPathExpression(text); return nil } catch { return error.message }
    }

    @Test("parentheses, signs, arguments and long paths deeper than 128 levels are a syntax error, not a stack overflow (found by fuzz-fhirpath)")
    func tooDeep() throws {
        let deep = 100_000
        let texts = [
            String(repeating: "(", count: deep) + "1" + String(repeating: ")", count: deep),
            String(repeating: "-", count: deep) + "1",
            String(repeating: "a.where(", count: deep / 8) + "true" + String(repeating: ")", count: deep / 8),
            "name" + String(repeating: ".given", count: deep / 6),
            Array(repeating: "1", count: deep / 4).joined(separator: " + "),
            "name" + String(repeating: "[0]", count: deep / 3),
        ]
        for text in texts {
            #expect(refusal(text) == "the expression nests deeper than 128 levels", "\(text.prefix(40))…")
        }
        // The fuzzer's input: 3,300 bytes of mostly '(' after a function name.
        let found = "name.tracpow(" + String(repeating: "((((((((((descendant(", count: 150) + "en).count() = 3"
        #expect(refusal(found) == "the expression nests deeper than 128 levels")
    }

    @Test("an expression 100 levels deep still parses and evaluates")
    func deepButAccepted() throws {
        let text = String(repeating: "(", count: 100) + "1 + 1" + String(repeating: ")", count: 100) + " = 2"
        #expect(refusal(text) == nil)
        #expect(try evaluate(text) == ["true"])
        let path = "CarePlan" + String(repeating: ".activity", count: 100) + ".exists()"
        #expect(refusal(path) == nil)
    }
}

@Suite("FHIRPath evaluation on the sample care plan")
struct EvaluationTests {
    @Test("paths, choice types, where/select, indexers and existence on a real CarePlan")
    func paths() throws {
        #expect(try evaluate("CarePlan.status") == ["active"])
        #expect(try evaluate("activity.count()") == ["9"])
        #expect(try evaluate("activity.detail.where(code.coding.code = '229065009').scheduled.ofType(Timing).repeat.timeOfDay") == ["17:30:00"])
        #expect(try evaluate("activity.detail.scheduled.ofType(string)") == ["When you feel short of breath"].map { _ in try! evaluate("activity.detail.scheduled.ofType(string)")[0] })
        #expect(try evaluate("activity.detail.where(doNotPerform = true).exists()") == ["true"])
        // FHIR's JSON spelling of a choice is refused before evaluation, with the checker's advice;
        // unchecked evaluation (a prepared environment) still selects the choice when it has that type.
        #expect(throws: FHIRPathError.semantic(Diagnostics.SourceLocation(line: 1, column: 17), "'scheduledTiming' is not an element of CarePlan.activity.detail; write scheduled.ofType(Timing)")) {
            try evaluate("activity.detail.scheduledTiming.repeat.timeOfDay")
        }
        let unchecked = try FHIRPathExpression("activity.detail.scheduledTiming.count() = activity.detail.scheduled.ofType(Timing).count()")
            .evaluate(in: EvaluationEnvironment(resource: Samples.carePlan))
        #expect(unchecked.map { Functions.string(of: $0) } == ["true"])
        #expect(try evaluate("activity.reference.reference.first()") == ["MedicationRequest/metformin"])
        #expect(try evaluate("activity[4].detail.code.coding.code") == ["229065009"])
        #expect(try evaluate("activity.detail.code.coding.where(system = %loinc).code") == ["85354-9", "29463-7"])
        #expect(try evaluate("period.start < period.end") == ["true"])
        #expect(try evaluate("period.start + 3 months") == ["2027-02-01"])
        #expect(try evaluate("identifier.value.substring(3, 4) & '/' & title.upper().length().toString()") == ["2026/34"])
    }

    @Test("three-valued logic, empty propagation, exact decimals, quantities and dates with precision")
    func semantics() throws {
        #expect(try evaluate("{} and false") == ["false"])
        #expect(try evaluate("{} and true").isEmpty)
        #expect(try evaluate("{} or true") == ["true"])
        #expect(try evaluate("true implies {}").isEmpty)
        #expect(try evaluate("(0.1 + 0.2) = 0.3") == ["true"])
        #expect(try evaluate("1.10 * 3") == ["3.30"])
        #expect(try evaluate("7 / 2") == ["3.5"])
        #expect(try evaluate("7 div 2 | 7 mod 2") == ["3", "1"])
        #expect(try evaluate("1 / 0").isEmpty)
        #expect(try evaluate("1000 'mg' = 1 'g'") == ["true"])
        #expect(try evaluate("500 'mg' < 1 'g'") == ["true"])
        #expect(try evaluate("1 'kg' = 1 'm'").isEmpty)
        #expect(try evaluate("@2026-11 = @2026-11-21").isEmpty)
        #expect(try evaluate("@2026-11 < @2026-12-21") == ["true"])
        #expect(try evaluate("@2026-11-21T08:00:00+01:00 = @2026-11-21T07:00:00Z") == ["true"])
        #expect(try evaluate("@2026-11-21 ~ @2026-11-21T10:00:00") == ["false"])
        #expect(try evaluate("'Home  Care' ~ 'home care'") == ["true"])
        #expect(try evaluate("(1 | 2 | 2 | 3).count()") == ["3"])
        #expect(try evaluate("(1 | 2).combine(2).count()") == ["3"])
        #expect(throws: FHIRPathError.self) { try evaluate("activity.single()") }
        #expect(throws: FHIRPathError.self) { try evaluate("%unknown") }
    }

    @Test("resolve() follows references inside a Bundle, by relative reference and by fullUrl")
    func resolve() throws {
        let bundle = Samples.bundle
        #expect(try evaluate("entry.resource.ofType(CarePlan).subject.resolve().name.family", on: bundle) == ["López"])
        #expect(try evaluate("entry.resource.ofType(CarePlan).activity.reference.resolve().count()", on: bundle) == ["4"])
        #expect(try evaluate("entry.resource.ofType(CarePlan).activity.reference.resolve().medication.ofType(CodeableConcept).text", on: bundle)
            == ["Metformin 500 mg tablet", "Furosemide 40 mg tablet"])
        // A contained resource, by '#id'.
        #expect(try evaluate("entry.resource.ofType(MedicationRequest).where(id = 'amoxicillin').medication.ofType(Reference).resolve().code.coding.code", on: bundle)
            == ["308191"])
        #expect(try evaluate("entry.resource.ofType(CarePlan).author.resolve().is(Practitioner)", on: bundle) == ["true"])
        // From a resource inside the bundle: %rootResource is the Bundle.
        let plan = bundle.children.first { $0.name == "entry" && $0["resource"]?.resourceType == "CarePlan" }!["resource"]!
        let environment = EvaluationEnvironment(resource: plan, in: bundle)
        let names = try FHIRPathExpression("subject.resolve().name.given.first()").evaluate(in: environment)
        #expect(names.map { Functions.string(of: $0) } == ["María"])
        #expect(try FHIRPathExpression("careTeam.resolve().participant.count() > 0").evaluate(in: environment).map(\.description) == ["true"])
        // Not in the bundle: nothing (no error).
        #expect(try FHIRPathExpression("basedOn.resolve()").evaluate(in: environment).isEmpty)
    }

    @Test("variables, trace, extension() and type functions")
    func environment() throws {
        #expect(try evaluate("activity.count() > %threshold", variables: ["threshold": [.integer(5)]]) == ["true"])
        #expect(try evaluate("%resource.id") == ["maria-lopez-home-care"])
        let patient = try Samples.resource("json/Patient-maria-lopez.json")
        #expect(try evaluate("Patient.extension.url.count() >= 0", on: patient) == ["true"])
        #expect(try evaluate("birthDate.is(date) and birthDate.is(System.Date).not() and birthDate.getValue().is(System.Date)", on: patient) == ["true"])
        let traced = TraceLog()
        var env = EvaluationEnvironment(resource: Samples.carePlan)
        env.trace = { name, items in traced.append("\(name): \(items.count)") }
        _ = try FHIRPathExpression("activity.trace('activities').detail.trace('details', code).count()").evaluate(in: env)
        #expect(traced.entries == ["activities: 9", "details: 5"])
    }

    @Test("one compiled expression evaluates correctly from many threads at once")
    func concurrency() async throws {
        let expression = try FHIRPathExpression("activity.detail.where(code.coding.system = %loinc).description.count()")
        let plan = Samples.carePlan
        let results = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<64 { group.addTask { try expression.evaluate(on: plan).map(\.description).joined() } }
            var all: [String] = []
            for try await r in group { all.append(r) }
            return all
        }
        #expect(results.count == 64 && Set(results) == ["2"])
    }
}

final class TraceLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [String] = []
    func append(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
    var entries: [String] { lock.lock(); defer { lock.unlock() }; return list }
}

@Suite("FHIRPath checker")
struct CheckerTests {
    func check(_ text: String, on type: String = "CarePlan", strict: Bool = true) throws -> [String] {
        FHIRPathChecker(rootType: type, strict: strict).check(try FHIRPathExpression(text)).map(\.description)
    }

    @Test("misspelt elements are errors at their column, with a suggestion")
    func suggestions() throws {
        #expect(try check("CarePlan.activty.detail") == ["1:10: error: 'activty' is not an element of CarePlan; did you mean 'activity'?"])
        #expect(try check("activity.detail.scheduledTiming") == ["1:17: error: 'scheduledTiming' is not an element of CarePlan.activity.detail; write scheduled.ofType(Timing)"])
        #expect(try check("activity.detail.scheduledTiming.repeat.timeOfDay", strict: false).isEmpty)
        #expect(try check("activity.detail.scheduledTimng", strict: false) == ["1:17: error: 'scheduledTimng' is not an element of CarePlan.activity.detail; did you mean 'scheduledTiming'?"])
        #expect(try check("Patient.name", on: "CarePlan") == ["1:1: error: the expression starts from CarePlan, not Patient"])
        #expect(try check("activity.detail.where(code.codng.code = 'x')") == ["1:28: error: 'codng' is not an element of CodeableConcept; did you mean 'coding'?"])
        #expect(try check("activity.detail.scheduled.ofType(Timng)") == ["1:27: error: unknown type 'Timng'; did you mean 'Timing'?"])
        #expect(try check("subject.reference.startsWth('Patient/')") == ["1:19: error: unknown function startsWth(); did you mean 'startsWith()'?"])
        #expect(try check("title.substring('a')").isEmpty)  // argument types are checked at evaluation
        #expect(try check("status.abs()") == ["1:8: error: abs() works on numbers, not code"])
    }

    @Test("choice types, result types and cardinality are known before any data")
    func types() throws {
        let checker = FHIRPathChecker(rootType: "CarePlan")
        #expect(checker.resultType(try FHIRPathExpression("activity.detail.scheduled.ofType(Timing).repeat.frequency")).description == "collection of positiveInt")
        #expect(checker.resultType(try FHIRPathExpression("activity.detail.scheduled")).description == "collection of Period | Timing | string")
        #expect(FHIRPathChecker(rootType: "CarePlan", strict: false).resultType(try FHIRPathExpression("activity.detail.scheduledTiming.repeat.timeOfDay")).description == "collection of time")
        #expect(checker.resultType(try FHIRPathExpression("period.start")).description == "dateTime")
        #expect(checker.resultType(try FHIRPathExpression("activity.first().detail.code.text.length()")).description == "System.Integer")
        #expect(try check("activity.detail.description.startsWith('Walk')") == ["1:29: warning: startsWith() expects one item, but its input can hold several (collection of string)"])
        #expect(try check("activity.detail.where(status).exists()") == ["1:23: error: the criteria of where() must be boolean, not code"])
        #expect(try check("children().first()") == ["1:12: error: first() on a collection whose order is not defined (from children() or descendants())"])
        #expect(try check("period.start + 7").contains("1:14: error: a date or time takes a time quantity (`+ 7 days`), not System.Integer"))
    }

    @Test("past 50 findings of a kind the checker counts the rest (an expression of thousands of faults took 300 ms under ASan: found by fuzz-fhirpath)")
    func manyFindings() throws {
        let faults = Array(repeating: "status.abs()", count: 120).joined(separator: " | ")
        let found = try check(faults + " | status.startsWth('a')")
        #expect(found.count == 51)
        #expect(found.filter { $0.contains("error: abs() works on numbers, not code") }.count == 50)
        #expect(found.last?.hasSuffix(": error: and 71 more errors not shown") == true, "\(found.last ?? "")")
        let mixed = try check("activity.detail.description.startsWith('Walk') | " + faults)
        #expect(mixed.contains { $0.hasSuffix("error: and 70 more errors not shown") } && mixed.last?.contains("warning: startsWith() expects one item") == true)
    }
}

@Suite("resolve() in Synthea bundles")
struct SyntheaResolveTests {
    @Test("every subject of every Synthea entry resolves to the bundle's Patient (urn:uuid fullUrls), with and without a BundleIndex")
    func subjects() throws {
        guard let root = FHIRPathShared.root else { FHIRPathShared.skipNotice("Synthea resolve()"); return }
        let dir = root.appendingPathComponent("synthea")
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".json") }.sorted()
        #expect(names.count == 20)
        let subject = try FHIRPathExpression("subject.resolve().ofType(Patient).id")
        var resolved = 0, withSubject = 0
        for name in names {
            let bundle = try FHIRDocument.read(contentsOf: dir.appendingPathComponent(name).path).resource
            let patientID = try FHIRPathExpression("entry.resource.ofType(Patient).id").evaluate(on: bundle).first.flatMap { Functions.string(of: $0) }
            let index = BundleIndex(bundle)
            for entry in bundle.children where entry.name == "entry" {
                guard let resource = entry["resource"], resource["subject"] != nil else { continue }
                withSubject += 1
                var indexed = EvaluationEnvironment(resource: resource, in: bundle)
                indexed.bundleIndex = index
                let fast = try subject.evaluate(in: indexed).compactMap { Functions.string(of: $0) }
                let scanned = try subject.evaluate(in: EvaluationEnvironment(resource: resource, in: bundle)).compactMap { Functions.string(of: $0) }
                #expect(fast == scanned)
                if fast == [patientID] { resolved += 1 }
            }
        }
        print("Synthea: \(resolved) of \(withSubject) subjects resolved to their bundle's Patient")
        #expect(withSubject > 1000 && resolved == withSubject)
    }
}

@Suite("FHIRPath arithmetic at the limits")
struct ArithmeticLimitTests {
    @Test("integer div, mod, unary minus and abs at the 64-bit limits give empty, never a wrapped sign")
    func integerLimits() throws {
        // The issue's case: literals past 32 bits are exact decimals; div of the result to an
        // integer past 64 bits is empty (it printed -9223372036854775808).
        #expect(try evaluate("(-9223372036854775807 - 1) div -1") == [])
        #expect(try evaluate("9223372036854775807 + 1") == ["9223372036854775808"])
        // Long literals are 64-bit integers.
        let minimum = "(-9223372036854775807L - 1L)"
        #expect(try evaluate("\(minimum) div -1L") == [])
        #expect(try evaluate("\(minimum) mod -1L") == ["0"])
        #expect(try evaluate("-\(minimum)") == [])
        #expect(try evaluate("\(minimum).abs()") == [])
        #expect(try evaluate("9223372036854775807L + 1L") == [])
        #expect(try evaluate("\(minimum) - 1L") == [])
        #expect(try evaluate("4611686018427387904L * 2L") == [])
        // Just inside the limits the values are exact.
        #expect(try evaluate("\(minimum) div 1L") == ["-9223372036854775808"])
        #expect(try evaluate("-9223372036854775807L div -1L") == ["9223372036854775807"])
        #expect(try evaluate("-(-9223372036854775807L)") == ["9223372036854775807"])
        #expect(try evaluate("7 div -2") == ["-3"] && evaluate("-7 mod 2") == ["-1"])
    }

    @Test("a date plus or minus a duration of the most negative 64-bit amount is empty, not a trap in abs() (found by fuzz-fhirpath)")
    func mostNegativeDuration() throws {
        #expect(try evaluate("@1973 - -9223372036854775808 'd'") == [])
        #expect(try evaluate("@1973-05-01 + -9223372036854775808 days") == [])
        #expect(try evaluate("@1973-05-01T10:00:00Z + -9223372036854775808 'ms'") == [])
        #expect(try evaluate("'-9223372036854775808'.toInteger()") == [])
        #expect(try evaluate("@1973-05-01 + 3 days") == ["1973-05-04"])
    }

    @Test("Decimal overflow and underflow give empty instead of NaN or garbage")
    func decimalLimits() throws {
        let huge = "99999999999999999999999999999999999999.0"
        let big = "(\(huge) * 10000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000.0)"
        #expect(try evaluate("\(big) * \(big)") == [])
        #expect(try evaluate("\(big) * \(big) * \(big)") == [])
        #expect(try evaluate("(\(big) * \(big)).exists()") == ["false"])
        #expect(try evaluate("1.0 / (\(big) * \(big))") == [])
        // A decimal too large for an Int: div and toInteger-like functions refuse it.
        #expect(try evaluate("\(huge) div 1.0") == [])
        #expect(try evaluate("\(huge).floor()") == [])
        #expect(try evaluate("\(huge).ceiling()") == [])
        #expect(try evaluate("2.5 * 4") == ["10.0"])
        #expect(try evaluate("10.5 div 3") == ["3"])
    }

    @Test("date arithmetic beyond year 9999 gives empty, never a wrapped date")
    func dateLimits() throws {
        #expect(try evaluate("@2026-01-01 + 9223372036854775807 days") == [])
        #expect(try evaluate("@2026-01-01T00:00:00Z + 99999999999999999999 'ms'") == [])
        #expect(try evaluate("@2026-01-01 + 8000 years") == [])
        #expect(try evaluate("@2026-01-01 + 7000 years") == ["9026-01-01"])
        #expect(try evaluate("@2026-01-01 - 2025 years") == ["0001-01-01"])
        #expect(try evaluate("@2026-01-01 - 2026 years") == [])
    }
}

@Suite("FHIRPath regular expressions")
struct RegularExpressionTests {
    @Test("matches(), matchesFull() and replaceMatches() with capture groups, escapes, line breaks and a pattern past 256 characters (corelibs' NSRegularExpression leaked those: found by fuzz-fhirpath)")
    func regularExpressions() throws {
        #expect(try evaluate("'2026-11-24'.replaceMatches('(\\\\d+)-(\\\\d+)-(\\\\d+)', '$3/$2/$1')") == ["24/11/2026"])
        #expect(try evaluate("'a1b22'.replaceMatches('[0-9]+', '<$0>')") == ["a<1>b<22>"])
        #expect(try evaluate("'cost 5'.replaceMatches('(\\\\d)', '\\\\$$1 and $9 and \\\\\\\\')") == ["cost $5 and $9 and \\"])
        #expect(try evaluate("'x(y)'.replaceMatches('(a)|y', '[$1]')") == ["x([])"])
        #expect(try evaluate("'line one\\nline two'.matches('one.line')") == ["true"])
        #expect(try evaluate("'é'.matchesFull('.')") == ["true"])
        #expect(try evaluate("'abc'.matchesFull('b')") == ["false"])
        #expect(try evaluate("'abc'.matches('b')") == ["true"])
        let long = String(repeating: "(?:ab|cd)", count: 40)
        #expect(long.utf16.count > 256)
        #expect(try evaluate("'\(String(repeating: "ab", count: 40))'.matchesFull('\(long)')") == ["true"])
        do {
            _ = try evaluate("'abc'.matches('(unclosed')")
            Issue.record("an invalid pattern was accepted")
        } catch {
            #expect("\(error)".contains("invalid regular expression '(unclosed'"), "\(error)")
        }
    }
}

@Suite("FHIRPath dateTimes in zones")
struct ZonedDateTimeTests {
    /// Values at each precision from the hour down, in whole-hour, half-hour and UTC zones.
    static let values: [PartialDateTime] = {
        let times = ["2026-01-01T23", "2026-01-01T23:30", "2026-01-01T23:45:10", "2026-01-01T23:45:10.250", "2026-01-02T00:15", "2026-01-01T18:00:00"]
        let zones = ["Z", "+00:00", "-05:00", "+05:30", "+14:00", "-00:30"]
        let zoned = times.flatMap { time in zones.compactMap { PartialDateTime(fhirPath: time + $0) } }
        return zoned + ["2026-01-01", "2026-01", "2026-01-01T23:45:10"].compactMap { PartialDateTime(fhirPath: $0) }
    }()

    @Test("two values in one zone compare as written exactly when they compare the same in UTC")
    func sameZoneAsUTC() {
        #expect(Self.values.count == 39)
        var compared = 0
        for a in Self.values {
            for b in Self.values {
                let expected = a.offset != nil && b.offset != nil ? a.inUTC().compare(to: b.inUTC()) : a.compare(to: b)
                #expect(a.compare(to: b) == expected, "\(a) vs \(b)")
                compared += 1
            }
        }
        #expect(compared == 39 * 39)
    }

    @Test("a Period's start after its end breaks per-1, in any zone")
    func periodOrder() throws {
        let expression = try FHIRPathExpression("start.hasValue().not() or end.hasValue().not() or (start <= end)")
        for (start, end, holds) in [("2026-01-01T08:00:00-05:00", "2026-01-01T09:00:00-05:00", true),
                                    ("2026-01-01T10:00:00-05:00", "2026-01-01T09:00:00-05:00", false),
                                    ("2026-01-01T10:00:00-05:00", "2026-01-01T09:00:00-06:00", true),
                                    ("2026-01-01T10:00:00+05:30", "2026-01-01T04:29:00Z", false)] {
            let period = Element(name: "effective", type: "Period", children: [
                Element(name: "start", type: "dateTime", value: start), Element(name: "end", type: "dateTime", value: end)])
            let result = try expression.evaluate(in: EvaluationEnvironment(resource: period))
            guard result.count == 1, case .boolean(let value) = result[0] else {
                Issue.record("not one Boolean: \(result)")
                continue
            }
            #expect(value == holds, "\(start) – \(end)")
        }
    }
}

@Suite("Reads outside the context, counted")
struct OutsideReadTests {
    @Test("the environment's items, the caller's variables, resolve() and the clock are counted; constants and the context's own children are not")
    func counted() throws {
        let observation = try FHIRJSONReader().read("""
            {"resourceType":"Observation","id":"o1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"29463-7"}]},\
            "subject":{"reference":"Patient/p1"}}
            """).resource
        let code = try #require(observation["code"])
        let cases: [(String, Bool)] = [
            ("coding.system = %loinc", false), ("coding.system = %ucum", false), ("%sct.exists()", false),
            ("%'vs-observation-status'.exists()", false), ("%'ext-data-absent-reason'.exists()", false), ("coding.code.exists()", false),
            ("%resource.id = 'o1'", true), ("%rootResource.exists()", true), ("%context.exists()", true), ("%dose.exists()", true),
            ("%resource.subject.resolve().exists()", true), ("now().exists()", true), ("today().exists()", true),
        ]
        for (text, reads) in cases {
            var environment = EvaluationEnvironment(context: [.element(code)], resource: observation, variables: ["dose": [.integer(500)]])
            let counter = OutsideReads()
            environment.outsideReads = counter
            _ = try FHIRPathExpression(text).evaluate(in: environment)
            #expect((counter.count > 0) == reads, "\(text): \(counter.count) reads")
        }
    }
}
