import CareStore
import FHIR
import Foundation
import JSON

/// One answer between its two forms: a CareKit outcome value, and the FHIR answer value
/// (`valueBoolean`, `valueCoding`...) its item's type calls for.
enum AnswerValue {
    /// The FHIR answer for `value`, typed by `item`; a value of another type, or a choice not
    /// among the item's options, is refused naming the item.
    static func element(_ value: OutcomeValue, for item: Questionnaire.Item, timeZone: TimeZone) throws(SurveyError) -> Element {
        let refuse = { (what: String) in SurveyError.answer(linkId: item.linkId, "a \(item.type.rawValue) item cannot take \(what)") }
        if case .double(let d) = value.value, !d.isFinite { throw .answer(linkId: item.linkId, "\(d) is not a number an answer can hold") }
        switch (item.type, value.value) {
        case (.boolean, .boolean(let b)): return primitive("boolean", b ? "true" : "false")
        case (.integer, .integer(let i)): return primitive("integer", String(i))
        case (.decimal, .integer(let i)): return primitive("decimal", String(i))
        case (.decimal, .double(let d)): return primitive("decimal", decimal(d))
        case (.quantity, .integer(let i)): return quantity(String(i), units: value.units, item: item)
        case (.quantity, .double(let d)): return quantity(decimal(d), units: value.units, item: item)
        case (.date, .date(let d)): return primitive("date", String(FHIRDateTime.lexical(d, in: timeZone).prefix(10)))
        case (.dateTime, .date(let d)): return primitive("dateTime", FHIRDateTime.lexical(d, in: timeZone))
        case (.time, .date(let d)): return primitive("time", String(FHIRDateTime.lexical(d, in: timeZone).dropFirst(11).prefix(8)))
        case (.date, .text(let s)), (.dateTime, .text(let s)), (.time, .text(let s)):
            guard PrimitiveKind(rawValue: item.type.rawValue)!.isValid(s) else { throw refuse("'\(s)'") }
            return primitive(item.type.rawValue, s)
        case (.string, .text(let s)), (.text, .text(let s)):
            if let limit = item.maxLength, s.count > limit {
                throw .answer(linkId: item.linkId, "the answer has \(s.count) characters, more than the item's maxLength of \(limit)")
            }
            return primitive("string", s)
        case (.url, .text(let s)): return primitive("uri", s)
        case (.reference, .text(let s)): return Element(name: "value", type: "Reference", children: [Element(name: "reference", type: "string", value: s)])
        case (.attachment, .binary(let data)):
            return Element(name: "value", type: "Attachment", children: [Element(name: "data", type: "base64Binary", value: data.base64EncodedString())])
        case (.choice, _), (.openChoice, _): return try choice(value.value, for: item)
        default: throw refuse("a \(value.value.typeName) value")
        }
    }

    /// A choice: an option's value, found by the Coding an app encodes as JSON text
    /// (ResearchKitOnFHIR's `{"code", "system", "display"}`), by a bare code, or by the option's
    /// own string or integer; free text for an open choice.
    static func choice(_ value: OutcomeValue.Value, for item: Questionnaire.Item) throws(SurveyError) -> Element {
        let coding: (system: String?, code: String, display: String?)?
        switch value {
        case .text(let text):
            if let json = try? JSONValue.parse(text), let code = json["code"]?.stringValue {
                coding = (json["system"]?.stringValue, code, json["display"]?.stringValue)
            } else if let option = item.options.first(where: { $0.typeName == "string" && $0.value == text }) {
                return option
            } else {
                coding = (nil, text, nil)
            }
        case .integer(let i):
            if let option = item.options.first(where: { $0.typeName == "integer" && $0.value == String(i) }) { return option }
            coding = nil
        default: coding = nil
        }
        guard let coding else { throw .answer(linkId: item.linkId, "a \(value.typeName) value is not one of the item's options") }
        let codings = item.options.filter { $0.typeName == "Coding" }
        if let option = codings.first(where: { $0.string("code") == coding.code && (coding.system == nil || $0.string("system") == coding.system) }) {
            // The Coding as the app gave it, with the option's system when it gave none and the
            // option's extensions (its ordinalValue: what a score adds up).
            return codingElement(system: coding.system ?? option.string("system"), code: coding.code, display: coding.display,
                                 extensions: option.children(named: "extension"))
        }
        if codings.isEmpty, item.options.isEmpty {  // the options are in a value set: the Coding as given
            return codingElement(system: coding.system, code: coding.code, display: coding.display, extensions: [])
        }
        if item.type == .openChoice, case .text(let text) = value { return primitive("string", text) }
        throw .answer(linkId: item.linkId, "'\(coding.system.map { "\($0)|" } ?? "")\(coding.code)' is not one of the item's options")
    }

