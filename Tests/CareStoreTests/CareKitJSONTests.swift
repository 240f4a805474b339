import JSON
import Foundation
import Testing
@testable import CareStore

@Suite("CareKit JSON")
struct CareKitJSONTests {
    static let exampleTask = """
        {"id": "metformin", "uuid": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "title": "Metformin",
         "instructions": "500 mg with food", "impactsAdherence": true, "carePlanUUID": "11111111-2222-3333-4444-555555555555",
         "effectiveDate": 757832400, "previousVersionUUIDs": [], "nextVersionUUIDs": [],
         "timezone": {"identifier": "America/New_York"},
         "schedule": {"elements": [
           {"start": 757832400, "end": 758466000, "interval": {"weekOfYear": 1}, "duration": {"isAllDay": true}, "targetValues": [],
            "calendar": {"identifier": "gregorian", "timeZone": {"identifier": "America/New_York"}, "firstWeekday": 1, "minimumDaysInFirstWeek": 1, "locale": {"identifier": "", "current": 0}, "current": 0}},
           {"start": 757861200, "interval": {"day": 1}, "text": "After breakfast", "duration": {"isAllDay": false, "seconds": 1800},
            "targetValues": [{"type": "double", "value": 500, "units": "mg", "kind": "dose", "createdDate": 757861200}],
            "calendar": {"identifier": "gregorian", "timeZone": {"identifier": "America/New_York"}, "firstWeekday": 1, "minimumDaysInFirstWeek": 1, "locale": {"identifier": "", "current": 0}, "current": 0}}]}}
        """
    static let exampleOutcome = """
        {"id": "out-1", "uuid": "CCCCCCCC-0000-0000-0000-000000000001", "taskUUID": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE",
         "taskOccurrenceIndex": 3, "effectiveDate": 757861200, "previousVersionUUIDs": [], "nextVersionUUIDs": [],
         "timezone": {"identifier": "GMT"},
         "values": [{"type": "integer", "value": 72, "units": "bpm", "kind": "heartRate", "createdDate": 757861200},
                    {"type": "boolean", "value": true, "createdDate": 757861200}]}
        """

    @Test("CareKit 4.0's own example task and outcome decode, and encode back to the same JSON")
    func careKitExamples() throws {
        let taskJSON = try JSONValue.parse(Self.exampleTask)
        guard case .task(let task) = try CareKitJSON.decode(.task, from: taskJSON) else { Issue.record("not a task"); return }
        #expect(task.id == "metformin" && task.title == "Metformin" && task.impactsAdherence)
        #expect(task.uuid.uuidString == "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE")
        #expect(task.schedule.elements.count == 2)
        #expect(task.schedule.elements[0].duration == .allDay && task.schedule.elements[0].interval.weekOfYear == 1)
        #expect(task.schedule.elements[1].duration == .seconds(1800))
        #expect(task.schedule.elements[1].targetValues == [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: Date(timeIntervalSinceReferenceDate: 757861200))])
        #expect(task.schedule.elements[1].calendar.timeZone.identifier == "America/New_York")
        #expect(CareKitJSON.encode(.task(task)) == taskJSON)

        let outcomeJSON = try JSONValue.parse(Self.exampleOutcome)
        guard case .outcome(let outcome) = try CareKitJSON.decode(.outcome, from: outcomeJSON) else { Issue.record("not an outcome"); return }
        #expect(outcome.taskOccurrenceIndex == 3)
        #expect(outcome.values.map(\.value) == [.integer(72), .boolean(true)])
        #expect(CareKitJSON.encode(.outcome(outcome)) == outcomeJSON)
    }

