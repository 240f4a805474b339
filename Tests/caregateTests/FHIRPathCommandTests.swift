import Foundation
import Testing

@Suite("caregate fhirpath")
struct FHIRPathCommandTests {
    let cli = CommandLineTests()
    let plan = "FHIRSamples/json/CarePlan-maria-lopez-home-care.json"

    @Test("one JSON line per file, FHIR types kept: a Quantity as a Quantity, a date with its precision, XML input too")
    func evaluates() async throws {
        let run = try await cli.caregate(["fhirpath", "value.ofType(Quantity) | effective", "FHIRSamples/json/Observation-maria-lopez-weight.json",
                                    "FHIRSamples/xml/Observation-maria-lopez-weight.xml"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0 == #"[{"value":78.40,"unit":"kg","system":"http://unitsofmeasure.org","code":"kg"},"2026-11-02T07:34:00-05:00"]"# })
        let dates = try await cli.caregate(["fhirpath", "period.start.toString().substring(0, 7).toDate() | (period.start + 1 month)", plan])
        #expect(dates.stdout == "[\"2026-11\",\"2026-12-01\"]\n")
    }

    @Test("--var passes FHIRPath literals; a bad expression and an unreadable file are errors naming the place")
    func variablesAndErrors() async throws {
        let run = try await cli.caregate(["fhirpath", "activity.count() > %n and %since < period.end", plan, "--var", "n=5", "--var", "since=@2026-12-01"])
        #expect(run.stdout == "[true]\n")
        let bad = try await cli.caregate(["fhirpath", "activity.where(detail", plan])
        #expect(bad.status == 1)
        #expect(bad.stderr.contains("1:22: expected ')' after the arguments of where(...)"))
        let missing = try await cli.caregate(["fhirpath", "status", plan, "nope.json"])
        #expect(missing.status == 1)
        #expect(missing.stdout == "[\"active\"]\n")
        #expect(missing.stderr.contains("nope.json"))
    }

    @Test("--check types the expression against a resource type: errors with suggestions, the result type, exit status")
    func check() async throws {
        let wrong = try await cli.caregate(["fhirpath", "--check", "CarePlan", "activity.detail.scheduledTiming.repeat"])
        #expect(wrong.status == 1)
        #expect(wrong.stdout.contains("1:17: error: 'scheduledTiming' is not an element of CarePlan.activity.detail; write scheduled.ofType(Timing)"))
        let lenient = try await cli.caregate(["fhirpath", "--check", "CarePlan", "--json-choice-names", "activity.detail.scheduledTiming.repeat.timeOfDay"])
        #expect(lenient.stdout == "result: collection of time\n")
        // Evaluating too: refused without the flag, the Quantity's value with it.
        let weight = "FHIRSamples/json/Observation-maria-lopez-weight.json"
        let strict = try await cli.caregate(["fhirpath", "valueQuantity.value", weight])
        #expect(strict.status == 1 && strict.stderr.contains("'valueQuantity' is not an element of Observation; write value.ofType(Quantity)"))
        let evaluated = try await cli.caregate(["fhirpath", "--json-choice-names", "valueQuantity.value", weight])
        let spelled = try await cli.caregate(["fhirpath", "value.ofType(Quantity).value", weight])
        #expect(evaluated.status == 0 && evaluated.stdout == spelled.stdout && evaluated.stdout == "[78.40]\n", "\(evaluated.stdout)\(evaluated.stderr)")
        let typo = try await cli.caregate(["fhirpath", "--check", "CarePlan", "activty.detail"])
        #expect(typo.status == 1)
        #expect(typo.stdout == "1:1: error: 'activty' is not an element of CarePlan; did you mean 'activity'?\nresult: empty\n")
        let right = try await cli.caregate(["fhirpath", "--check", "CarePlan", "activity.detail.scheduled.ofType(Timing).repeat.timeOfDay"])
        #expect(right.status == 0)
        #expect(right.stdout == "result: collection of time\n")
        let usage = try await cli.caregate(["fhirpath", "status"])
        #expect(usage.status == 64)
    }
}
