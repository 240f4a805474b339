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
    public var createdDate: Date?
    public var updatedDate: Date?
    public var schemaVersion: SchemaVersion?
    /// A backend's id for this entity (CareGate: where it came from in the EHR).
    public var remoteID: String?
    public var source: String?
    public var userInfo: [String: String]?
    public var asset: String?
    public var notes: [Note]?
    public var groupIdentifier: String?
    public var tags: [String]?
    /// The time zone the entity was created in.
    public var timezone: TimeZone

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
    public var majorVersion: Int
    public var minorVersion: Int
    public var patchNumber: Int

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
    public var author: String?
    public var title: String?
    public var content: String?

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
    var version: VersionInfo { get set }
}

extension VersionedEntity {
    public var id: String { get { version.id } set { version.id = newValue } }
    public var uuid: UUID { get { version.uuid } set { version.uuid = newValue } }
    public var effectiveDate: Date { get { version.effectiveDate } set { version.effectiveDate = newValue } }
    public var deletedDate: Date? { get { version.deletedDate } set { version.deletedDate = newValue } }
    public var remoteID: String? { get { version.remoteID } set { version.remoteID = newValue } }
    public var groupIdentifier: String? { get { version.groupIdentifier } set { version.groupIdentifier = newValue } }
    public var tags: [String]? { get { version.tags } set { version.tags = newValue } }
    public var userInfo: [String: String]? { get { version.userInfo } set { version.userInfo = newValue } }
    public var timezone: TimeZone { get { version.timezone } set { version.timezone = newValue } }
    /// Whether this version is a tombstone.
    public var isDeleted: Bool { version.deletedDate != nil }
}

/// The kinds of entity, named as in CareKit's revision records.
public enum EntityType: String, Sendable, CaseIterable, Codable {
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
    public var namePrefix: String?
    public var givenName: String?
    public var middleName: String?
    public var familyName: String?
    public var nameSuffix: String?
    public var nickname: String?

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
    public var version: VersionInfo
    public var name: PersonName
    /// `"male"`, `"female"`, or any other string.
    public var sex: String?
    public var birthday: Date?
    public var allergies: [String]?

    public init(id: String, name: PersonName, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.name = name
    }
}

/// A care plan: a titled group of tasks and contacts for a patient (CareKit's `OCKCarePlan`).
public struct CarePlan: VersionedEntity {
    public static let entityType = EntityType.carePlan
    public var version: VersionInfo
    public var title: String
    /// The patient version this plan belongs to.
    public var patientUUID: UUID?

    public init(id: String, title: String, patientUUID: UUID?, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.title = title
        self.patientUUID = patientUUID
    }
}

/// A labelled value: a phone number, an email address.
public struct LabeledValue: Sendable, Hashable {
    public var label: String
    public var value: String

    public init(label: String, value: String) {
        self.label = label
        self.value = value
    }
}

/// A postal address in CareKit's shape (all eight fields present when the address is).
public struct PostalAddress: Sendable, Hashable {
    public var street = ""
    public var city = ""
    public var state = ""
    public var postalCode = ""
    public var country = ""
    public var isoCountryCode = ""
    public var subAdministrativeArea = ""
    public var subLocality = ""

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
        case careProvider, friendsAndFamily
    }

    public var version: VersionInfo
    public var name: PersonName
    public var carePlanUUID: UUID?
    public var address: PostalAddress?
    public var emailAddresses: [LabeledValue]?
    public var messagingNumbers: [LabeledValue]?
    public var phoneNumbers: [LabeledValue]?
    public var otherContactInfo: [LabeledValue]?
    public var organization: String?
    public var title: String?
    public var role: String?
    public var category: Category?

    public init(id: String, name: PersonName, carePlanUUID: UUID?, effectiveDate: Date = Date(), timezone: TimeZone = .current) {
        self.version = VersionInfo(id: id, effectiveDate: effectiveDate, timezone: timezone)
        self.name = name
        self.carePlanUUID = carePlanUUID
    }
}

/// HealthKit data that completes a task automatically (CareKit's `OCKHealthKitLinkage`).
public struct HealthKitLinkage: Sendable, Hashable {
    public enum QuantityType: String, Sendable, Hashable { case cumulative, discrete }
    /// A HealthKit quantity type identifier (`HKQuantityTypeIdentifierStepCount`).
    public var quantityIdentifier: String
    public var quantityType: QuantityType
    /// A HealthKit unit string (`count`, `kg`, `count/min`).
    public var unitString: String

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
    public var version: VersionInfo
    public var title: String?
    public var instructions: String?
    /// Whether the task counts toward adherence (false for "as needed" tasks).
    public var impactsAdherence: Bool
    public var schedule: Schedule
    public var carePlanUUID: UUID?
    public var healthKitLinkage: HealthKitLinkage?

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
    public var version: VersionInfo
    /// The task version the outcome belongs to.
    public var taskUUID: UUID
    /// The occurrence of that task version's schedule.
    public var taskOccurrenceIndex: Int
    public var values: [OutcomeValue]

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
        case integer(Int)
        case double(Double)
        case boolean(Bool)
        case text(String)
        case binary(Data)
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

    public var value: Value
    /// What the value measures (`heartRate`, `systolic`): values of one outcome are matched by kind.
    public var kind: String?
    public var units: String?
    public var createdDate: Date

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
        let patient = (patientID ?? "").replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "/", with: "%2F")
        return patient + "/" + outcomeID
    }
}