    static func fullEntities() throws -> [CareEntity] {
        let zone = TimeZone(identifier: "America/New_York")!
        let start = Date(timeIntervalSinceReferenceDate: 815_000_000)
        var patient = Patient(id: "maria", name: PersonName(namePrefix: "Ms.", givenName: "María", middleName: "Elena", familyName: "López", nickname: "Mari"),
                              effectiveDate: start, timezone: zone)
        patient.sex = "female"
        patient.birthday = Date(timeIntervalSinceReferenceDate: -1_350_000_000)
        patient.allergies = ["penicillin"]
        patient.version.createdDate = start
        patient.version.updatedDate = start.addingTimeInterval(60)
        patient.version.schemaVersion = .careKit4
        patient.version.remoteID = "ehr:Patient/maria-lopez"
        patient.version.source = "caregate"
        patient.version.userInfo = ["fhir.resourceType": "Patient", "fhir.versionId": "3"]
        patient.version.asset = "maria.png"
        patient.version.notes = [Note(author: "Dr. Chen", title: "Language", content: "Prefers Spanish")]
        patient.version.groupIdentifier = "clinic-a"
        patient.version.tags = ["diabetes", "heart-failure"]
        var plan = CarePlan(id: "home-care", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        plan.version.previousVersionUUIDs = [UUID()]
        var contact = Contact(id: "dr-chen", name: PersonName(givenName: "Amy", familyName: "Chen"), carePlanUUID: plan.uuid, effectiveDate: start, timezone: zone)
        contact.address = PostalAddress(street: "300 Longwood Avenue", city: "Boston", state: "MA", postalCode: "02115", country: "United States", isoCountryCode: "US")
        contact.emailAddresses = [LabeledValue(label: "work", value: "amy.chen@clinic.example.org")]
        contact.messagingNumbers = [LabeledValue(label: "mobile", value: "+1 617 555 0124")]
        contact.phoneNumbers = [LabeledValue(label: "work", value: "+1 617 555 0100")]
        contact.otherContactInfo = [LabeledValue(label: "pager", value: "+1 617 555 0177")]
        contact.organization = "Cambridge Community Health"
        contact.title = "Endocrinologist"
        contact.role = "Primary physician"
        contact.category = .careProvider
        let calendar = Schedule.calendar(zone)
        let schedule = try Schedule(elements: [
            ScheduleElement(start: start, end: start.addingTimeInterval(86400 * 30), interval: DateComponents(day: 1), text: "With breakfast",
                            duration: .seconds(1800), targetValues: [OutcomeValue(.double(500.5), kind: "dose", units: "mg", createdDate: start)], calendar: calendar),
            ScheduleElement(start: start.addingTimeInterval(3600), interval: DateComponents(weekOfYear: 1), duration: .allDay, calendar: calendar),
        ])
        var task = CareTask(id: "metformin", title: "Metformin", carePlanUUID: plan.uuid, schedule: schedule, timezone: zone)
        task.instructions = "500 mg with food"
        var steps = CareTask(id: "steps", title: "Walk", carePlanUUID: plan.uuid, schedule: try Schedule.allDay(start: start, timeZone: zone), impactsAdherence: false, timezone: zone)
        steps.healthKitLinkage = HealthKitLinkage(quantityIdentifier: "HKQuantityTypeIdentifierStepCount", quantityType: .cumulative, unitString: "count")
        var outcome = Outcome(taskUUID: task.uuid, taskOccurrenceIndex: 2, values: [
            OutcomeValue(.integer(72), kind: "heartRate", units: "bpm", createdDate: start),
            OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: start),
            OutcomeValue(.boolean(true), createdDate: start),
            OutcomeValue(.text("felt fine"), kind: "note", createdDate: start),
            OutcomeValue(.binary(Data([0, 1, 2, 250])), kind: "photo", createdDate: start),
            OutcomeValue(.date(start.addingTimeInterval(-600)), kind: "takenAt", createdDate: start),
        ], effectiveDate: start, timezone: zone)
        outcome.version.deletedDate = start.addingTimeInterval(10)
        return [.patient(patient), .carePlan(plan), .contact(contact), .task(task), .task(steps), .outcome(outcome)]
    }

