import Diagnostics
import CareStore
import FHIRPath

/// A FHIRPath expression written in a mapping file, with its place there.
public struct MappingExpression: Sendable {
    /// The expression as written.
    public let text: String
    /// Where it is in the file.
    public let location: SourceLocation
    /// The compiled expression; nil when it does not parse (a diagnostic says where and why).
    public let compiled: FHIRPathExpression?
    let quoted: Bool

    /// The file position of a place inside the expression (line and column in its text; the
    /// first line of the text starts where the scalar does).
    func location(of place: SourceLocation) -> SourceLocation {
        if place.line > 1 { return SourceLocation(file: location.file, line: location.line + place.line - 1, column: place.column) }
        return SourceLocation(file: location.file, line: location.line, column: location.column + (quoted ? 1 : 0) + place.column - 1)
    }
}

/// `{if, reason}` (and `delete` in `end`): a rule that skips or ends what matches.
public struct MappingCondition: Sendable {
    /// What must hold for the rule to apply.
    public let test: MappingExpression
    /// Why, for the report.
    public let reason: String?
    /// For `end`: tombstone what was made instead of ending it.
    public let delete: Bool
    /// Where the rule is.
    public let location: SourceLocation
}

/// `{table, key}`: a value looked up in one of the file's tables.
public struct TableLookup: Sendable {
    /// The table's name.
    public let table: String
    /// The key, computed per item.
    public let key: MappingExpression
    /// Where the lookup is.
    public let location: SourceLocation
}

/// A task, contact or outcome rule: what each item of `each` becomes.
public struct MappingRule: Sendable {
    /// What a rule makes.
    public enum Kind: String, Sendable {
        /// A task, a contact, or an outcome.
        case task, contact, outcome
        /// One value of an outcome.
        case value = "outcome value"
    }

    /// What the rule makes.
    public let kind: Kind
    /// The rule's name, as reports and provenance name it.
    public var name: String
    /// Where the rule is.
    public var location: SourceLocation
    /// The items (default: the resource itself).
    public var each: MappingExpression?
    /// What skips an item.
    public var skip: [MappingCondition] = []
    /// What ends what an item made earlier.
    public var end: [MappingCondition] = []
    /// Map each item with the mapping file for its resource type, inside this care plan.
    public var delegate = false
    /// Expression fields by key (`id`, `title`, `timing`...).
    public var fields: [String: MappingExpression] = [:]
    /// List fields (`tags`).
    public var lists: [String: [MappingExpression]] = [:]
    /// Table lookups (`healthkit`).
    public var lookups: [String: TableLookup] = [:]
    /// An outcome's value rules.
    public var values: [MappingRule] = []
}

/// A golden test: an input file and the store entities it must produce, imported at a fixed
/// time in a fixed time zone (paths relative to the mapping file).
public struct GoldenTest: Sendable {
    /// The input file.
    public var input: String
    /// The expected snapshot.
    public var expect: String
    /// An IANA time zone (default UTC).
    public var timeZone: String
    /// The import time, ISO 8601 (default 2026-01-01T00:00:00Z).
    public var now: String
    /// Where the test is declared.
    public var location: SourceLocation
    /// The mapping file that declares the test: its paths are relative to it (a site file's
    /// tests to the site file, a base file's to the base).
    public var file: String
}

/// What the outcomes of a mapping file's tasks go back to the EHR as: Observations (the default,
/// coded through the observation-codes table) or, for medication tasks, MedicationAdministrations
/// whose medication is the task's group code in `medicationSystem`.
public struct ExportTarget: Sendable, Hashable {
    /// The resource type sent (`Observation`, `MedicationAdministration`).
    public var resource: String
    /// For MedicationAdministrations, the code system of the medication.
    public var medicationSystem: String?
    /// Where it is declared.
    public var location: SourceLocation

    /// A target.
    public init(resource: String, medicationSystem: String? = nil, location: SourceLocation) {
        self.resource = resource
        self.medicationSystem = medicationSystem
        self.location = location
    }
}

