import Foundation
import JSON

/// The version fields every CareKit entity carries. Each stored version is immutable: updates
/// append a new version whose `previousVersionUUIDs` name the versions it replaces.
public struct VersionInfo: Sendable, Hashable {
    /// The logical id, shared by all versions of one entity.
    public var id: String
    /// This version's id (immutable).
    public var uuid: UUID
    /// When this version starts to apply.
    public var effectiveDate: Date
    /// Set on a tombstone: the entity is deleted from this version on.
    public var deletedDate: Date?
    /// The versions this one replaces (the tips when it was written).
    public var previousVersionUUIDs: [UUID]
    /// The versions that replace this one (several means a conflict).
    public var nextVersionUUIDs: [UUID]
    /// When the entity was first created (set by the store).
    public var createdDate: Date?
    /// When this version was written (set by the store).
    public var updatedDate: Date?
    /// The CareKit schema version the version was written with.
    public var schemaVersion: SchemaVersion?
    /// A backend's id for this entity (CareGate: where it came from in the EHR).
    public var remoteID: String?
    /// A free-form note of where the version came from (CareKit's `source`).
    public var source: String?
    /// App-defined strings; CareGate keeps its own keys under `caregate.`.
    public var userInfo: [String: String]?
    /// The name of an image asset the app shows with the entity.
    public var asset: String?
    /// Notes attached to the entity.
    public var notes: [Note]?
    /// An app-defined group (CareGate: the kind of activity, matched to observation codes on
    /// export).
    public var groupIdentifier: String?
    /// App-defined tags a query can select by.
    public var tags: [String]?
    /// The time zone the entity was created in.
    public var timezone: TimeZone

    /// The fields of a first version: a new uuid (time-ordered), no predecessors.
    public init(id: String, uuid: UUID = .timeOrdered(), effectiveDate: Date, timezone: TimeZone = .current) {
        self.id = id
        self.uuid = uuid
        self.effectiveDate = effectiveDate
        self.previousVersionUUIDs = []
        self.nextVersionUUIDs = []
        self.timezone = timezone
    }
}

/// CareKit's semantic version of the store schema (`{majorVersion, minorVersion, patchNumber}`).
public struct SchemaVersion: Sendable, Hashable {
    /// The major part of the version number.
    public var majorVersion: Int
    /// The minor part of the version number.
    public var minorVersion: Int
    /// The patch part of the version number.
    public var patchNumber: Int

    /// A version number from its three parts.
    public init(majorVersion: Int, minorVersion: Int, patchNumber: Int) {
        self.majorVersion = majorVersion
        self.minorVersion = minorVersion
        self.patchNumber = patchNumber
    }

    /// The schema version CareKit 4.0 writes.
    public static let careKit4 = SchemaVersion(majorVersion: 4, minorVersion: 0, patchNumber: 0)
}

/// A note attached to an entity.
public struct Note: Sendable, Hashable {
    /// Who wrote the note.
    public var author: String?
    /// The note's title.
    public var title: String?
    /// The note's text.
    public var content: String?

    /// A note; each part is optional, as in CareKit.
    public init(author: String? = nil, title: String? = nil, content: String? = nil) {
        self.author = author
        self.title = title
        self.content = content
    }
}

/// A stored CareKit entity: patients, care plans, contacts, tasks and outcomes.
public protocol VersionedEntity: Sendable, Hashable {
    /// Which kind of entity (its name in CareKit's revision records).
    static var entityType: EntityType { get }
    /// The version fields (id, uuid, dates, links to other versions).
    var version: VersionInfo { get set }
}

extension VersionedEntity {
    /// The logical id, shared by all versions of the entity.
    public var id: String { get { version.id } set { version.id = newValue } }
    /// This version's uuid.
    public var uuid: UUID { get { version.uuid } set { version.uuid = newValue } }
    /// When this version starts to apply.
    public var effectiveDate: Date { get { version.effectiveDate } set { version.effectiveDate = newValue } }
    /// Set on a tombstone: the entity is deleted from this version on.
    public var deletedDate: Date? { get { version.deletedDate } set { version.deletedDate = newValue } }
    /// A backend's id for the entity (CareGate: where it came from in the EHR).
    public var remoteID: String? { get { version.remoteID } set { version.remoteID = newValue } }
    /// An app-defined group (for tasks, the kind of activity).
    public var groupIdentifier: String? { get { version.groupIdentifier } set { version.groupIdentifier = newValue } }
    /// App-defined tags a query can select by.
    public var tags: [String]? { get { version.tags } set { version.tags = newValue } }
    /// App-defined strings; CareGate keeps its own keys under `caregate.`.
    public var userInfo: [String: String]? { get { version.userInfo } set { version.userInfo = newValue } }
    /// The time zone the entity was created in.
    public var timezone: TimeZone { get { version.timezone } set { version.timezone = newValue } }
    /// Whether this version is a tombstone.
    public var isDeleted: Bool { version.deletedDate != nil }
}