    @Test("every entity type with every field round-trips through CareKit 4.0 JSON text")
    func roundTrip() throws {
        for entity in try Self.fullEntities() {
            let text = CareKitJSON.encode(entity).serialized()
            let decoded = try CareKitJSON.decode(entity.entityType, from: try JSONValue.parse(text))
            #expect(decoded == entity, "\(entity.entityType): \(text)")
        }
    }

    @Test("text with quotes, backslashes, control characters and non-ASCII is escaped as JSON requires and reads back unchanged")
    func escaping() throws {
        let awkward = "He said \"take 2\" \\ then\nwait\t\u{01}\u{1F} — ½ tab 💊"
        var plan = CarePlan(id: "quote\"d", title: awkward, patientUUID: nil, effectiveDate: Date(timeIntervalSinceReferenceDate: 0.5))
        plan.version.userInfo = ["key \"with\" quotes\n": awkward]
        let bytes = CareKitJSON.bytes(.carePlan(plan))
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.contains(#""title":"He said \"take 2\" \\ then\nwait\t\u0001\u001f — ½ tab 💊""#))
        #expect(text.contains(#""effectiveDate":0.5,"#))
        let decoded = try CareKitJSON.decode(.carePlan, from: try JSONValue.parse(bytes))
        #expect(decoded == .carePlan(plan))
    }

    @Test("numbers: whole numbers are written as integers (negative and large too), others in their shortest form")
    func numbers() throws {
        for value in [0.0, -1, 7, 1_000_000, -816_940_016, 999_999_999_999_999, 816_940_016.5126017, -0.25, 1e300] {
            let outcome = Outcome(taskUUID: UUID(), taskOccurrenceIndex: 0, values: [OutcomeValue(.double(value), createdDate: Date(timeIntervalSinceReferenceDate: 0))])
            let text = String(decoding: CareKitJSON.bytes(.outcome(outcome)), as: UTF8.self)
            let expected = value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
            #expect(text.contains(#""value":\#(expected),"#), "\(value): \(text)")
            #expect(try CareKitJSON.decode(.outcome, from: JSONValue.parse(text)) == .outcome(outcome))
        }
    }

    @Test("3.x JSON has no calendar; reading it uses a gregorian calendar in the task's time zone")
    func careKit3() throws {
        let entities = try Self.fullEntities()
        guard case .task(let task) = entities[3] else { return }
        let v3 = CareKitJSON.encode(.task(task), version: .v3)
        #expect(v3["schedule"]?["elements"]?.arrayValue?.allSatisfy { $0["calendar"] == nil } == true)
        #expect(CareKitJSON.encode(.task(task), version: .v4)["schedule"]?["elements"]?.arrayValue?.allSatisfy { $0["calendar"] != nil } == true)
        let decoded = try CareKitJSON.decode(.task, from: v3)
        #expect(decoded == .task(task))
    }

    @Test("ISO 8601 dates and lowercase UUIDs are accepted on read; numbers without fractions are written bare")
    func lenientReading() throws {
        let json = try JSONValue.parse("""
            {"id": "p", "uuid": "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee", "effectiveDate": "2026-11-01T12:00:00Z",
             "previousVersionUUIDs": [], "nextVersionUUIDs": [], "timezone": {"identifier": "Europe/Berlin"},
             "title": "Plan", "patientUUID": "11111111-2222-3333-4444-555555555555", "createdDate": "2026-11-01T12:00:00.250Z"}
            """)
        guard case .carePlan(let plan) = try CareKitJSON.decode(.carePlan, from: json) else { Issue.record("not a plan"); return }
        #expect(plan.uuid.uuidString == "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE")
        #expect(plan.effectiveDate == Date(timeIntervalSince1970: 1_793_534_400))
        #expect(plan.version.createdDate == Date(timeIntervalSince1970: 1_793_534_400.25))
        let written = CareKitJSON.encode(.carePlan(plan)).serialized()
        #expect(written.contains("\"uuid\":\"AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE\""))
        #expect(written.contains("\"effectiveDate\":815227200,"))
        #expect(CareKitJSON.encode(.outcome(Outcome(taskUUID: UUID(), taskOccurrenceIndex: 0, values: [OutcomeValue(.double(500), createdDate: Date(timeIntervalSinceReferenceDate: 0))])))
            .serialized().contains("{\"type\":\"double\",\"value\":500,\"createdDate\":0}"))
    }

