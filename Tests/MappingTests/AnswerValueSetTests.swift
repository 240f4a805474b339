import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// Answer value sets a form names by url: found among the run's resources and listed, they are
/// contained in the form the store keeps (named by `#id`), and answers are checked against them;
/// one not found or not listable is a warning naming the item, and its answers are taken as given.
@Suite("External answer value sets")
struct AnswerValueSetTests {
    static func resource(_ json: String) -> Element { try! FHIRJSONReader().read(json).resource }

    static let form = resource(#"""
        {"resourceType": "Questionnaire", "id": "mood", "url": "http://example.org/Questionnaire/mood", "version": "1", "status": "active", "title": "Mood",
         "contained": [{"resourceType": "ValueSet", "id": "answers-1", "status": "active",
                        "compose": {"include": [{"system": "http://example.org/cs/yn", "concept": [{"code": "y"}, {"code": "n"}]}]}}],
         "item": [
           {"linkId": "often", "text": "How often?", "type": "choice", "answerValueSet": "http://example.org/vs/frequency"},
           {"linkId": "group", "type": "group", "item": [
             {"linkId": "sleep", "text": "Sleep?", "type": "choice", "answerValueSet": "http://example.org/vs/quality|2"},
             {"linkId": "again", "text": "How often again?", "type": "choice", "answerValueSet": "http://example.org/vs/frequency"}]},
           {"linkId": "filtered", "type": "choice", "answerValueSet": "http://example.org/vs/filtered"},
           {"linkId": "absent", "type": "choice", "answerValueSet": "http://example.org/vs/absent"},
           {"linkId": "local", "type": "choice", "answerValueSet": "#answers-1"}]}
        """#)
    static let frequency = resource(#"""
        {"resourceType": "ValueSet", "id": "frequency", "url": "http://example.org/vs/frequency", "status": "active", "meta": {"versionId": "3"},
         "compose": {"include": [{"system": "http://loinc.org", "concept": [
           {"code": "LA6568-5", "display": "Not at all", "extension": [{"url": "http://hl7.org/fhir/StructureDefinition/ordinalValue", "valueDecimal": 0}]},
           {"code": "LA6569-3", "display": "Several days", "extension": [{"url": "http://hl7.org/fhir/StructureDefinition/ordinalValue", "valueDecimal": 1}]}]}]}}
        """#)
    static let quality = [resource(#"""
        {"resourceType": "ValueSet", "id": "quality-2", "url": "http://example.org/vs/quality", "version": "2", "status": "active",
         "expansion": {"timestamp": "2026-11-01T00:00:00Z", "contains": [
           {"system": "http://example.org/cs/q", "abstract": true, "code": "all", "contains": [
             {"system": "http://example.org/cs/q", "code": "good", "display": "Good"}, {"system": "http://example.org/cs/q", "code": "poor", "display": "Poor"}]}]}}
        """#), resource(#"""
        {"resourceType": "ValueSet", "id": "quality-1", "url": "http://example.org/vs/quality", "version": "1", "status": "active",
         "compose": {"include": [{"system": "http://example.org/cs/q", "concept": [{"code": "old"}]}]}}
        """#)]
    static let filtered = resource(#"""
        {"resourceType": "ValueSet", "id": "filtered", "url": "http://example.org/vs/filtered", "status": "active",
         "compose": {"include": [{"system": "http://snomed.info/sct", "filter": [{"property": "concept", "op": "is-a", "value": "404684003"}]}]}}
        """#)
    static let plan = resource(#"""
        {"resourceType": "CarePlan", "id": "plan", "status": "active", "intent": "plan", "subject": {"reference": "Patient/p1"},
         "activity": [{"detail": {"status": "scheduled", "code": {"text": "Mood"}, "instantiatesCanonical": ["http://example.org/Questionnaire/mood|1"], "scheduledString": "weekly"}}]}
        """#)

    static func mapped(_ extra: [Element]) throws -> (form: Element, notes: [ImportNote]) {
        var engine = MappingEngine(mappings: try MappingSet.load([mappingsDirectory.path]), timeZone: newYork, now: importTime)
        engine.questionnaires = QuestionnaireCatalog()
        let output = engine.map(([resource(#"{"resourceType": "Patient", "id": "p1"}"#), plan, form] + extra).map { SourcedResource(resource: $0, origin: "test/\($0.relativeReference ?? "?")") })
        let kept = try #require(output.batches.first?.tasks.first?.questionnaire)
        return (try FHIRJSONReader().read(kept.json).resource, output.notes)
    }

    @Test("listed sets (a compose of concepts, an expansion) are contained under new ids and named by #id; the form's own contained set keeps its id; one set is contained once")
    func contained() throws {
        let (kept, notes) = try Self.mapped([Self.frequency, Self.filtered] + Self.quality)
        let contained = kept.children(named: "contained")
        #expect(contained.map { $0.string("id") } == ["answers-1", "answers-2", "answers-3"])
        #expect(contained.map { $0.string("url") } == [nil, "http://example.org/vs/frequency", "http://example.org/vs/quality"])
        #expect(contained[1]["meta"] == nil, "a contained resource has no meta (dom-4)")
        let form = try Questionnaire(kept)
        #expect(form.item(linkId: "often")?.element.string("answerValueSet") == "#answers-2")
        #expect(form.item(linkId: "again")?.element.string("answerValueSet") == "#answers-2")
        #expect(form.item(linkId: "sleep")?.element.string("answerValueSet") == "#answers-3")
        #expect(form.item(linkId: "often")?.options.map { $0.string("code") } == ["LA6568-5", "LA6569-3"])
        // The pinned version's expansion, its abstract parent left out.
        #expect(form.item(linkId: "sleep")?.options.map { $0.string("code") } == ["good", "poor"])
        #expect(form.item(linkId: "local")?.options.map { $0.string("code") } == ["y", "n"])
        // Sets that cannot be listed, or are not there, are named with their item.
        let warnings = notes.filter { $0.kind == .warning }.map(\.message)
        #expect(warnings.contains { $0.contains("item 'filtered'") && $0.contains("http://example.org/vs/filtered cannot be listed") }, "\(warnings)")
        #expect(warnings.contains { $0.contains("item 'absent'") && $0.contains("is not in the imported data") }, "\(warnings)")
        #expect(form.item(linkId: "filtered")?.element.string("answerValueSet") == "http://example.org/vs/filtered" && form.item(linkId: "filtered")?.options.isEmpty == true)
    }

    @Test("answers are checked against a contained set: a code outside it is refused naming the item, one in it scores by the set's weights")
    func checked() throws {
        let form = try Questionnaire(try Self.mapped([Self.frequency] + Self.quality).form)
        func answers(_ code: String) throws -> SurveyAnswers {
            try SurveyAnswers(values: [OutcomeValue(.text(#"{"code":"\#(code)","system":"http://loinc.org"}"#), kind: "often")], form: form, timeZone: newYork)
        }
        #expect(throws: SurveyError.self) { _ = try answers("LA6571-9") }
        do { _ = try answers("LA6571-9") } catch { #expect("\(error)".hasPrefix("item 'often'"), "\(error)") }
        let given = try answers("LA6569-3")
        #expect(given.answers["often"]?.first?.children(named: "extension").first?.string("url") == "http://hl7.org/fhir/StructureDefinition/ordinalValue")
        // Without the set, any code is taken.
        let loose = try Questionnaire(try Self.mapped([]).form)
        #expect(loose.item(linkId: "often")?.options.isEmpty == true)
        _ = try SurveyAnswers(values: [OutcomeValue(.text(#"{"code":"LA6571-9","system":"http://loinc.org"}"#), kind: "often")], form: loose, timeZone: newYork)
    }

    @Test("what a form names by url is listed once, in order; a contained set's #id is not")
    func named() {
        #expect(Questionnaire.externalAnswerSets(in: Self.form) == ["http://example.org/vs/frequency", "http://example.org/vs/quality|2",
                                                                    "http://example.org/vs/filtered", "http://example.org/vs/absent"])
    }
}