/// The kinds of entity, named as in CareKit's revision records.
public enum EntityType: String, Sendable, CaseIterable, Codable {
    /// A patient, a care plan, a contact, a task, a task with a HealthKit linkage, an outcome.
    case patient, carePlan, contact, task, healthKitTask, outcome

    /// Parents before children: the order a device can apply.
    public var applyOrder: Int {
        switch self {
        case .patient: 0
        case .carePlan: 1
        case .contact, .task, .healthKitTask: 2
        case .outcome: 3
        }
    }
}

/// Parts of a person's name (Foundation's `PersonNameComponents`, as CareKit encodes it).
public struct PersonName: Sendable, Hashable {
    /// A prefix such as "Dr.".
    public var namePrefix: String?
    /// The given (first) name.
    public var givenName: String?
    /// A middle name.
    public var middleName: String?
    /// The family (last) name.
    public var familyName: String?
    /// A suffix such as "Jr.".
    public var nameSuffix: String?
    /// The name the person goes by.
    public var nickname: String?

    /// A name from its parts (as Foundation's `PersonNameComponents`).
    public init(namePrefix: String? = nil, givenName: String? = nil, middleName: String? = nil,
                familyName: String? = nil, nameSuffix: String? = nil, nickname: String? = nil) {
        self.namePrefix = namePrefix
        self.givenName = givenName
        self.middleName = middleName
        self.familyName = familyName
        self.nameSuffix = nameSuffix
        self.nickname = nickname
    }

    /// "Given Middle Family", for display.
    public var displayName: String {
        [namePrefix, givenName, middleName, familyName, nameSuffix].compactMap { $0 }.joined(separator: " ")
    }
}

/// The person the care plans are for (CareKit's `OCKPatient`).
public struct Patient: VersionedEntity {
    public static let entityType = EntityType.patient
    /// The version fields.
    public var version: VersionInfo
    /// The patient's name.
    public var name: PersonName
    /// `"male"`, `"female"`, or any other string.
    public var sex: String?
    /// The date of birth.
    public var birthday: Date?
    /// Allergies, as the app shows them.
    public var allergies: [String]?

    /// A first version of a patient.
    public init(id: String, name: PersonName, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.name = name
    }
}

/// A care plan: a titled group of tasks and contacts for a patient (CareKit's `OCKCarePlan`).
public struct CarePlan: VersionedEntity {
    public static let entityType = EntityType.carePlan
    /// The version fields.
    public var version: VersionInfo
    /// The plan's title, as the app shows it.
    public var title: String
    /// The patient version this plan belongs to.
    public var patientUUID: UUID?

    /// A first version of a care plan for the patient with `patientUUID`.
    public init(id: String, title: String, patientUUID: UUID?, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.title = title
        self.patientUUID = patientUUID
    }
}

/// A labelled value: a phone number, an email address.
public struct LabeledValue: Sendable, Hashable {
    /// What the value is (`work`, `mobile`).
    public var label: String
    /// The address or number.
    public var value: String

    /// A labeled value.
    public init(label: String, value: String) {
        self.label = label
        self.value = value
    }
}

/// A postal address in CareKit's shape (all eight fields present when the address is).
public struct PostalAddress: Sendable, Hashable {
    /// The street and number.
    public var street = ""
    /// The city.
    public var city = ""
    /// The state or province.
    public var state = ""
    /// The postal code.
    public var postalCode = ""
    /// The country's name.
    public var country = ""
    /// The ISO 3166 country code.
    public var isoCountryCode = ""
    /// The county or district.
    public var subAdministrativeArea = ""
    /// The neighbourhood.
    public var subLocality = ""

    /// An address; parts not given are empty, as in `CNPostalAddress`.
    public init(street: String = "", city: String = "", state: String = "", postalCode: String = "", country: String = "",
                isoCountryCode: String = "", subAdministrativeArea: String = "", subLocality: String = "") {
        self.street = street
        self.city = city
        self.state = state
        self.postalCode = postalCode
        self.country = country
        self.isoCountryCode = isoCountryCode
        self.subAdministrativeArea = subAdministrativeArea
        self.subLocality = subLocality
    }
}