    /// A response's Coding as the option it picks: with the option's extensions (its
    /// `ordinalValue`), as a Coding recorded one answer per value gets them, so that both shapes
    /// of answers score and read back alike. Any other value is kept as the response types it.
    static func asOption(_ value: Element, of item: Questionnaire.Item) -> Element {
        guard value.typeName == "Coding", let code = value.string("code") else { return value }
        let system = value.string("system")
        guard let option = item.options.first(where: { $0.typeName == "Coding" && $0.string("code") == code && (system == nil || $0.string("system") == system) }) else {
            return value
        }
        var picked = value
        let own = Set(value.children(named: "extension").compactMap { $0.string("url") })
        for ext in option.children(named: "extension").reversed() where !own.contains(ext.string("url") ?? "") { picked.children.insert(ext, at: 0) }
        if system == nil, let optionSystem = option.string("system") {
            picked.children.insert(Element(name: "system", type: "uri", value: optionSystem), at: picked.children.firstIndex { $0.name != "extension" } ?? picked.children.count)
        }
        return picked
    }

    /// The outcome value an app records for a FHIR answer: Codings as ResearchKitOnFHIR's JSON
    /// text, quantities as a double with their unit, dates as dates in `timeZone`.
    static func outcomeValue(_ answer: Element, kind: String, timeZone: TimeZone) -> OutcomeValue {
        let value = answer.value ?? ""
        switch answer.typeName {
        case "boolean": return OutcomeValue(.boolean(value == "true"), kind: kind)
        case "integer": return OutcomeValue(Int(value).map { .integer($0) } ?? .text(value), kind: kind)
        case "decimal": return OutcomeValue(Double(value).flatMap { $0.isFinite ? .double($0) : nil } ?? .text(value), kind: kind)
        case "date", "dateTime":
            return OutcomeValue(FHIRDateTime(value).map { .date($0.start(in: timeZone)) } ?? .text(value), kind: kind)
        case "Quantity":
            guard let number = answer.string("value").flatMap(Double.init), number.isFinite else {
                return OutcomeValue(.text(answer.string("value") ?? ""), kind: kind, units: answer.string("unit") ?? answer.string("code"))
            }
            return OutcomeValue(.double(number), kind: kind, units: answer.string("unit") ?? answer.string("code"))
        case "Coding":
            let fields = [("code", answer.string("code")), ("system", answer.string("system")), ("display", answer.string("display"))]
            return OutcomeValue(.text(JSONValue.object(fields.compactMap { key, text in text.map { (key, JSONValue.string($0)) } }).serialized()), kind: kind)
        case "Reference": return OutcomeValue(.text(answer.string("reference") ?? ""), kind: kind)
        case "Attachment": return OutcomeValue(.binary(Data(base64Encoded: answer.string("data") ?? "") ?? Data()), kind: kind)
        default: return OutcomeValue(.text(value), kind: kind)
        }
    }

    /// A `valueCoding`.
    static func codingElement(system: String?, code: String, display: String?, extensions: [Element]) -> Element {
        var element = Element(name: "value", type: "Coding")
        for ext in extensions { element.append(ext) }
        if let system { element.append(Element(name: "system", type: "uri", value: system)) }
        element.append(Element(name: "code", type: "code", value: code))
        if let display { element.append(Element(name: "display", type: "string", value: display)) }
        return element
    }

    /// A primitive answer value.
    static func primitive(_ type: String, _ value: String) -> Element {
        Element(name: "value", type: type, value: value)
    }

    /// A double as a FHIR decimal: whole numbers without a fraction (`63`, not `63.0`).
    static func decimal(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
    }

    /// A quantity, its unit from the item's `questionnaire-unit` Coding when it has one.
    static func quantity(_ number: String, units: String?, item: Questionnaire.Item) -> Element {
        var element = Element(name: "value", type: "Quantity", children: [Element(name: "value", type: "decimal", value: number)])
        let unit = item.element.children(named: "extension")
            .first { $0.string("url") == "http://hl7.org/fhir/StructureDefinition/questionnaire-unit" }?["value"]
        if let unit, unit.typeName == "Coding" {
            if let label = unit.string("display") ?? unit.string("code") { element.append(Element(name: "unit", type: "string", value: label)) }
            if let system = unit.string("system") { element.append(Element(name: "system", type: "uri", value: system)) }
            if let code = unit.string("code") { element.append(Element(name: "code", type: "code", value: code)) }
        } else if let units {
            element.append(Element(name: "unit", type: "string", value: units))
        }
        return element
    }
}
