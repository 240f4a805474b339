import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// Survey outcomes out: the QuestionnaireResponse under the outcome's identifier and status, its
/// scores, and the Observations SDC extraction asks for; refusals name the linkId.
@Suite("Survey outcomes as QuestionnaireResponses")
struct SurveyExportTests {
    static let phqCodes = ["44250-9", "44255-8", "44259-0", "44254-1", "44251-7", "44258-2", "44252-5", "44253-3", "44260-8"]
    static let answerCodes = ["LA6568-5", "LA6569-3", "LA6570-1", "LA6571-9"]

    static func task(_ suffix: String) throws -> CareTask {
        let output = try SurveyTaskTests.map(try bundleResources(SurveyTaskTests.surveys.appendingPathComponent("sam-rivera-surveys-bundle.json").path),
                                             forms: SurveyTaskTests.sampleCatalog())
        return try #require(output.batches.first?.tasks.first { $0.task.id.hasSuffix(suffix) }?.task)
    }

    static func form(_ name: String) throws -> Questionnaire { try Questionnaire(SurveyTaskTests.form(name)) }

    static func record(_ task: CareTask, _ values: [OutcomeValue]) -> OutcomeRecord {
        var patient = Patient(id: "Patient/sam-rivera", name: PersonName(givenName: "Sam"), effectiveDate: local("2026-11-01"), timezone: newYork)
        patient.version.remoteID = "Patient/sam-rivera"
        let outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: values, effectiveDate: local("2026-11-02 09:30"), timezone: newYork)
        return OutcomeRecord(outcome: outcome, task: task, patient: patient, patientID: "Patient/sam-rivera", amended: false, deleted: false)
    }

    /// Answer i of the PHQ-9 scored `scores[i]`, one outcome value each (`kind` = linkId).
    static func phqValues(_ scores: [Int]) -> [OutcomeValue] {
        zip(phqCodes, scores).map { code, score in
            OutcomeValue(.text(#"{"code":"\#(answerCodes[score])","system":"http://loinc.org"}"#), kind: "/\(code)", createdDate: local("2026-11-02 09:30"))
        }
    }

    static let builder = ObservationBuilder(codes: [:], timeZone: newYork)

    @Test("a PHQ-9: the response mirrors the form with its total computed, the total is extracted as an Observation derived from it")
    func phq9() throws {
        let task = try Self.task("44249-1")
        let record = Self.record(task, Self.phqValues([1, 2, 0, 3, 1, 1, 2, 0, 0]))
        let (parts, notes) = try Self.builder.surveyResponse(record, form: Self.form("phq-9"))
        #expect(notes.isEmpty, "\(notes)")
        #expect(parts.count == 2)
        let response = parts[0].resource
        #expect(response.resourceType == "QuestionnaireResponse" && response.string("status") == "completed")
        #expect(parts[0].identifier == Outcome.scopedID(patientID: "Patient/sam-rivera", outcomeID: record.outcome.id))
        #expect(response.string("questionnaire") == "https://clinic.example.org/fhir/Questionnaire/phq-9|2.0")
        #expect(response.first("basedOn.reference")?.value == "CarePlan/sam-rivera-wellbeing")
        #expect(response.first("subject.reference")?.value == "Patient/sam-rivera" && response.first("author.reference")?.value == "Patient/sam-rivera")
        let items = response.children(named: "item")
        #expect(items.map { $0.string("linkId") } == Self.phqCodes.map { "/\($0)" } + ["/44261-6"])
        #expect(items[0].string("text") == "Little interest or pleasure in doing things")
        #expect(items.last?.first("answer.value")?.value == "10")
        let total = parts[1].resource
        #expect(total.first("code.coding.code")?.value == "44261-6" && total.first("category.coding.code")?.value == "survey")
        #expect(total.first("value")?.typeName == "integer" && total.first("value")?.value == "10")
        #expect(total.first("derivedFrom.reference")?.value == "urn:uuid:\(record.outcome.uuid.uuidString.lowercased())")
        #expect(parts[1].identifier == parts[0].identifier + "//44261-6")
        #expect(total.string("effective") == response.string("authored"))
    }

    @Test("both shapes of answers a CareKit app records give the same response")
    func bothShapes() throws {
        let task = try Self.task("44249-1")
        let form = try Self.form("phq-9")
        let perAnswer = try Self.builder.surveyResponse(Self.record(task, Self.phqValues([3, 3, 2, 2, 1, 1, 0, 0, 3])), form: form)
        // ResearchKitOnFHIR's: one text value of kind questionnaireResponse, flat, no text.
        let flat = zip(Self.phqCodes, [3, 3, 2, 2, 1, 1, 0, 0, 3]).map { code, score in
            #"{"linkId": "/\#(code)", "answer": [{"valueCoding": {"system": "http://loinc.org", "code": "\#(Self.answerCodes[score])"}}]}"#
        }
        let whole = OutcomeValue(.text(#"{"resourceType": "QuestionnaireResponse", "status": "completed", "item": [\#(flat.joined(separator: ","))]}"#),
                                 kind: SurveyAnswers.responseKind, createdDate: local("2026-11-02 09:30"))
        var record = Self.record(task, [whole])
        record.outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 0, values: [whole], effectiveDate: local("2026-11-02 09:30"), timezone: newYork)
        let fromResponse = try Self.builder.surveyResponse(record, form: form)
        let writer = FHIRJSONWriter(pretty: false)
        func items(_ parts: [ExportedPart]) -> [String] { parts[0].resource.children(named: "item").map { String(decoding: writer.write($0), as: UTF8.self) } }
        #expect(items(perAnswer.parts) == items(fromResponse.parts))
        #expect(perAnswer.parts[1].resource.first("value")?.value == "15" && fromResponse.parts[1].resource.first("value")?.value == "15")
    }

    @Test("weight and height: quantities and the computed BMI extracted in their units; amended and entered-in-error versions keep the identifiers")
    func weightHeight() throws {
        let task = try Self.task("29463-7")
        let values = [OutcomeValue(.double(81.5), kind: "weight", units: "kg", createdDate: local("2026-11-02 08:10")),
                      OutcomeValue(.double(178), kind: "height", units: "cm", createdDate: local("2026-11-02 08:10"))]
        let record = Self.record(task, values)
        let (parts, _) = try Self.builder.surveyResponse(record, form: Self.form("weight-height"))
        #expect(parts.map { $0.resource.first("code.coding.code")?.value } == [nil, "29463-7", "8302-2", "39156-5"])
        let bmi = parts[3].resource.first("value")
        #expect(bmi?.typeName == "Quantity" && bmi?.string("value") == "25.7" && bmi?.string("code") == "kg/m2")
        #expect(parts[1].resource.first("value")?.string("value") == "81.5" && parts[1].resource.first("value")?.string("code") == "kg")
        // The response nests the measurements in their group.
        #expect(parts[0].resource.children(named: "item").map { $0.string("linkId") } == ["body"])
        var later = record
        later.amended = true
        let amended = try Self.builder.surveyResponse(later, form: Self.form("weight-height")).parts
        #expect(amended.map { $0.resource.string("status") } == ["amended", "amended", "amended", "amended"])
        #expect(amended.map(\.identifier) == parts.map(\.identifier))
        later.deleted = true
        let voided = try Self.builder.surveyResponse(later, form: Self.form("weight-height")).parts
        #expect(voided.map { $0.resource.string("status") } == ["entered-in-error"] + Array(repeating: "entered-in-error", count: 3))
    }

    @Test("SDC extraction: a flag on a group reaches its items, a false turns a branch off, a flagged Coding alone is the code, the nearest category wins, each answer of a repeating item is one Observation")
    func extractionRules() throws {
        let flag = { (on: Bool) in #"{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract", "valueBoolean": \#(on)}"# }
        let category = #"{"url": "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observation-extract-category", "valueCodeableConcept": {"coding": [{"system": "http://terminology.hl7.org/CodeSystem/observation-category", "code": "vital-signs"}]}}"#
        let code = { (c: String) in #"[{"system": "http://loinc.org", "code": "\#(c)"}]"# }
        let form = try Questionnaire(FHIRJSONReader().read(#"""
            {"resourceType": "Questionnaire", "url": "https://clinic.example.org/fhir/Questionnaire/rules", "status": "active", "item": [
              {"linkId": "vitals", "type": "group", "extension": [\#(flag(true)), \#(category)], "item": [
                {"linkId": "pulse", "type": "integer", "code": \#(code("8867-4"))},
                {"linkId": "skip", "type": "integer", "code": \#(code("9279-1")), "extension": [\#(flag(false))]},
                {"linkId": "temps", "type": "decimal", "repeats": true, "code": \#(code("8310-5"))}]},
              {"linkId": "mood", "type": "integer", "code": [{"system": "http://loinc.org", "code": "x-1"},
                 {"extension": [\#(flag(true))], "system": "http://loinc.org", "code": "x-2"}]},
              {"linkId": "note", "type": "string", "code": \#(code("n-1"))}]}
            """#).resource)
        let values = [OutcomeValue(.integer(72), kind: "pulse"), OutcomeValue(.integer(18), kind: "skip"), OutcomeValue(.double(36.6), kind: "temps"),
                      OutcomeValue(.double(37.1), kind: "temps"), OutcomeValue(.integer(4), kind: "mood"), OutcomeValue(.text("fine"), kind: "note")]
        let record = Self.record(try Self.task("44249-1"), values)
        let parts = Array(try Self.builder.surveyResponse(record, form: form).parts.dropFirst())
        #expect(parts.map { $0.resource.first("code.coding.code")?.value } == ["8867-4", "8310-5", "8310-5", "x-2"])
        #expect(parts.map { String($0.identifier.split(separator: "/").last!) } == ["pulse", "temps", "temps[2]", "mood"])
        #expect(parts.map { $0.resource.first("category.coding.code")?.value } == ["vital-signs", "vital-signs", "vital-signs", "survey"])
        #expect(parts.last?.resource.first("code")?.children(named: "coding").count == 1)
        #expect(parts.allSatisfy { $0.resource.first("basedOn.reference")?.value == "CarePlan/sam-rivera-wellbeing" })
    }

    @Test("answers the form refuses name their linkId: a required item unanswered, a code not among the options, a linkId the form lacks, a wrong type")
    func refusals() throws {
        let task = try Self.task("44249-1")
        let form = try Self.form("phq-9")
        func refusal(_ values: [OutcomeValue]) -> String? {
            do { _ = try Self.builder.surveyResponse(Self.record(task, values), form: form); return nil } catch { return error.description }
        }
        #expect(refusal(Array(Self.phqValues([1, 1, 1, 1, 1, 1, 1, 1, 1]).dropLast())) == "item '/44260-8': required, and not answered")
        var wrongCode = Self.phqValues([1, 1, 1, 1, 1, 1, 1, 1, 1])
        wrongCode[2] = OutcomeValue(.text(#"{"code":"LA9999-9","system":"http://loinc.org"}"#), kind: "/44259-0")
        #expect(refusal(wrongCode)?.hasPrefix("item '/44259-0': 'http://loinc.org|LA9999-9' is not one of the item's options") == true, "\(refusal(wrongCode) ?? "")")
        #expect(refusal(Self.phqValues([1, 1, 1, 1, 1, 1, 1, 1, 1]) + [OutcomeValue(.integer(1), kind: "/99999-9")])?.hasPrefix("item '/99999-9'") == true)
        var wrongType = Self.phqValues([1, 1, 1, 1, 1, 1, 1, 1, 1])
        wrongType[0] = OutcomeValue(.date(local("2026-11-02")), kind: "/44250-9")
        #expect(refusal(wrongType)?.hasPrefix("item '/44250-9'") == true, "\(refusal(wrongType) ?? "")")
    }
}