/// Someone on the care team, or family and friends (CareKit's `OCKContact`).
public struct Contact: VersionedEntity {
    public static let entityType = EntityType.contact

    /// CareKit's two kinds of contact.
    public enum Category: String, Sendable, Hashable {
        /// A member of the care team, or someone close to the patient.
        case careProvider, friendsAndFamily
    }

    /// The version fields.
    public var version: VersionInfo
    /// The contact's name.
    public var name: PersonName
    /// The care plan the contact belongs to.
    public var carePlanUUID: UUID?
    /// The contact's postal address.
    public var address: PostalAddress?
    /// Email addresses.
    public var emailAddresses: [LabeledValue]?
    /// Numbers that take text messages.
    public var messagingNumbers: [LabeledValue]?
    /// Phone numbers.
    public var phoneNumbers: [LabeledValue]?
    /// Other ways to reach the contact.
    public var otherContactInfo: [LabeledValue]?
    /// The organization the contact works for.
    public var organization: String?
    /// A title such as "Endocrinologist".
    public var title: String?
    /// The contact's role in the patient's care.
    public var role: String?
    /// Care provider, or friends and family.
    public var category: Category?

    /// A first version of a contact in the care plan with `carePlanUUID`.
    public init(id: String, name: PersonName, carePlanUUID: UUID?, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.name = name
        self.carePlanUUID = carePlanUUID
    }
}

/// HealthKit data that completes a task automatically (CareKit's `OCKHealthKitLinkage`).
public struct HealthKitLinkage: Sendable, Hashable {
    /// How a HealthKit quantity's samples combine.
    public enum QuantityType: String, Sendable, Hashable {
        /// Samples add up over the day (steps).
        case cumulative
        /// Each sample stands alone (heart rate).
        case discrete
    }
    /// A HealthKit quantity type identifier (`HKQuantityTypeIdentifierStepCount`).
    public var quantityIdentifier: String
    /// Whether samples add up over a day (steps) or stand alone (heart rate).
    public var quantityType: QuantityType
    /// A HealthKit unit string (`count`, `kg`, `count/min`).
    public var unitString: String

    /// A linkage to a HealthKit quantity type.
    public init(quantityIdentifier: String, quantityType: QuantityType, unitString: String) {
        self.quantityIdentifier = quantityIdentifier
        self.quantityType = quantityType
        self.unitString = unitString
    }
}

/// Something the patient should do on a schedule (CareKit's `OCKTask`, or `OCKHealthKitTask`
/// when `healthKitLinkage` is set).
public struct CareTask: VersionedEntity {
    public static let entityType = EntityType.task
    /// The version fields.
    public var version: VersionInfo
    /// The task's title, as the app shows it.
    public var title: String?
    /// What to do, in words.
    public var instructions: String?
    /// Whether the task counts toward adherence (false for "as needed" tasks).
    public var impactsAdherence: Bool
    /// When the task is due.
    public var schedule: Schedule
    /// The care plan the task belongs to.
    public var carePlanUUID: UUID?
    /// The HealthKit data that completes the task, when it is a HealthKit task.
    public var healthKitLinkage: HealthKitLinkage?

    /// A first version of a task; it takes effect when its schedule starts unless `effectiveDate`
    /// says otherwise.
    public init(id: String, title: String?, carePlanUUID: UUID?, schedule: Schedule, impactsAdherence: Bool = true,
                effectiveDate: Date? = nil, timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate ?? schedule.startDate ?? Date(), timezone: timezone)
        self.title = title
        self.carePlanUUID = carePlanUUID
        self.schedule = schedule
        self.impactsAdherence = impactsAdherence
    }

    /// `task`, or `healthKitTask` when the task has a HealthKit linkage.
    public var recordType: EntityType { healthKitLinkage == nil ? .task : .healthKitTask }
}

/// What the patient did for one occurrence of a task (CareKit's `OCKOutcome`).
public struct Outcome: VersionedEntity {
    public static let entityType = EntityType.outcome
    /// The version fields.
    public var version: VersionInfo
    /// The task version the outcome belongs to.
    public var taskUUID: UUID
    /// The occurrence of that task version's schedule.
    public var taskOccurrenceIndex: Int
    /// What was recorded: one value per measurement, several for a panel such as blood pressure.
    public var values: [OutcomeValue]

