import JSON
import Foundation

/// Which CareKit release's JSON to write. 4.0 added a required `calendar` to schedule elements,
/// which 3.x apps cannot decode, so a writer must know its reader.
public enum CareKitVersion: Int, Sendable, CaseIterable {
    /// CareKit 3.x: schedule elements without `calendar`.
    case v3 = 3
    /// CareKit 4.0 and later.
    case v4 = 4
}

/// A CareKit JSON document that does not decode: which field, and why.
public struct CareKitJSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where: `task "metformin": schedule.elements[1].interval`.
    public var path: String
    /// Why it does not decode.
    public var message: String
    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// Any stored entity, for code that handles them together (revision records, the store).
public enum CareEntity: Sendable, Hashable {
    /// A patient (`OCKPatient`).
    case patient(Patient)
    /// A care plan (`OCKCarePlan`).
    case carePlan(CarePlan)
    /// A contact (`OCKContact`).
    case contact(Contact)
    /// A task (`OCKTask`, or `OCKHealthKitTask` with a HealthKit linkage).
    case task(CareTask)
    /// An outcome (`OCKOutcome`).
    case outcome(Outcome)

    /// The entity's version fields.
    public var version: VersionInfo {
        get {
            switch self {
            case .patient(let e): e.version
            case .carePlan(let e): e.version
            case .contact(let e): e.version
            case .task(let e): e.version
            case .outcome(let e): e.version
            }
        }
        set {
            switch self {
            case .patient(var e): e.version = newValue; self = .patient(e)
            case .carePlan(var e): e.version = newValue; self = .carePlan(e)
            case .contact(var e): e.version = newValue; self = .contact(e)
            case .task(var e): e.version = newValue; self = .task(e)
            case .outcome(var e): e.version = newValue; self = .outcome(e)
            }
        }
    }

    /// Runs `body` on the version fields without copying them out of the entity (bulk writes read
    /// several fields of every entity; `version` copies the whole struct each time).
    @inline(__always)
    func withVersion<R>(_ body: (borrowing VersionInfo) throws -> R) rethrows -> R {
        switch self {
        case .patient(let e): try body(e.version)
        case .carePlan(let e): try body(e.version)
        case .contact(let e): try body(e.version)
        case .task(let e): try body(e.version)
        case .outcome(let e): try body(e.version)
        }
    }

    /// The record type name (`task` or `healthKitTask` for tasks).
    public var entityType: EntityType {
        switch self {
        case .patient: .patient
        case .carePlan: .carePlan
        case .contact: .contact
        case .task(let t): t.recordType
        case .outcome: .outcome
        }
    }
}

/// CareKit's JSON: Swift's synthesized `Codable` shapes of CareKitStore's structs, exactly.
public enum CareKitJSON {
    // MARK: Encoding

    static let componentKeys: [(StaticString, Calendar.Component)] = [
        ("year", .year), ("month", .month), ("weekOfYear", .weekOfYear), ("day", .day),
        ("hour", .hour), ("minute", .minute), ("second", .second),
    ]

    /// An entity as CareKit JSON bytes (compact), written directly: the one place CareKit's
    /// shapes are encoded.
    public static func bytes(_ entity: CareEntity, version: CareKitVersion = .v4) -> [UInt8] {
        var w = JSONWriter(capacity: 768)
        write(entity, version: version, into: &w)
        return w.bytes
    }

    /// An entity as CareKit JSON.
    public static func encode(_ entity: CareEntity, version: CareKitVersion = .v4) -> JSONValue {
        // The writer's output is always valid JSON.
        try! JSONValue.parse(bytes(entity, version: version))
    }

    /// An outcome value in CareKit's JSON shape.
    public static func outcomeValueJSON(_ v: OutcomeValue) -> JSONValue {
        var w = JSONWriter()
        outcomeValue(v, into: &w)
        return try! JSONValue.parse(w.bytes)
    }

    /// A date as Foundation's JSONEncoder writes it by default: seconds since 2001-01-01.
    static func date(_ d: Date, into w: inout JSONWriter) { w.number(d.timeIntervalSinceReferenceDate) }

    static func timeZone(_ tz: TimeZone, into w: inout JSONWriter) {
        w.beginObject()
        w.key("identifier"); w.string(tz.identifier)
        w.endObject()
    }

