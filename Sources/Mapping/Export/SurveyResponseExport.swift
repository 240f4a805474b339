import CareStore
import FHIR
import Foundation

/// One resource of a survey outcome's export, with the identifier value the EHR finds it by.
public struct ExportedPart: Sendable {
    /// The QuestionnaireResponse, or an Observation extracted from it.
    public var resource: Element
    /// The identifier value (in the builder's system): stable across the outcome's versions.
    public var identifier: String
}

/// Survey outcomes: the QuestionnaireResponse, under the same identifier and status rules as an
/// outcome's Observation, and the Observations SDC's observation-based extraction asks for.
extension ObservationBuilder {
    /// The SDC extension marking an item, or the whole form, for observation-based extraction.
    public static let observationExtract = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract"
    /// The core extension giving a decimal item's unit.
    static let questionnaireUnit = "http://hl7.org/fhir/StructureDefinition/questionnaire-unit"

    /// A survey outcome as the EHR keeps it: the QuestionnaireResponse mirroring `form`, its
    /// scores computed into their items, then an Observation per answered item marked
    /// `observationExtract`, each `derivedFrom` the response (`urn:uuid:` of the outcome version,
    /// the response's `fullUrl` in the transaction that carries them). Everything is checked
    /// first: an answer the form refuses or a required item left unanswered throws, naming the
    /// linkId, and nothing is built; so does a part that would not be valid R4. A CQL score is
    /// left out with a note.
    public func surveyResponse(_ record: OutcomeRecord, form: Questionnaire) throws(SurveyError) -> (parts: [ExportedPart], notes: [String]) {
        let outcome = record.outcome
        let (answers, notes) = try SurveyScores(form: form).apply(to: try SurveyAnswers(values: outcome.values, form: form, timeZone: timeZone))
        let status = record.deleted ? "entered-in-error" : record.amended ? "amended" : "completed"
        let subject = record.patient.map { $0.version.remoteID ?? $0.id }
        let authored = dateTime(outcome.values.compactMap(\.createdDate).max() ?? outcome.version.createdDate ?? outcome.effectiveDate)
        // A response is based on a CarePlan or ServiceRequest (R4); an SDC Task's is its output instead.
        let basedOn = [record.task.version.remoteID].compactMap { $0 }.filter { $0.hasPrefix("CarePlan/") || $0.hasPrefix("ServiceRequest/") }
        let built = try QuestionnaireResponseBuilder(form: form, requiresAnswers: !record.deleted)
            .response(answers, status: status, subject: subject, authored: authored, basedOn: basedOn)
        var response = identified("QuestionnaireResponse", record)
        for child in built.children {
            if child.name == "item", let subject, !response.children.contains(where: { $0.name == "author" }) {
                response.append(reference("author", subject))
            }
            response.append(child)
        }
        var parts = [ExportedPart(resource: response, identifier: identifierValue(record))]
        var extractNotes = notes
        for (place, item) in Self.extracted(form, answers) {
            if let observation = extractedObservation(record, item: item, place: place, answers: answers.answers[place] ?? [], authored: authored,
                                                      subject: subject, notes: &extractNotes) {
                parts.append(ExportedPart(resource: observation, identifier: "\(identifierValue(record))/\(place)"))
            }
        }
        // What leaves is valid R4 (cardinalities, required elements and bindings), or nothing does.
        let validator = ResourceValidator()
        for part in parts {
            if let issue = validator.validate(part.resource).first {
                throw .form(linkId: nil, "the \(part.resource.resourceType ?? "resource") built would not be valid R4: \(issue)")
            }
        }
        return (parts, extractNotes)
    }

    /// The answered places of items marked for extraction (on the item, or on the whole form), in
    /// the form's order.
    static func extracted(_ form: Questionnaire, _ answers: SurveyAnswers) -> [(place: String, item: Questionnaire.Item)] {
        let whole = isMarked(form.resource)
        func walk(_ items: [Questionnaire.Item]) -> [Questionnaire.Item] {
            items.flatMap { item in ((whole || isMarked(item.element)) && item.type != .group && item.type != .display ? [item] : []) + walk(item.items) }
        }
        let marked = walk(form.items)
        return answers.answers.keys.sorted().compactMap { place in
            let linkId = SurveyAnswers.split(place).linkId
            return marked.first { $0.linkId == linkId }.map { (place, $0) }
        }.sorted { a, b in
            (marked.firstIndex { $0.linkId == a.item.linkId } ?? 0, a.place) < (marked.firstIndex { $0.linkId == b.item.linkId } ?? 0, b.place)
        }
    }

