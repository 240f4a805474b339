import CareStore
import FHIR
import Foundation

/// A code the export writes: system, code, display, and the UCUM unit of its values.
public struct ExportCoding: Sendable, Hashable {
    /// The code system's URL.
    public var system: String
    /// The code.
    public var code: String
    /// The code's display text.
    public var display: String?
    /// The UCUM unit of its values.
    public var unit: String?

    /// A coding.
    public init(system: String, code: String, display: String? = nil, unit: String? = nil) {
        self.system = system
        self.code = code
        self.display = display
        self.unit = unit
    }
}

/// What a task's outcomes become (a ConceptMap-style entry keyed by the task's group code): the
/// Observation's code and category, and a code per outcome value kind for panels (components).
public struct ObservationCode: Sendable, Hashable {
    /// The Observation's code.
    public var code: ExportCoding
    /// An `observation-category` code (`vital-signs`, `activity`, `survey`...).
    public var category: String?
    /// Codes for the outcome's values by their `kind` (blood pressure's systolic and diastolic).
    public var components: [String: ExportCoding]

    /// An entry.
    public init(code: ExportCoding, category: String? = nil, components: [String: ExportCoding] = [:]) {
        self.code = code
        self.category = category
        self.components = components
    }
}

/// An outcome version with what the Observation needs from around it.
public struct OutcomeRecord: Sendable {
    /// The outcome version.
    public var outcome: Outcome
    /// The task version the outcome belongs to.
    public var task: CareTask
    /// The patient, for the subject's display.
    public var patient: Patient?
    /// The patient the store holds the outcome under (nil: of no patient): with the outcome's
    /// id, it makes the EHR identifier.
    public var patientID: String?
    /// True when earlier versions of the outcome exist (the Observation is `amended`).
    public var amended: Bool
    /// True when this version is a tombstone (the Observation is `entered-in-error`).
    public var deleted: Bool
    /// The identifier value the outcome's earlier versions were sent under, when it is not the
    /// one the gateway makes now (they were sent before identifiers named their patient).
    public var sentIdentifier: String?
    /// The enrolled device of the outcome's patient that pushed this version, when one did.
    public var device: Device?

    /// A record of an outcome version.
    public init(outcome: Outcome, task: CareTask, patient: Patient?, patientID: String?, amended: Bool, deleted: Bool) {
        self.outcome = outcome
        self.task = task
        self.patient = patient
        self.patientID = patientID
        self.amended = amended
        self.deleted = deleted
    }
}

/// Builds R4 Observations from store outcomes: code and category from the task (through the
/// `observation-codes` table), the value by its type, several values as components, `effective`
/// from the occurrence's window, the patient as subject and performer, `basedOn` the resource the
/// task came from, a status from the outcome's history, and a stable identifier (the gateway's
/// system, the outcome's id) that makes every push idempotent.
public struct ObservationBuilder: Sendable {
    /// The identifier system of outcomes the gateway sends: `urn:caregate:outcome`.
    public static let defaultIdentifierSystem = "urn:caregate:outcome"

    /// What each task group's outcomes become.
    public var codes: [String: ObservationCode]
    /// The system of the identifiers that make pushes idempotent.
    public var identifierSystem: String
    /// The zone dates are written in when an outcome has none.
    public var timeZone: TimeZone
    /// By the type of resource a task came from, what its outcomes become instead of
    /// Observations (`MedicationRequest` → MedicationAdministration), from the mapping files.
    public var targets: [String: ExportTarget]
    /// By HealthKit quantity type, the `codes` entry of a task linked to it that has no group of
    /// its own there (a device's `OCKHealthKitTask`): the import's HealthKit table read backwards.
    public var healthKitCodes: [String: String]

    /// The EHR's rules on what it takes (`SiteRule`), applied to what is built before it is sent.
    public var siteRules: [SiteRule] = []

    /// A builder over the observation-codes table.
    public init(codes: [String: ObservationCode], identifierSystem: String = ObservationBuilder.defaultIdentifierSystem, timeZone: TimeZone,
                targets: [String: ExportTarget] = [:], healthKit: [String: HealthKitLinkage] = [:]) {
        self.codes = codes
        self.identifierSystem = identifierSystem
        self.timeZone = timeZone
        self.targets = targets
        healthKitCodes = Self.codesByQuantityType(healthKit, codes: codes)
    }