    static func calendar(_ calendar: Calendar, into w: inout JSONWriter) {
        w.beginObject()
        w.key("identifier"); w.string("gregorian")
        w.key("timeZone"); timeZone(calendar.timeZone, into: &w)
        w.key("firstWeekday"); w.number(Double(calendar.firstWeekday))
        w.key("minimumDaysInFirstWeek"); w.number(Double(calendar.minimumDaysInFirstWeek))
        w.key("locale"); w.beginObject()
        w.key("identifier"); w.string(calendar.locale?.identifier ?? "")
        w.key("current"); w.number(0)
        w.endObject()
        w.key("current"); w.number(0)
        w.endObject()
    }

    static func components(_ c: DateComponents, into w: inout JSONWriter) {
        w.beginObject()
        for (key, component) in componentKeys {
            if let value = c.value(for: component), value != 0 { w.key(key); w.number(Double(value)) }
        }
        w.endObject()
    }

    static func outcomeValue(_ v: OutcomeValue, into w: inout JSONWriter) {
        w.beginObject()
        w.key("type"); w.string(v.value.typeName)
        w.key("value")
        switch v.value {
        case .integer(let i): w.number(Double(i))
        case .double(let d): w.number(d)
        case .boolean(let b): w.bool(b)
        case .text(let t): w.string(t)
        case .binary(let data): w.string(data.base64EncodedString())
        case .date(let d): date(d, into: &w)
        }
        if let kind = v.kind { w.key("kind"); w.string(kind) }
        if let units = v.units { w.key("units"); w.string(units) }
        w.key("createdDate"); date(v.createdDate, into: &w)
        w.endObject()
    }

    static func element(_ e: ScheduleElement, version: CareKitVersion, into w: inout JSONWriter) {
        w.beginObject()
        w.key("start"); date(e.start, into: &w)
        if let end = e.end { w.key("end"); date(end, into: &w) }
        w.key("interval"); components(e.interval, into: &w)
        if let text = e.text { w.key("text"); w.string(text) }
        w.key("duration"); w.beginObject()
        switch e.duration {
        case .allDay: w.key("isAllDay"); w.bool(true)
        case .seconds(let seconds): w.key("isAllDay"); w.bool(false); w.key("seconds"); w.number(seconds)
        }
        w.endObject()
        w.key("targetValues"); w.beginArray()
        for t in e.targetValues { outcomeValue(t, into: &w) }
        w.endArray()
        if version == .v4 { w.key("calendar"); calendar(e.calendar, into: &w) }
        w.endObject()
    }

    static func name(_ n: PersonName, into w: inout JSONWriter) {
        w.beginObject()
        for (key, value): (StaticString, String?) in [("namePrefix", n.namePrefix), ("givenName", n.givenName), ("middleName", n.middleName),
                             ("familyName", n.familyName), ("nameSuffix", n.nameSuffix), ("nickname", n.nickname)] {
            if let value { w.key(key); w.string(value) }
        }
        w.endObject()
    }

    static func labeled(_ values: [LabeledValue], into w: inout JSONWriter) {
        w.beginArray()
        for v in values {
            w.beginObject()
            w.key("label"); w.string(v.label)
            w.key("value"); w.string(v.value)
            w.endObject()
        }
        w.endArray()
    }

    static func uuids(_ list: [UUID], into w: inout JSONWriter) {
        w.beginArray()
        for u in list { w.uuid(u) }
        w.endArray()
    }

