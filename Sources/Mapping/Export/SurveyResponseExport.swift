import CareStore
import FHIR
import Foundation

/// One resource of a survey outcome's export, with the identifier value the EHR finds it by.
public struct ExportedPart: Sendable {
    /// The QuestionnaireResponse, or an Observation extracted from it.
    public var resource: Element
    /// The identifier value (in the builder's system): stable across the outcome's versions.
    public var identifier: String

    /// A part and its identifier value.
    public init(resource: Element, identifier: String) {
        self.resource = resource
        self.identifier = identifier
    }
}

/// Survey outcomes: the QuestionnaireResponse, under the same identifier and status rules as an
/// outcome's Observation, and the Observations SDC's observation-based extraction asks for.
extension ObservationBuilder {
    /// The SDC extension marking an item, or the whole form, for observation-based extraction.
    public static let observationExtract = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observationExtract"
    /// The SDC extension giving extracted Observations' category (on the form or an item; the nearest wins).
    public static let extractCategory = "http://hl7.org/fhir/uv/sdc/StructureDefinition/sdc-questionnaire-observation-extract-category"
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
        let status = Self.status(record, first: "completed")
        let subject = record.patient.map { $0.version.remoteID ?? $0.id }
        let authoredAt = outcome.values.compactMap(\.createdDate).max() ?? outcome.version.createdDate ?? outcome.effectiveDate
        let authored = dateTime(authoredAt)
        // A response is based on a CarePlan or ServiceRequest (R4); an SDC Task's is its output instead.
        let basedOn = [record.task.version.remoteID].compactMap { $0 }.filter { $0.hasPrefix("CarePlan/") || $0.hasPrefix("ServiceRequest/") }
        let built = try QuestionnaireResponseBuilder(form: form, requiresAnswers: !record.deleted)
            .response(answers, status: status, subject: subject, authored: authored, basedOn: basedOn)
        var response = identified("QuestionnaireResponse", record)
        for child in built.children {
            if child.name == "item", let subject, !response.children.contains(where: { $0.name == "author" }) {
                response.append(Element.reference("author", to: subject))
            }
            response.append(child)
        }
        var parts = [ExportedPart(resource: response, identifier: identifierValue(record))]
        var extractNotes = notes
        let extractable = Self.extractable(form)
        for place in answers.answers.keys.sorted(by: { Self.order(of: $0, in: extractable) < Self.order(of: $1, in: extractable) }) {
            guard let extract = extractable.first(where: { $0.item.linkId == SurveyAnswers.split(place).linkId }) else { continue }
            for (n, answer) in (answers.answers[place] ?? []).enumerated() {
                // One Observation per answer (a repeating question's second is `…/linkId[2]`).
                let part = place + (n == 0 ? "" : "[\(n + 1)]")
                if let observation = extractedObservation(record, extract: extract, part: part, answer: answer, response: response, issued: authoredAt,
                                                          notes: &extractNotes) {
                    parts.append(ExportedPart(resource: observation, identifier: "\(identifierValue(record))/\(part)"))
                }
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

    /// An item SDC's observation-based extraction takes: its codes (those flagged, when any
    /// Coding is) and the categories the nearest level that names any gives (a screening form
    /// names `survey` and its screening-assessment category, `sdoh` or `functional-status`).
    struct Extract {
        var item: Questionnaire.Item
        var codes: [Element]
        var categories: [Element]
    }

    /// The items to extract, in the form's order: an item is when it, its nearest ancestor that
    /// says, or the form says `observationExtract` true (or one of its Codings does) and it has a
    /// code; a `false` turns it and what is under it off, until something under it says true.
    static func extractable(_ form: Questionnaire) -> [Extract] {
        func walk(_ items: [Questionnaire.Item], on inherited: Bool, categories: [Element]) -> [Extract] {
            items.flatMap { item -> [Extract] in
                let codes = item.element.children(named: "code")
                let flagged = codes.filter { flag($0) == true }
                let on = flag(item.element) ?? (flagged.isEmpty ? inherited : true)
                let own = categoriesOf(item.element)
                let here = own.isEmpty ? categories : own
                let extract = on && !codes.isEmpty && item.type != .group && item.type != .display
                    ? [Extract(item: item, codes: flagged.isEmpty ? codes : flagged, categories: here)] : []
                return extract + walk(item.items, on: on, categories: here)
            }
        }
        return walk(form.items, on: flag(form.resource) ?? false, categories: categoriesOf(form.resource))
    }

    static func flag(_ element: Element) -> Bool? {
        element.children(named: "extension").first { $0.string("url") == observationExtract }?.first("value")?.value.map { $0 == "true" }
    }

    static func categoriesOf(_ element: Element) -> [Element] {
        element.children(named: "extension").filter { $0.string("url") == extractCategory }.compactMap { $0.first("value") }
    }

    /// A place's position in the form's order of extractable items (then by place).
    static func order(of place: String, in extractable: [Extract]) -> (Int, String) {
        let linkId = SurveyAnswers.split(place).linkId
        return (extractable.firstIndex { $0.item.linkId == linkId } ?? Int.max, place)
    }

    /// The Observation one extracted answer gives: the item's code, the category the form gives
    /// (else `survey`), the answer as its value, the response's subject, author, `authored` and
    /// `basedOn`, and `derivedFrom` the response.
    func extractedObservation(_ record: OutcomeRecord, extract: Extract, part: String, answer: Element, response: Element, issued: Date,
                              notes: inout [String]) -> Element? {
        let item = extract.item
        guard let value = observationValue(answer, item: item) else {
            notes.append("item '\(item.linkId)': a \(answer.typeName ?? "?") answer has no Observation value; not extracted")
            return nil
        }
        var o = identified("Observation", record, part: part)
        for basedOn in response.children(named: "basedOn") { o.append(basedOn) }
        o.append(Element(name: "status", type: "code", value: Self.status(record)))
        for var category in extract.categories {
            category.name = "category"
            o.append(category)
        }
        if extract.categories.isEmpty {
            o.append(Element(name: "category", type: "CodeableConcept", children: [Element.coding(ExportCoding(
                system: "http://terminology.hl7.org/CodeSystem/observation-category", code: "survey", display: nil))]))
        }
        var code = Element(name: "code", type: "CodeableConcept", children: extract.codes.map { c in
            var coding = c
            coding.name = "coding"
            coding.children.removeAll { $0.name == "extension" && $0.string("url") == Self.observationExtract }
            return coding
        })
        if let text = item.text { code.append(Element(name: "text", type: "string", value: text)) }
        o.append(code)
        if let subject = response["subject"] { o.append(subject) }
        if let authored = response.string("authored") {
            o.append(Element(name: "effective", type: "dateTime", value: authored))
            o.append(Element(name: "issued", type: "instant", value: FHIRDateTime.instant(issued)))
        }
        if var author = response["author"] {
            author.name = "performer"
            o.append(author)
        }
        o.append(value)
        o.append(Element.reference("derivedFrom", to: "urn:uuid:\(record.outcome.uuid.uuidString.lowercased())"))
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