    static func isMarked(_ element: Element) -> Bool {
        element.children(named: "extension").contains { $0.string("url") == observationExtract && $0.first("value")?.value == "true" }
    }

    /// The Observation one extracted answer gives: the item's code, category `survey`, the
    /// answer as its value, when the response was authored.
    func extractedObservation(_ record: OutcomeRecord, item: Questionnaire.Item, place: String, answers: [Element], authored: String,
                              subject: String?, notes: inout [String]) -> Element? {
        let codes = item.element.children(named: "code")
        guard !codes.isEmpty else {
            notes.append("item '\(item.linkId)' is marked for extraction but has no code: no Observation")
            return nil
        }
        guard let answer = answers.first, let value = observationValue(answer, item: item) else {
            notes.append("item '\(item.linkId)': a \(answers.first?.typeName ?? "missing") answer has no Observation value; not extracted")
            return nil
        }
        if answers.count > 1 { notes.append("item '\(item.linkId)': \(answers.count) answers, the first is extracted") }
        var o = Element(resourceType: "Observation")
        o.append(Element(name: "id", type: "id", value: ObservationBuilder.resourceID("\(record.outcome.id)-\(item.linkId)")))
        o.append(Element(name: "identifier", type: "Identifier", children: [
            Element(name: "system", type: "uri", value: identifierSystem),
            Element(name: "value", type: "string", value: "\(identifierValue(record))/\(place)"),
        ]))
        o.append(Element(name: "status", type: "code", value: record.deleted ? "entered-in-error" : record.amended ? "amended" : "final"))
        o.append(Element(name: "category", type: "CodeableConcept", children: [coding(ExportCoding(
            system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "survey", display: nil))]))
        var code = Element(name: "code", type: "CodeableConcept", children: codes.map { var c = $0; c.name = "coding"; return c })
        if let text = item.text { code.append(Element(name: "text", type: "string", value: text)) }
        o.append(code)
        if let subject { o.append(reference("subject", subject)) }
        o.append(Element(name: "effective", type: "dateTime", value: authored))
        o.append(Element(name: "issued", type: "instant", value: instant(record.outcome.version.createdDate ?? record.outcome.effectiveDate)))
        if let subject { o.append(reference("performer", subject)) }
        o.append(value)
        o.append(reference("derivedFrom", "urn:uuid:\(record.outcome.uuid.uuidString.lowercased())"))
        return o
    }

    /// An answer as an Observation's `value[x]`: a Coding as a CodeableConcept, a decimal as a
    /// Quantity (in the item's unit when it gives one), a date as a dateTime; nil for an
    /// attachment or a reference.
    func observationValue(_ answer: Element, item: Questionnaire.Item) -> Element? {
        var value = answer
        value.name = "value"
        switch answer.typeName {
        case "Coding":
            return Element(name: "value", type: "CodeableConcept", children: [{ var c = answer; c.name = "coding"; return c }()])
        case "decimal":
            guard let number = answer.value else { return nil }
            let unit = item.element.children(named: "extension").first { $0.string("url") == Self.questionnaireUnit }?.first("value")
            var children = [Element(name: "value", type: "decimal", value: number)]
            if let unit, let code = unit.string("code") {
                children.append(Element(name: "unit", type: "string", value: unit.string("display") ?? code))
                if let system = unit.string("system") { children.append(Element(name: "system", type: "uri", value: system)) }
                children.append(Element(name: "code", type: "code", value: code))
            }
            return Element(name: "value", type: "Quantity", children: children)
        case "date":
            return Element(name: "value", type: "dateTime", value: answer.value)
        case "uri":
            return Element(name: "value", type: "string", value: answer.value)
        case "Quantity", "integer", "boolean", "string", "dateTime", "time":
            return value
        default:
            return nil
        }
    }
}