    /// The version fields every entity has, in CareKit's key names.
    static func versionMembers(_ v: VersionInfo, into w: inout JSONWriter) {
        w.key("id"); w.string(v.id)
        w.key("uuid"); w.uuid(v.uuid)
        w.key("effectiveDate"); date(v.effectiveDate, into: &w)
        if let d = v.deletedDate { w.key("deletedDate"); date(d, into: &w) }
        w.key("previousVersionUUIDs"); uuids(v.previousVersionUUIDs, into: &w)
        w.key("nextVersionUUIDs"); uuids(v.nextVersionUUIDs, into: &w)
        if let d = v.createdDate { w.key("createdDate"); date(d, into: &w) }
        if let d = v.updatedDate { w.key("updatedDate"); date(d, into: &w) }
        if let s = v.schemaVersion {
            w.key("schemaVersion"); w.beginObject()
            w.key("majorVersion"); w.number(Double(s.majorVersion))
            w.key("minorVersion"); w.number(Double(s.minorVersion))
            w.key("patchNumber"); w.number(Double(s.patchNumber))
            w.endObject()
        }
        if let r = v.remoteID { w.key("remoteID"); w.string(r) }
        if let s = v.source { w.key("source"); w.string(s) }
        if let u = v.userInfo {
            w.key("userInfo"); w.beginObject()
            for (k, value) in u.sorted(by: { $0.key < $1.key }) { w.key(dynamic: k); w.string(value) }
            w.endObject()
        }
        if let a = v.asset { w.key("asset"); w.string(a) }
        if let notes = v.notes {
            w.key("notes"); w.beginArray()
            for n in notes {
                w.beginObject()
                if let author = n.author { w.key("author"); w.string(author) }
                if let title = n.title { w.key("title"); w.string(title) }
                if let content = n.content { w.key("content"); w.string(content) }
                w.endObject()
            }
            w.endArray()
        }
        if let g = v.groupIdentifier { w.key("groupIdentifier"); w.string(g) }
        if let t = v.tags {
            w.key("tags"); w.beginArray()
            for tag in t { w.string(tag) }
            w.endArray()
        }
        w.key("timezone"); timeZone(v.timezone, into: &w)
    }

    static func write(_ entity: CareEntity, version: CareKitVersion, into w: inout JSONWriter) {
        w.beginObject()
        entity.withVersion { versionMembers($0, into: &w) }
        switch entity {
        case .patient(let p):
            w.key("name"); name(p.name, into: &w)
            if let sex = p.sex { w.key("sex"); w.string(sex) }
            if let b = p.birthday { w.key("birthday"); date(b, into: &w) }
            if let a = p.allergies {
                w.key("allergies"); w.beginArray()
                for allergy in a { w.string(allergy) }
                w.endArray()
            }
        case .carePlan(let c):
            w.key("title"); w.string(c.title)
            if let p = c.patientUUID { w.key("patientUUID"); w.uuid(p) }
        case .contact(let c):
            w.key("name"); name(c.name, into: &w)
            if let p = c.carePlanUUID { w.key("carePlanUUID"); w.uuid(p) }
            if let a = c.address {
                w.key("address"); w.beginObject()
                for (key, value): (StaticString, String) in [("street", a.street), ("city", a.city), ("state", a.state), ("postalCode", a.postalCode),
                                     ("country", a.country), ("isoCountryCode", a.isoCountryCode),
                                     ("subAdministrativeArea", a.subAdministrativeArea), ("subLocality", a.subLocality)] {
                    w.key(key); w.string(value)
                }
                w.endObject()
            }
            if let v = c.emailAddresses { w.key("emailAddresses"); labeled(v, into: &w) }
            if let v = c.messagingNumbers { w.key("messagingNumbers"); labeled(v, into: &w) }
            if let v = c.phoneNumbers { w.key("phoneNumbers"); labeled(v, into: &w) }
            if let v = c.otherContactInfo { w.key("otherContactInfo"); labeled(v, into: &w) }
            if let o = c.organization { w.key("organization"); w.string(o) }
            if let t = c.title { w.key("title"); w.string(t) }
            if let r = c.role { w.key("role"); w.string(r) }
            if let k = c.category { w.key("category"); w.string(k.rawValue) }
        case .task(let t):
            if let title = t.title { w.key("title"); w.string(title) }
            if let i = t.instructions { w.key("instructions"); w.string(i) }
            w.key("impactsAdherence"); w.bool(t.impactsAdherence)
            w.key("schedule"); w.beginObject()
            w.key("elements"); w.beginArray()
            for e in t.schedule.elements { element(e, version: version, into: &w) }
            w.endArray()
            w.endObject()
            if let p = t.carePlanUUID { w.key("carePlanUUID"); w.uuid(p) }
            if let l = t.healthKitLinkage {
                w.key("healthKitLinkage"); w.beginObject()
                w.key("quantityIdentifier"); w.string(l.quantityIdentifier)
                w.key("quantityType"); w.string(l.quantityType.rawValue)
                w.key("unitString"); w.string(l.unitString)
                w.endObject()
            }
        case .outcome(let o):
            w.key("taskUUID"); w.uuid(o.taskUUID)
            w.key("taskOccurrenceIndex"); w.number(Double(o.taskOccurrenceIndex))
            w.key("values"); w.beginArray()
            for v in o.values { outcomeValue(v, into: &w) }
            w.endArray()
        }
        w.endObject()
    }