/// What a site says about tasks with a code: its own title, instructions, group, adherence.
public struct TaskCodeEntry: Sendable, Hashable {
    /// The task's title.
    public var title: String?
    /// The task's instructions.
    public var instructions: String?
    /// The task's group.
    public var group: String?
    /// Whether the task counts toward adherence.
    public var impactsAdherence: Bool?
}

/// The tables a mapping file defines or includes.
public struct MappingTables: Sendable {
    /// Timing codes, meal and sleep times and weekly days (the shipped defaults, overridden).
    public var timing: TimingTables = .standard
    /// `system|code` to a HealthKit quantity type.
    public var healthKit: [String: HealthKitLinkage] = [:]
    /// UCUM units to the label a CareKit app shows.
    public var units: [String: String] = [:]
    /// `system|code` to the site's words for a task with that code.
    public var taskCodes: [String: TaskCodeEntry] = [:]
    /// A task's group code to what its outcomes become when exported (an Observation's code,
    /// category and component codes).
    public var observationCodes: [String: ObservationCode] = [:]
    /// The EHR's rules on what it takes (`ehr-rules`), in the order they are declared.
    public var siteRules: [SiteRule] = []
    /// The profile targets what the mappings export must meet (`export-profiles:` in a file of
    /// shared tables): `caregate validate` exports what the golden tests import and checks it.
    public var exportProfiles: [ExportProfileClaim] = []
    /// Where each entry came from, for messages (`tables.event-times.ACM`).
    var origins: [String: SourceLocation] = [:]

    /// No tables beyond the shipped timing defaults.
    public init() {}

    /// Where a table's entry is declared (`origin(of: "29463-7", in: "observation-codes")`).
    public func origin(of key: String, in table: String) -> SourceLocation? { origins["\(table).\(key)"] }
}

/// A profile target a mapping folder names (`export-profiles: [us-core-6.1.0]`), with its place.
public struct ExportProfileClaim: Sendable, Hashable {
    /// The target's name, as `--profiles` takes it.
    public var name: String
    /// Where it is named.
    public var location: SourceLocation
}

/// One mapping file, with its includes and the file it extends applied.
public struct MappingFile: Sendable {
    /// The file's path (`builtin:` for a shipped file).
    public let path: String
    /// The FHIR resource type it maps.
    public var resource: String
    /// What the file is for, in words.
    public var description: String?
    /// The table files it includes.
    public var includes: [String] = []
    /// modifierExtension urls this mapping understands; any other stops the resource (FHIR
    /// requires that a modifier it does not know is not ignored).
    public var knownModifiers: [String] = []
    /// The file it builds on (`builtin:careplan.yaml`).
    public var extends: String?
    /// The patient the resource belongs to.
    public var patient: MappingExpression?
    /// What skips a resource.
    public var skip: [MappingCondition] = []
    /// What ends what a resource made earlier.
    public var end: [MappingCondition] = []
    /// The patient's fields.
    public var patientFields: [String: MappingExpression] = [:]
    /// The care plan's fields.
    public var carePlan: [String: MappingExpression] = [:]
    /// The task rules.
    public var tasks: [MappingRule] = []
    /// The contact rules.
    public var contacts: [MappingRule] = []
    /// The outcome rules.
    public var outcomes: [MappingRule] = []
    /// What this file's tasks' outcomes are exported as (nil: Observations).
    public var exportAs: ExportTarget?
    /// Its tables and those it includes.
    public var tables = MappingTables()
    /// Its golden tests.
    public var tests: [GoldenTest] = []
    /// Where the file's `resource` key is (for file-level messages).
    public var location: SourceLocation
    /// The file's name without its folder, as provenance records name a rule (`careplan.yaml#…`):
    /// made once, not for every entity mapped.
    public let fileName: String

    init(path: String, resource: String, location: SourceLocation) {
        self.path = path
        self.resource = resource
        self.location = location
        self.fileName = MappingSource.fileName(path)
    }

    /// Every rule, for checks that apply to all kinds.
    var allRules: [MappingRule] { tasks + contacts + outcomes }
}