    /// One code per HealthKit quantity type (the table may give two, as 41950-7 and 55423-8 for
    /// steps): of those `codes` has an entry for, the first in code order.
    static func codesByQuantityType(_ table: [String: HealthKitLinkage], codes: [String: ObservationCode]) -> [String: String] {
        var result: [String: String] = [:]
        for (key, linkage) in table {
            let code = String(key.split(separator: "|").last ?? "")
            guard codes[code] != nil else { continue }
            if let taken = result[linkage.quantityIdentifier], taken < code { continue }
            result[linkage.quantityIdentifier] = code
        }
        return result
    }

    /// The observation-codes key a task's outcomes are coded by: its group's, else its HealthKit
    /// quantity's.
    public func codeKey(of task: CareTask) -> String? {
        if let group = task.version.groupIdentifier, codes[group] != nil { return group }
        return task.healthKitLinkage.flatMap { healthKitCodes[$0.quantityIdentifier] }
    }

    /// The builder the mapping files describe: the shared observation-codes table and each
    /// file's `export-as`.
    public init(mappings: MappingSet, identifierSystem: String = ObservationBuilder.defaultIdentifierSystem, timeZone: TimeZone) {
        self.init(codes: mappings.sharedTables.observationCodes, identifierSystem: identifierSystem, timeZone: timeZone,
                  targets: mappings.exportTargets, healthKit: mappings.sharedTables.healthKit)
        siteRules = mappings.sharedTables.siteRules
    }

    /// What an outcome is exported as: a MedicationAdministration when the mapping of the
    /// resource its task came from says so, otherwise an Observation; and notes on what had to
    /// be approximated.
    public func resource(_ record: OutcomeRecord) -> (Element, [String]) {
        let sourceType = record.task.version.remoteID?.split(separator: "/").first.map(String.init)
        if let sourceType, let target = targets[sourceType], target.resource == "MedicationAdministration" {
            return medicationAdministration(record, medicationSystem: target.medicationSystem)
        }
        return observation(record)
    }

    /// A MedicationAdministration: the patient took (or, recorded `false`, did not take) a dose of
    /// the task's medication; the dose from a numeric value, `request` the MedicationRequest.
    public func medicationAdministration(_ record: OutcomeRecord, medicationSystem: String?) -> (Element, [String]) {
        var notes: [String] = []
        let outcome = record.outcome
        let task = record.task
        var a = identified("MedicationAdministration", record)
        let notTaken = outcome.values.contains { $0.value == .boolean(false) }
        a.append(Element(name: "status", type: "code", value: record.deleted ? "entered-in-error" : notTaken ? "not-done" : "completed"))
        if notTaken && !record.deleted {
            a.append(Element(name: "statusReason", type: "CodeableConcept", children: [
                Element(name: "text", type: "string", value: "Recorded as not taken by the patient"),
            ]))
        }
        var medication = Element(name: "medication", type: "CodeableConcept")
        if let system = medicationSystem, let code = task.version.groupIdentifier {
            medication.append(Element.coding(ExportCoding(system: system, code: code, display: task.title)))
        } else {
            notes.append(medicationSystem == nil ? "export-as names no medication-system: the medication is the task's title as text"
                                                 : "the task has no group code: the medication is its title as text")
        }
        medication.append(Element(name: "text", type: "string", value: task.title ?? task.id))
        a.append(medication)
        let patientReference = record.patient.map { $0.version.remoteID ?? $0.id }
        if let patientReference {
            a.append(Element.reference("subject", to: patientReference))
        } else {
            notes.append("the outcome's task has no patient: a MedicationAdministration needs a subject")
        }
        // When it was taken: when the patient recorded it, else the occurrence's window.
        if let recorded = outcome.values.compactMap(\.createdDate).min() {
            a.append(Element(name: "effective", type: "dateTime", value: dateTime(recorded)))
        } else if let event = task.schedule.event(occurrence: outcome.taskOccurrenceIndex) {
            a.append(Element(name: "effective", type: "Period", children: [
                Element(name: "start", type: "dateTime", value: dateTime(event.start)),
                Element(name: "end", type: "dateTime", value: dateTime(event.end)),
            ]))
        } else {
            a.append(Element(name: "effective", type: "dateTime", value: dateTime(outcome.effectiveDate)))
        }
        if let patientReference {
            a.append(Element(name: "performer", type: "MedicationAdministration.performer", children: [Element.reference("actor", to: patientReference)]))
        }
        if let source = task.version.remoteID, source.hasPrefix("MedicationRequest/") {
            a.append(Element.reference("request", to: source))
        }
        let amounts: [(Double, String?)] = outcome.values.compactMap { v in
            switch v.value {
            case .integer(let i): (Double(i), v.units)
            case .double(let d): (d, v.units)
            default: nil
            }
        }
        if let (amount, units) = amounts.first {
            let dose = Element(name: "dose", type: "Quantity", children: quantity(Self.decimalString(amount), units).children)
            a.append(Element(name: "dosage", type: "MedicationAdministration.dosage", children: [dose]))
            if amounts.count > 1 { notes.append("\(amounts.count) numeric values: the first is the dose") }
        }
        return (a, notes)
    }