    // MARK: Decoding

    /// Decodes an entity of a record type (`task`, `healthKitTask`, `outcome`...). JSON without
    /// schedule calendars (CareKit 3.x) is read with a gregorian calendar in the task's time zone;
    /// dates may be reference-date numbers or ISO 8601 strings; UUIDs may be lowercase.
    /// Whether a task's stored JSON has a `healthKitLinkage` member (CareKit's HealthKit tasks).
    /// Stored JSON is the store's own compact CareKit JSON, so a member's key is followed by its
    /// colon at once, and a text value "healthKitLinkage" is not taken for the key. Quotes are
    /// found with `memchr`, then compared: every device push checks the task of each outcome it
    /// carries, and Foundation's generic `firstRange(of:)` took a tenth of a push.
    public static func mentionsHealthKitLinkage(_ json: some ContiguousBytes) -> Bool {
        json.withUnsafeBytes { text in
            healthKitLinkageKey.withUnsafeBytes { key in
                guard let start = text.baseAddress, let keyStart = key.baseAddress else { return false }
                var offset = 0
                while text.count - offset >= key.count {
                    guard let quote = memchr(start + offset, 0x22, text.count - offset - key.count + 1) else { return false }
                    if memcmp(quote, keyStart, key.count) == 0 { return true }
                    offset = start.distance(to: UnsafeRawPointer(quote)) + 1
                }
                return false
            }
        }
    }
    private static let healthKitLinkageKey = Array("\"healthKitLinkage\":".utf8)

    /// A version as a store keeps it: its kind's name (`task` for HealthKit tasks too, told
    /// apart by their `healthKitLinkage`) and its CareKit JSON.
    public static func decode(storedKind kind: String, value: JSONValue) throws(CareKitJSONError) -> CareEntity {
        let type: EntityType = kind == "task" ? (value["healthKitLinkage"] != nil ? .healthKitTask : .task) : EntityType(rawValue: kind) ?? .task
        return try decode(type, from: value)
    }

    /// Decodes one entity of `type` from its CareKit JSON object; `path` prefixes the place an
    /// error names.
    public static func decode(_ type: EntityType, from json: JSONValue, path: String = "") throws(CareKitJSONError) -> CareEntity {
        let id = json["id"]?.stringValue.map { " \"\($0)\"" } ?? ""
        let f = try Fields(json, path: path.isEmpty ? "\(type.rawValue)\(id)" : path)
        let v = try f.versionInfo()
        switch type {
        case .patient:
            var p = Patient(id: v.id, name: try f.name("name"))
            p.version = v
            p.sex = try f.optionalString("sex")
            p.birthday = try f.optionalDate("birthday")
            p.allergies = try f.optionalStrings("allergies")
            return .patient(p)
        case .carePlan:
            var c = CarePlan(id: v.id, title: try f.string("title"), patientUUID: try f.optionalUUID("patientUUID"))
            c.version = v
            return .carePlan(c)
        case .contact:
            var c = Contact(id: v.id, name: try f.name("name"), carePlanUUID: try f.optionalUUID("carePlanUUID"))
            c.version = v
            if let a = try f.optionalObject("address") {
                c.address = PostalAddress(street: try a.string("street"), city: try a.string("city"), state: try a.string("state"),
                                          postalCode: try a.string("postalCode"), country: try a.string("country"),
                                          isoCountryCode: try a.string("isoCountryCode"),
                                          subAdministrativeArea: try a.string("subAdministrativeArea"), subLocality: try a.string("subLocality"))
            }
            c.emailAddresses = try f.optionalLabeled("emailAddresses")
            c.messagingNumbers = try f.optionalLabeled("messagingNumbers")
            c.phoneNumbers = try f.optionalLabeled("phoneNumbers")
            c.otherContactInfo = try f.optionalLabeled("otherContactInfo")
            c.organization = try f.optionalString("organization")
            c.title = try f.optionalString("title")
            c.role = try f.optionalString("role")
            if let category = try f.optionalString("category") {
                guard let k = Contact.Category(rawValue: category) else {
                    throw f.error("category", "expected careProvider or friendsAndFamily, found \"\(category)\"")
                }
                c.category = k
            }
            return .contact(c)
        case .task, .healthKitTask:
            let scheduleFields = try f.object("schedule")
            var elements: [ScheduleElement] = []
            for (i, e) in try scheduleFields.objects("elements").enumerated() {
                elements.append(try e.scheduleElement(defaultTimeZone: v.timezone, index: i))
            }
            let schedule: Schedule
            do { schedule = try Schedule(elements: elements) } catch { throw f.error("schedule", error.description) }
            var t = CareTask(id: v.id, title: try f.optionalString("title"), carePlanUUID: try f.optionalUUID("carePlanUUID"),
                             schedule: schedule, impactsAdherence: try f.optionalBool("impactsAdherence") ?? true)
            t.version = v
            t.instructions = try f.optionalString("instructions")
            if let l = try f.optionalObject("healthKitLinkage") {
                let kind = try l.string("quantityType")
                guard let quantityType = HealthKitLinkage.QuantityType(rawValue: kind) else {
                    throw l.error("quantityType", "expected cumulative or discrete, found \"\(kind)\"")
                }
                t.healthKitLinkage = HealthKitLinkage(quantityIdentifier: try l.string("quantityIdentifier"), quantityType: quantityType,
                                                      unitString: try l.string("unitString"))
            } else if type == .healthKitTask {
                throw f.error("healthKitLinkage", "a healthKitTask needs a healthKitLinkage")
            }
            return .task(t)
        case .outcome:
            var values: [OutcomeValue] = []
            for (i, value) in try f.objects("values").enumerated() { values.append(try value.outcomeValue(index: i)) }
            var o = Outcome(taskUUID: try f.uuid("taskUUID"), taskOccurrenceIndex: try f.int("taskOccurrenceIndex"), values: values)
            o.version = v
            return .outcome(o)
        }
    }