    @Test("decoding errors name the entity and the field")
    func errors() throws {
        func error(_ type: EntityType, _ text: String) -> String {
            do {
                _ = try CareKitJSON.decode(type, from: try JSONValue.parse(text))
                return "accepted"
            } catch let e as CareKitJSONError {
                return e.description
            } catch {
                return "\(error)"
            }
        }
        let base = #""uuid": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "effectiveDate": 0, "previousVersionUUIDs": [], "nextVersionUUIDs": [], "timezone": {"identifier": "UTC"}"#
        #expect(error(.carePlan, #"{"id": "p", \#(base)}"#) == #"carePlan "p".title: missing (required)"#)
        #expect(error(.outcome, #"{"id": "o", \#(base), "taskUUID": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "taskOccurrenceIndex": 0, "values": [{"type": "float", "value": 1, "createdDate": 0}]}"#)
                == #"outcome "o".values[0].type: expected integer, double, boolean, text, binary or date, found "float""#)
        #expect(error(.task, #"{"id": "t", \#(base), "impactsAdherence": true, "schedule": {"elements": [{"start": 0, "interval": {"day": 0}, "duration": {"isAllDay": true}, "targetValues": []}]}}"#)
                == #"task "t".schedule: schedule element 0: the interval has no non-zero component (events would never advance)"#)
        #expect(error(.patient, #"{"id": "x", \#(base), "name": {}, "birthday": "yesterday"}"#) == #"patient "x".birthday: expected a date (seconds since 2001-01-01 within 10,000 years, or an ISO 8601 string)"#)
        #expect(error(.contact, #"{"id": "c", \#(base), "name": {}, "category": "doctor"}"#) == #"contact "c".category: expected careProvider or friendsAndFamily, found "doctor""#)
    }

    @Test("revision records list parents before children, oldest first, and read back; a bare entity array is accepted")
    func revisionRecords() throws {
        let entities = try Self.fullEntities()
        let record = RevisionRecord(entities: entities.reversed(), knowledgeVector: [.init(id: UUID(), clock: 7)])
        #expect(record.entities.map(\.entityType.applyOrder) == [0, 1, 2, 2, 2, 3])
        for (a, b) in zip(record.entities, record.entities.dropFirst()) where a.entityType.applyOrder == b.entityType.applyOrder {
            #expect(a.version.effectiveDate <= b.version.effectiveDate)
        }
        let text = record.json().serialized(pretty: true)
        let back = try RevisionRecord(json: try JSONValue.parse(text))
        #expect(back == record)
        let bare = try RevisionRecord(json: .array(entities.map { .object([("type", .string($0.entityType.rawValue)), ("object", CareKitJSON.encode($0))]) }))
        #expect(bare.entities.count == entities.count && bare.knowledgeVector.isEmpty)
        #expect(throws: CareKitJSONError.self) { try RevisionRecord(json: try JSONValue.parse(#"{"entities": [{"type": "medication", "object": {}}]}"#)) }
    }
}