    /// The identifier value of an outcome's resource: the outcome's id within its patient
    /// (`Outcome.scopedID`), stable across its versions, so an amended outcome updates the same
    /// resource, and made by the gateway: no outcome id a device picks names another patient's.
    /// An outcome already known to the EHR by another identifier keeps it (`sentIdentifier`).
    public func identifierValue(_ record: OutcomeRecord) -> String {
        record.sentIdentifier ?? Outcome.scopedID(patientID: record.patientID, outcomeID: record.outcome.id)
    }

    /// A new resource with the outcome's id and the gateway's stable identifier.
    /// `part` names one of several resources an outcome gives (an extracted item): the id and the
    /// identifier go on with it.
    func identified(_ type: String, _ record: OutcomeRecord, part: String? = nil) -> Element {
        var resource = Element(resourceType: type)
        resource.append(Element(name: "id", type: "id", value: ObservationBuilder.resourceID(record.outcome.id + (part.map { "-\($0)" } ?? ""))))
        resource.append(Element(name: "identifier", type: "Identifier", children: [
            Element(name: "system", type: "uri", value: identifierSystem),
            Element(name: "value", type: "string", value: identifierValue(record) + (part.map { "/\($0)" } ?? "")),
        ]))
        return resource
    }

    /// The status of a record's resource from the outcome's history: `first` for its first
    /// version (`final`, or a response's `completed`), `amended` after a change,
    /// `entered-in-error` once deleted.
    static func status(_ record: OutcomeRecord, first: String = "final") -> String {
        record.deleted ? "entered-in-error" : record.amended ? "amended" : first
    }