    /// A first version of an outcome for occurrence `taskOccurrenceIndex` of the task version
    /// `taskUUID`.
    public init(taskUUID: UUID, taskOccurrenceIndex: Int, values: [OutcomeValue], effectiveDate: Date = Date(),
                id: String = UUID().uuidString, timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.taskUUID = taskUUID
        self.taskOccurrenceIndex = taskOccurrenceIndex
        self.values = values
    }
}

/// One recorded value of an outcome, or a target value of a schedule element.
public struct OutcomeValue: Sendable, Hashable {
    /// The value, in one of CareKit's six types.
    public enum Value: Sendable, Hashable {
        /// A whole number.
        case integer(Int)
        /// A measurement.
        case double(Double)
        /// Done or not, yes or no.
        case boolean(Bool)
        /// Text.
        case text(String)
        /// Bytes (an image, a file).
        case binary(Data)
        /// A date and time.
        case date(Date)

        /// CareKit's name for the type (`integer`, `double`, ...).
        public var typeName: String {
            switch self {
            case .integer: "integer"
            case .double: "double"
            case .boolean: "boolean"
            case .text: "text"
            case .binary: "binary"
            case .date: "date"
            }
        }

        /// The value as a number, for integers and doubles.
        public var numericValue: Double? {
            switch self {
            case .integer(let i): Double(i)
            case .double(let d): d
            default: nil
            }
        }
    }

    /// The value itself.
    public var value: Value
    /// What the value measures (`heartRate`, `systolic`): values of one outcome are matched by kind.
    public var kind: String?
    /// The unit of a measurement (`mmHg`, `kg`).
    public var units: String?
    /// When the value was recorded.
    public var createdDate: Date

    /// A value, with what it measures and its unit.
    public init(_ value: Value, kind: String? = nil, units: String? = nil, createdDate: Date = Date()) {
        self.value = value
        self.kind = kind
        self.units = units
        self.createdDate = createdDate
    }

    /// The value as people read it, with its kind and units: `systolic: 120 mmHg`, `yes`,
    /// `12 bytes`. `number` writes doubles (the CLI keeps their exact JSON form; pages round).
    public func text(number: (Double) -> String = { JSONValue.number($0).serialized() }, kindSeparator: String = ": ") -> String {
        var text: String = kind.map { (kind: String) -> String in kind + kindSeparator } ?? ""
        switch value {
        case .integer(let i): text += String(i)
        case .double(let d): text += number(d)
        case .boolean(let b): text += b ? "yes" : "no"
        case .text(let t): text += t
        case .binary(let data): text += "\(data.count) bytes"
        case .date(let date): text += ISO8601DateFormatter().string(from: date)
        }
        if let units { text += " " + units }
        return text
    }
}

/// Version 7 UUIDs for new versions.
extension UUID {
    /// A version 7 UUID: a millisecond timestamp, then random bits. New versions get these, so
    /// the store's uuid index grows at its end instead of at random places; to CareKit they are
    /// ordinary UUIDs.
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        var generator = SystemRandomNumberGenerator()
        let milliseconds = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        let random = (generator.next() as UInt64, generator.next() as UInt64)
        var bytes = [UInt8](repeating: 0, count: 16)
        for i in 0..<6 { bytes[i] = UInt8(truncatingIfNeeded: milliseconds >> (40 - 8 * UInt64(i))) }
        for i in 6..<16 { bytes[i] = UInt8(truncatingIfNeeded: (i < 11 ? random.0 : random.1) >> (8 * UInt64(i % 8))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x70   // version 7
        bytes[8] = (bytes[8] & 0x3F) | 0x80   // RFC 4122 variant
        return UUID(uuid: (bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
                           bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

extension Outcome {
    /// The outcome's name among every patient's: its patient's id (with `%` and `/` escaped)
    /// and its own id, joined by `/` (`/id` for an outcome of no patient). Devices choose outcome
    /// ids and ids are unique within a patient only, so this is what the gateway names an outcome
    /// by outside the store (the EHR identifier, the outbox): no id a device picks can name
    /// another patient's outcome.
    public static func scopedID(patientID: String?, outcomeID: String) -> String {
        var scoped = ""
        for character in patientID ?? "" {
            switch character {
            case "%": scoped += "%25"
            case "/": scoped += "%2F"
            default: scoped.append(character)
            }
        }
        return scoped + "/" + outcomeID
    }
}