@Suite("Time-ordered UUIDs")
struct TimeOrderedUUIDTests {
    @Test("version 7 UUIDs: the version and variant bits, byte order following time, no repeats, CareKit's uppercase form")
    func uuidV7() throws {
        let earlier = UUID.timeOrdered(at: Date(timeIntervalSince1970: 1_800_000_000))
        let later = UUID.timeOrdered(at: Date(timeIntervalSince1970: 1_800_000_000.002))
        func bytes(_ u: UUID) -> [UInt8] { withUnsafeBytes(of: u.uuid) { Array($0) } }
        #expect(bytes(earlier)[6] >> 4 == 7)
        #expect(bytes(earlier)[8] >> 6 == 0b10)
        #expect(bytes(earlier).lexicographicallyPrecedes(bytes(later)))
        #expect(earlier.uuidString.dropFirst(14).first == "7")
        let many = (0..<10_000).map { _ in UUID.timeOrdered() }
        #expect(Set(many).count == 10_000)
        #expect(UUID(uuidString: earlier.uuidString.lowercased()) == earlier)
    }
}

@Suite("Revision record order")
struct RevisionOrderTests {
    @Test("ties in apply order fall back to the uuids' text order (compared as bytes)")
    func uuidTieBreak() {
        let date = Date(timeIntervalSinceReferenceDate: 800_000_000)
        let zone = TimeZone(identifier: "UTC")!
        let patients: [CareEntity] = (0..<200).map { i in
            var p = Patient(id: "p\(i)", name: PersonName(givenName: "P"), effectiveDate: date, timezone: zone)
            p.uuid = UUID()
            return .patient(p)
        }
        let ordered = RevisionRecord.applyOrder(patients.shuffled())
        #expect(ordered.map(\.version.uuid.uuidString) == patients.map(\.version.uuid.uuidString).sorted())
    }
}

@Suite("Hostile numbers in CareKit JSON")
struct CareKitHostileNumberTests {
    func error(_ type: EntityType, _ text: String) -> String {
        do {
            _ = try CareKitJSON.decode(type, from: try JSONValue.parse(text))
            return "accepted"
        } catch {
            return "\(error)"
        }
    }

    let base = #""uuid": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "previousVersionUUIDs": [], "nextVersionUUIDs": [], "timezone": {"identifier": "UTC"}"#

    @Test("infinity (1e400) is refused at the door, with its place; a date or schedule start of 1e300 is refused, not computed")
    func refused() {
        #expect(error(.carePlan, #"{"id": "p", "title": "t", "effectiveDate": 1e400, \#(base)}"#).hasSuffix("the number is out of range (past ±1.8e308)"))
        #expect(error(.carePlan, #"{"id": "p", "title": "t", "effectiveDate": 1e300, \#(base)}"#).contains("effectiveDate: expected a date"))
        let task = #"{"id": "t", "effectiveDate": 0, \#(base), "impactsAdherence": true, "schedule": {"elements": [{"start": START, "interval": {"day": 1}, "duration": {"isAllDay": true}, "targetValues": []}]}}"#
        #expect(error(.task, task.replacingOccurrences(of: "START", with: "1e300")).contains("start: expected a date"))
        #expect(error(.task, task.replacingOccurrences(of: "START", with: "0").replacingOccurrences(of: #"{"day": 1}"#, with: #"{"day": 9000000000000}"#))
                == #"task "t".schedule: schedule element 0: a start, end, interval or duration beyond 10,000 years"#)
        #expect(error(.task, task.replacingOccurrences(of: "START", with: "0")) == "accepted")
    }

    @Test("a knowledge vector clock must be a whole number from 0 within Int")
    func clocks() throws {
        for clock in ["1e20", "-1", "1.5"] {
            let text = #"{"entities": [], "knowledgeVector": {"processes": [{"id": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "clock": \#(clock)}]}}"#
            #expect(throws: CareKitJSONError.self) { try RevisionRecord(json: try JSONValue.parse(text)) }
        }
        let fine = #"{"entities": [], "knowledgeVector": {"processes": [{"id": "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE", "clock": 12}]}}"#
        #expect(try RevisionRecord(json: try JSONValue.parse(fine)).knowledgeVector.first?.clock == 12)
    }
}
