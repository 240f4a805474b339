/// What a mapping field's expression must give.
enum FieldType: String, Sendable {
    case string = "String"
    case boolean = "Boolean"
    case date = "a date or dateTime"
    case quantity = "Quantity"
    case timing = "a Timing, Period, dateTime or string"
    case humanName = "HumanName"
    case contactPoint = "ContactPoint"
    case address = "Address"
    case value = "a Quantity, string, boolean, integer, decimal or dateTime"
    case reference = "a Reference or a resource"
    case questionnaire = "a canonical or a Reference to a Questionnaire"
    case any = "anything"
}

/// The keys each block of a mapping file takes.
enum MappingSchema {
    static let topLevel: [String] = [
        "caregate-mapping", "resource", "description", "include", "extends", "known-modifiers", "tables", "patient", "skip", "end",
        "patient-fields", "care-plan", "tasks", "contacts", "outcomes", "export-as", "tests",
    ]

    /// What the app's records of this file's tasks are exported as.
    static let exportAs: [String] = ["resource", "medication-system"]
    static let exportResources: [String] = ["Observation", "MedicationAdministration"]

    static let patientFields: [String: FieldType] = [
        "id": .string, "given": .string, "family": .string, "birthday": .date, "sex": .string, "allergies": .string,
    ]

    static let carePlan: [String: FieldType] = ["id": .string, "title": .string]

    /// Keys every rule takes besides its fields.
    static let ruleKeys: Set<String> = ["name", "each", "skip", "end", "delegate"]

    static let task: [String: FieldType] = [
        "id": .string, "title": .string, "instructions": .string, "timing": .timing, "anchor": .date,
        "as-needed": .boolean, "impacts-adherence": .boolean, "group": .string, "targets": .quantity,
        "questionnaire": .questionnaire,
    ]
    static let taskLists: [String: FieldType] = ["tags": .string]
    /// Lookup keys of a task rule and the table each reads.
    static let taskLookups: [String: String] = ["healthkit": "healthkit", "code-table": "task-codes"]

    static let contact: [String: FieldType] = [
        "id": .string, "person-name": .humanName, "title": .string, "role": .string, "organization": .string,
        "category": .string, "telecom": .contactPoint, "address": .address,
    ]

    static let outcome: [String: FieldType] = ["task-group": .string, "date": .date]
    static let value: [String: FieldType] = ["value": .value, "kind": .string, "units": .string]

    static let condition: Set<String> = ["if", "reason", "delete"]
    static let test: Set<String> = ["input", "expect", "time-zone", "now"]
    static let tables: Set<String> = ["timing-codes", "event-times", "weekly-days", "healthkit", "units", "task-codes", "observation-codes", "ehr-rules"]

    static func fields(for kind: MappingRule.Kind) -> [String: FieldType] {
        switch kind {
        case .task: task
        case .contact: contact
        case .outcome: outcome
        case .value: value
        }
    }

    static func required(for kind: MappingRule.Kind) -> [String] {
        switch kind {
        case .task, .contact: ["id"]
        case .outcome: ["task-group", "date"]
        case .value: ["value"]
        }
    }
}