    /// Reads a date written as reference-date seconds or as an ISO 8601 string.
    static func parseDate(_ value: JSONValue) -> Date? {
        if let n = value.numberValue { return abs(n) <= ScheduleElement.longestSpan ? Date(timeIntervalSinceReferenceDate: n) : nil }
        guard let s = value.stringValue else { return nil }
        return ISO8601.parse(s)
    }
}

/// ISO 8601 dates as CareKit readers accept them (with or without fractional seconds).
enum ISO8601 {
    static func parse(_ s: String) -> Date? {
        let plain = ISO8601DateFormatter()
        if let d = plain.date(from: s) { return d }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return fractional.date(from: s)
    }
}

/// Field access with paths for errors.
struct Fields {
    let members: [String: JSONValue]
    let path: String

    init(_ json: JSONValue, path: String) throws(CareKitJSONError) {
        guard case .object(let list) = json else { throw CareKitJSONError(path: path, message: "expected an object") }
        members = Dictionary(list, uniquingKeysWith: { a, _ in a })
        self.path = path
    }

    func error(_ key: String, _ message: String) -> CareKitJSONError {
        CareKitJSONError(path: path.isEmpty ? key : "\(path).\(key)", message: message)
    }

    func present(_ key: String) -> JSONValue? {
        guard let v = members[key], !v.isNull else { return nil }
        return v
    }

    func required(_ key: String) throws(CareKitJSONError) -> JSONValue {
        guard let v = present(key) else { throw error(key, "missing (required)") }
        return v
    }

    func string(_ key: String) throws(CareKitJSONError) -> String {
        let v = try required(key)
        guard let s = v.stringValue else { throw error(key, "expected a string") }
        return s
    }

    func optionalString(_ key: String) throws(CareKitJSONError) -> String? {
        guard let v = present(key) else { return nil }
        guard let s = v.stringValue else { throw error(key, "expected a string") }
        return s
    }

    func optionalStrings(_ key: String) throws(CareKitJSONError) -> [String]? {
        guard let v = present(key) else { return nil }
        guard let a = v.arrayValue else { throw error(key, "expected an array of strings") }
        var out: [String] = []
        for item in a {
            guard let s = item.stringValue else { throw error(key, "expected an array of strings") }
            out.append(s)
        }
        return out
    }

    func optionalBool(_ key: String) throws(CareKitJSONError) -> Bool? {
        guard let v = present(key) else { return nil }
        guard let b = v.boolValue else { throw error(key, "expected true or false") }
        return b
    }