    /// The Observation, and notes on what had to be approximated.
    public func observation(_ record: OutcomeRecord) -> (Element, [String]) {
        var notes: [String] = []
        let outcome = record.outcome
        let task = record.task
        var o = identified("Observation", record)
        if let source = task.version.remoteID, source.contains("/") {
            o.append(Element.reference("basedOn", to: source))
        }
        o.append(Element(name: "status", type: "code", value: Self.status(record)))
        let entry = codeKey(of: task).flatMap { codes[$0] }
        if let category = entry?.category {
            o.append(Element(name: "category", type: "CodeableConcept", children: [Element.coding(ExportCoding(
                system: "http://terminology.hl7.org/CodeSystem/observation-category", code: category, display: nil))]))
        }
        if let entry {
            o.append(Element(name: "code", type: "CodeableConcept", children: [Element.coding(entry.code), Element(name: "text", type: "string", value: task.title ?? entry.code.display ?? entry.code.code)]))
        } else {
            notes.append("no observation-codes entry for the task's group \(task.version.groupIdentifier.map { "'\($0)'" } ?? "(none)"): the code is the task's title as text")
            o.append(Element(name: "code", type: "CodeableConcept", children: [Element(name: "text", type: "string", value: task.title ?? task.id)]))
        }
        let patientReference = record.patient.map { $0.version.remoteID ?? $0.id }
        if let patientReference { o.append(Element.reference("subject", to: patientReference)) }
        if let event = task.schedule.event(occurrence: outcome.taskOccurrenceIndex) {
            if event.end.timeIntervalSince(event.start) > 1 {
                o.append(Element(name: "effective", type: "Period", children: [
                    Element(name: "start", type: "dateTime", value: dateTime(event.start)),
                    Element(name: "end", type: "dateTime", value: dateTime(event.end)),
                ]))
            } else {
                o.append(Element(name: "effective", type: "dateTime", value: dateTime(event.start)))
            }
        } else {
            notes.append("the task has no occurrence \(outcome.taskOccurrenceIndex): no effective time")
        }
        o.append(Element(name: "issued", type: "instant", value: FHIRDateTime.instant(outcome.version.createdDate ?? outcome.effectiveDate)))
        if let patientReference { o.append(Element.reference("performer", to: patientReference)) }
        let values = outcome.values
        if values.count == 1, let value = value(values[0], unit: entry?.code.unit, notes: &notes) {
            o.append(value)
        } else if values.count > 1 {
            for v in values.sorted(by: { ($0.kind ?? "") < ($1.kind ?? "") }) {
                let componentCode = v.kind.flatMap { entry?.components[$0] }
                var component = Element(name: "component", type: "Observation.component")
                if let componentCode {
                    component.append(Element(name: "code", type: "CodeableConcept", children: [Element.coding(componentCode)]))
                } else {
                    notes.append("no component code for the value kind \(v.kind.map { "'\($0)'" } ?? "(none)"): its code is text")
                    component.append(Element(name: "code", type: "CodeableConcept", children: [Element(name: "text", type: "string", value: v.kind ?? "value")]))
                }
                if let value = value(v, unit: componentCode?.unit, notes: &notes) { component.append(value) }
                o.append(component)
            }
        } else if values.isEmpty {
            // Done, with nothing measured: a boolean says so.
            o.append(Element(name: "value", type: "boolean", value: "true"))
        }
        return (o, notes)
    }

    /// An id for the Observation from the outcome's id (FHIR ids allow 64 of A-Z a-z 0-9 - .).
    public static func resourceID(_ id: String) -> String {
        let allowed = id.map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") ? $0 : "-" }
        return String(String(allowed).prefix(64))
    }

    func dateTime(_ date: Date) -> String {
        FHIRDateTime.lexical(date, in: timeZone)
    }

    /// A value element by the outcome value's type: a Quantity with UCUM units, integer, boolean, string, dateTime.
    func value(_ v: OutcomeValue, unit: String?, notes: inout [String]) -> Element? {
        func decimal(_ d: Double) -> String {
            d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
        }
        switch v.value {
        case .integer(let i):
            if let units = unit ?? v.units { return quantity(decimal(Double(i)), units) }
            return Element(name: "value", type: "integer", value: String(i))
        case .double(let d):
            return quantity(decimal(d), unit ?? v.units)
        case .boolean(let b):
            return Element(name: "value", type: "boolean", value: b ? "true" : "false")
        case .text(let t):
            return Element(name: "value", type: "string", value: t)
        case .date(let d):
            return Element(name: "value", type: "dateTime", value: dateTime(d))
        case .binary:
            notes.append("a binary outcome value has no Observation value type; left out")
            return nil
        }
    }

    static func decimalString(_ d: Double) -> String {
        d == d.rounded() && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }

    /// A Quantity, with UCUM system and code when the unit is valid UCUM.
    func quantity(_ value: String, _ unit: String?) -> Element {
        var children = [Element(name: "value", type: "decimal", value: value)]
        if let unit {
            children.append(Element(name: "unit", type: "string", value: unit))
            if UCUMSyntax.isValid(unit) {
                children.append(Element(name: "system", type: "uri", value: "http://unitsofmeasure.org"))
                children.append(Element(name: "code", type: "code", value: unit))
            }
        }
        return Element(name: "value", type: "Quantity", children: children)
    }
}
