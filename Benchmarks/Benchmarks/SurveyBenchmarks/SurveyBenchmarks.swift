// Survey benchmarks (package-benchmark): building and checking one QuestionnaireResponse (a
// PHQ-9, and a 700-item form nested 7 deep) from a CareKit outcome's values, beside building one
// Observation from an outcome (the peer in the same run: what every other outcome costs); and
// importing a CarePlan that asks for ten questionnaires.
import Benchmark
import CareStore
import FHIR
import Foundation
import Gateway
import Mapping

let root: URL = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }
    return url
}()
let zone = TimeZone(identifier: "America/New_York")!
let forms = root.appendingPathComponent("FHIRSamples/surveys/questionnaires")

func read(_ path: String) -> Element { try! FHIRDocument.read(contentsOf: path).resource }

/// An outcome record of a task asking `form`, with `values`.
func record(_ values: [OutcomeValue]) -> OutcomeRecord {
    let schedule = try! Schedule.dailyAtTime(hour: 9, minutes: 0, start: Date(timeIntervalSinceReferenceDate: 815_202_000), timeZone: zone)
    var task = CareTask(id: "CarePlan/bench/survey", title: "Survey", carePlanUUID: nil, schedule: schedule, impactsAdherence: true, timezone: zone)
    task.version.remoteID = "CarePlan/bench"
    var patient = Patient(id: "Patient/bench", name: PersonName(givenName: "Bench"), effectiveDate: Date(), timezone: zone)
    patient.version.remoteID = "Patient/bench"
    let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: values, effectiveDate: Date(), timezone: zone)
    return OutcomeRecord(outcome: outcome, task: task, patient: patient, patientID: "Patient/bench", amended: false, deleted: false)
}

let phqCodes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]
let phqValues = phqCodes.enumerated().map { i, code in
    OutcomeValue(.text(#"{"code":"\#(["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"][i % 4])","system":"http://loinc.org"}"#), kind: "/\(code)")
}

/// 100 chains of six nested groups around a question: 700 items, 7 deep.
let deepForm: Questionnaire = {
    func chain(_ n: Int, level: Int) -> String {
        if level == 7 { return #"{"linkId": "q\#(n)", "text": "Question \#(n)", "type": "integer", "required": true}"# }
        return #"{"linkId": "g\#(n).\#(level)", "type": "group", "item": [\#(chain(n, level: level + 1))]}"#
    }
    return try! Questionnaire(FHIRJSONReader().read(#"{"resourceType": "Questionnaire", "url": "https://bench.example.org/deep", "status": "active", "item": [\#((0..<100).map { chain($0, level: 1) }.joined(separator: ","))]}"#).resource)
}()

/// Sam's patient and a plan whose ten activities each ask a form of their own (PHQ-9 copies).
func tenFormPlan() -> [SourcedResource] {
    let phq = read(forms.appendingPathComponent("Questionnaire-phq-9.json").path)
    var resources = [read(root.appendingPathComponent("FHIRSamples/surveys/sam-rivera-surveys-bundle.json").path).children(named: "entry")[0]["resource"]!]
    var activities: [String] = []
    for n in 0..<10 {
        var form = phq
        form.setValue("phq-\(n)", for: "id")
        form.setValue("https://bench.example.org/Questionnaire/form-\(n)", for: "url")
        resources.append(form)
        activities.append(#"{"detail": {"status": "scheduled", "code": {"coding": [{"system": "http://loinc.org", "code": "form-\#(n)"}]}, "instantiatesCanonical": ["https://bench.example.org/Questionnaire/form-\#(n)"], "scheduledTiming": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "wk", "dayOfWeek": ["mon"]}}}}"#)
    }
    resources.append(try! FHIRJSONReader().read(#"{"resourceType": "CarePlan", "id": "ten-forms", "status": "active", "intent": "plan", "subject": {"reference": "Patient/sam-rivera"}, "activity": [\#(activities.joined(separator: ","))]}"#).resource)
    return resources.map { SourcedResource(resource: $0, origin: "benchmark") }
}

let benchmarks: @Sendable () -> Void = {
    let builder = ObservationBuilder(codes: [:], timeZone: zone)
    let phq = try! Questionnaire(read(forms.appendingPathComponent("Questionnaire-phq-9.json").path))
    let phqRecord = record(phqValues)
    let deepRecord = record((0..<100).map { OutcomeValue(.integer($0), kind: "q\($0)") })
    let observationRecord = record([OutcomeValue(.double(81.5), kind: "29463-7", units: "kg")])
    let throughput = Benchmark.Configuration(metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo, maxDuration: .seconds(10))

    Benchmark("One Observation from an outcome (the peer)", configuration: throughput) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(builder.observation(observationRecord)) }
    }
    Benchmark("One PHQ-9 QuestionnaireResponse, scored and checked, with its total extracted", configuration: throughput) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try builder.surveyResponse(phqRecord, form: phq)) }
    }
    Benchmark("One response of a 700-item form nested 7 deep, checked", configuration: .init(metrics: [.wallClock, .throughput], maxDuration: .seconds(10))) { benchmark in
        for _ in benchmark.scaledIterations { blackHole(try builder.surveyResponse(deepRecord, form: deepForm)) }
    }
    Benchmark("Import a CarePlan with ten questionnaires", configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(10))) { benchmark in
        let resources = tenFormPlan()
        let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
        for _ in benchmark.scaledIterations {
            let store = try SQLiteCarePlanStore(inMemory: ())
            let report = FHIRImporter(mappings: mappings, store: store, timeZone: zone).run(resources: resources)
            precondition(report.failedPatients.isEmpty && report.counts[.create] == 12, "\(report.counts)")
        }
    }
}