    func int(_ key: String) throws(CareKitJSONError) -> Int {
        let v = try required(key)
        guard let n = v.numberValue, n == n.rounded(), abs(n) < 9e15 else { throw error(key, "expected an integer") }
        return Int(n)
    }

    func optionalInt(_ key: String) throws(CareKitJSONError) -> Int? {
        present(key) == nil ? nil : try int(key)
    }

    func number(_ key: String) throws(CareKitJSONError) -> Double {
        guard let n = try required(key).numberValue else { throw error(key, "expected a number") }
        return n
    }

    func date(_ key: String) throws(CareKitJSONError) -> Date {
        guard let d = CareKitJSON.parseDate(try required(key)) else {
            throw error(key, "expected a date (seconds since 2001-01-01 within 10,000 years, or an ISO 8601 string)")
        }
        return d
    }

    func optionalDate(_ key: String) throws(CareKitJSONError) -> Date? {
        present(key) == nil ? nil : try date(key)
    }

    func uuid(_ key: String) throws(CareKitJSONError) -> UUID {
        let s = try string(key)
        guard let u = UUID(uuidString: s.uppercased()) else { throw error(key, "expected a UUID, found \"\(s)\"") }
        return u
    }

    func optionalUUID(_ key: String) throws(CareKitJSONError) -> UUID? {
        present(key) == nil ? nil : try uuid(key)
    }

    func uuids(_ key: String) throws(CareKitJSONError) -> [UUID] {
        guard let v = present(key) else { return [] }
        guard let a = v.arrayValue else { throw error(key, "expected an array of UUIDs") }
        var out: [UUID] = []
        for (i, item) in a.enumerated() {
            guard let s = item.stringValue, let u = UUID(uuidString: s.uppercased()) else { throw error("\(key)[\(i)]", "expected a UUID") }
            out.append(u)
        }
        return out
    }

    func object(_ key: String) throws(CareKitJSONError) -> Fields {
        try Fields(try required(key), path: path.isEmpty ? key : "\(path).\(key)")
    }

    func optionalObject(_ key: String) throws(CareKitJSONError) -> Fields? {
        present(key) == nil ? nil : try object(key)
    }

    func objects(_ key: String) throws(CareKitJSONError) -> [Fields] {
        guard let a = try required(key).arrayValue else { throw error(key, "expected an array") }
        var out: [Fields] = []
        for (i, item) in a.enumerated() { out.append(try Fields(item, path: "\(path.isEmpty ? "" : path + ".")\(key)[\(i)]")) }
        return out
    }

    func timeZone(_ key: String) throws(CareKitJSONError) -> TimeZone? {
        guard let o = try optionalObject(key) else { return nil }
        let identifier = try o.string("identifier")
        guard let tz = KnownTimeZones.shared.zone(identifier) else { throw o.error("identifier", "unknown time zone \"\(identifier)\"") }
        return tz
    }

    func name(_ key: String) throws(CareKitJSONError) -> PersonName {
        let o = try object(key)
        return PersonName(namePrefix: try o.optionalString("namePrefix"), givenName: try o.optionalString("givenName"),
                          middleName: try o.optionalString("middleName"), familyName: try o.optionalString("familyName"),
                          nameSuffix: try o.optionalString("nameSuffix"), nickname: try o.optionalString("nickname"))
    }

    func optionalLabeled(_ key: String) throws(CareKitJSONError) -> [LabeledValue]? {
        guard present(key) != nil else { return nil }
        var out: [LabeledValue] = []
        for item in try objects(key) { out.append(LabeledValue(label: try item.string("label"), value: try item.string("value"))) }
        return out
    }

    func versionInfo() throws(CareKitJSONError) -> VersionInfo {
        var v = VersionInfo(id: try string("id"), uuid: try uuid("uuid"), effectiveDate: try date("effectiveDate"),
                            timezone: try timeZone("timezone") ?? TimeZone(identifier: "UTC")!)
        if present("timezone") == nil { throw error("timezone", "missing (required)") }
        v.deletedDate = try optionalDate("deletedDate")
        v.previousVersionUUIDs = try uuids("previousVersionUUIDs")
        v.nextVersionUUIDs = try uuids("nextVersionUUIDs")
        v.createdDate = try optionalDate("createdDate")
        v.updatedDate = try optionalDate("updatedDate")
        if let s = try optionalObject("schemaVersion") {
            v.schemaVersion = SchemaVersion(majorVersion: try s.int("majorVersion"), minorVersion: try s.int("minorVersion"),
                                            patchNumber: try s.int("patchNumber"))
        }
        v.remoteID = try optionalString("remoteID")
        v.source = try optionalString("source")
        if let info = present("userInfo") {
            guard case .object(let list) = info else { throw error("userInfo", "expected an object of strings") }
            var dict: [String: String] = [:]
            for (k, value) in list {
                guard let s = value.stringValue else { throw error("userInfo.\(k)", "expected a string") }
                dict[k] = s
            }
            v.userInfo = dict
        }
        v.asset = try optionalString("asset")
        if present("notes") != nil {
            var notes: [Note] = []
            for n in try objects("notes") {
                notes.append(Note(author: try n.optionalString("author"), title: try n.optionalString("title"), content: try n.optionalString("content")))
            }
            v.notes = notes
        }
        v.groupIdentifier = try optionalString("groupIdentifier")
        v.tags = try optionalStrings("tags")
        return v
    }

    func scheduleElement(defaultTimeZone: TimeZone, index: Int) throws(CareKitJSONError) -> ScheduleElement {
        var calendar = Schedule.calendar(defaultTimeZone)
        if let c = try optionalObject("calendar") {
            let identifier = try c.optionalString("identifier") ?? "gregorian"
            guard identifier == "gregorian" else { throw c.error("identifier", "only the gregorian calendar is supported, found \"\(identifier)\"") }
            if let tz = try c.timeZone("timeZone") { calendar.timeZone = tz }
            if let first = try c.optionalInt("firstWeekday") { calendar.firstWeekday = first }
            if let minimum = try c.optionalInt("minimumDaysInFirstWeek") { calendar.minimumDaysInFirstWeek = minimum }
        }
        let intervalFields = try object("interval")
        var interval = DateComponents()
        for (key, component) in CareKitJSON.componentKeys {
            if let value = try intervalFields.optionalInt(key.description), value != 0 { interval.setValue(value, for: component) }
        }
        let durationFields = try object("duration")
        let duration: ScheduleElement.Duration
        if try durationFields.optionalBool("isAllDay") == true {
            duration = .allDay
        } else {
            duration = .seconds(try durationFields.present("seconds") == nil ? 3600 : durationFields.number("seconds"))
        }
        var targets: [OutcomeValue] = []
        if present("targetValues") != nil {
            for (i, t) in try objects("targetValues").enumerated() { targets.append(try t.outcomeValue(index: i)) }
        }
        return ScheduleElement(start: try date("start"), end: try optionalDate("end"), interval: interval,
                               text: try optionalString("text"), duration: duration, targetValues: targets, calendar: calendar)
    }

    func outcomeValue(index: Int) throws(CareKitJSONError) -> OutcomeValue {
        let type = try string("type")
        let value: OutcomeValue.Value
        switch type {
        case "integer": value = .integer(try int("value"))
        case "double": value = .double(try number("value"))
        case "boolean":
            guard let b = try required("value").boolValue else { throw error("value", "expected true or false") }
            value = .boolean(b)
        case "text": value = .text(try string("value"))
        case "binary":
            guard let data = Data(base64Encoded: try string("value")) else { throw error("value", "expected base64 data") }
            value = .binary(data)
        case "date": value = .date(try date("value"))
        default: throw error("type", "expected integer, double, boolean, text, binary or date, found \"\(type)\"")
        }
        return OutcomeValue(value, kind: try optionalString("kind"), units: try optionalString("units"), createdDate: try date("createdDate"))
    }
}

/// Time zones by identifier, looked up once: every stored entity names its zone, and on Linux
/// `TimeZone(identifier:)` reads the zone's file each time.
final class KnownTimeZones: @unchecked Sendable {
    static let shared = KnownTimeZones()
    private let lock = NSLock()
    private var zones: [String: TimeZone] = [:]

    func zone(_ identifier: String) -> TimeZone? {
        if let known = lock.withLock({ zones[identifier] }) { return known }
        guard let zone = TimeZone(identifier: identifier) else { return nil }
        lock.withLock { zones[identifier] = zone }
        return zone
    }
}
