import CareStore
import Foundation
import Gateway
import JSON

/// A device's push (`POST /carekit/v1/revisions` bodies) and pull (`since` vectors) against a
/// store holding two patients. Whatever a device of the first sends: a refused push leaves the
/// store as it was; an accepted one leaves the other patient's versions and knowledge untouched,
/// its knowledge covers the device's, and a pull from the device's vector never returns a
/// version of the other patient's.
public enum SyncHarness: FuzzHarness {
    public static let name = "sync"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (selector, body) = input.selector
        if selector % 4 == 0 {
            // A pull's since parameter.
            if let vector = try? KnowledgeVector(base64URL: String(decoding: body, as: UTF8.self)) {
                let fixture = try SyncFixture.make()
                try fixture.pullStaysInside(vector)
            }
            return
        }
        guard let json = try? JSONValue.parse(body), let push = try? PushBody.read(json) else { return }
        let fixture = try SyncFixture.make()
        let before = try fixture.snapshot()
        do {
            _ = try fixture.sync.push(patientID: "maria", records: push.records, deviceKnowledge: push.deviceKnowledge)
        } catch {
            guard try fixture.snapshot() == before else { throw PropertyFailure("a refused push (\(error)) changed the store") }
            return
        }
        let after = try fixture.snapshot()
        guard after.john == before.john, after.johnKnowledge == before.johnKnowledge else {
            throw PropertyFailure("Maria's device changed John's data or knowledge")
        }
        guard push.deviceKnowledge.isCovered(by: after.mariaKnowledge) else {
            throw PropertyFailure("after a push the patient's knowledge does not cover the device's")
        }
        try fixture.pullStaysInside(push.deviceKnowledge)
    }
}

/// Two patients, each with a plan and a daily task, in a store in memory.
struct SyncFixture {
    let store: SQLiteCarePlanStore
    let sync: CareKitSync

    struct Snapshot: Equatable {
        var john: Set<UUID>
        var maria: Set<UUID>
        var johnKnowledge: KnowledgeVector
        var mariaKnowledge: KnowledgeVector
    }

    /// The gateway's process, fixed so that inputs can name its clock.
    static let gateway = UUID(uuidString: "C0000000-0000-0000-0000-0000000000FF")!

    static func make() throws(PropertyFailure) -> SyncFixture {
        do {
            let store = try SQLiteCarePlanStore(inMemory: (), processID: gateway)
            let zone = TimeZone(identifier: "America/New_York")!
            let start = Date(timeIntervalSinceReferenceDate: 815_202_000)
            for id in ["maria", "john"] {
                // Fixed uuids, so that inputs can name them.
                let n = id == "maria" ? "A" : "B"
                var patient = Patient(id: id, name: PersonName(givenName: id), effectiveDate: start, timezone: zone)
                patient.version.uuid = UUID(uuidString: "\(n)0000000-0000-0000-0000-000000000001")!
                var plan = CarePlan(id: "plan-\(id)", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
                plan.version.uuid = UUID(uuidString: "\(n)0000000-0000-0000-0000-000000000002")!
                var task = CareTask(id: "walk-\(id)", title: "Walk", carePlanUUID: plan.uuid,
                                    schedule: try Schedule.dailyAtTime(hour: 8, minutes: 0, start: start, timeZone: zone), timezone: zone)
                task.version.uuid = UUID(uuidString: "\(n)0000000-0000-0000-0000-000000000003")!
                task.effectiveDate = start
                try store.add([.patient(patient), .carePlan(plan), .task(task)])
            }
            return SyncFixture(store: store, sync: CareKitSync(store: store))
        } catch {
            throw PropertyFailure("the fixture could not be made: \(error)")
        }
    }

    func snapshot() throws(PropertyFailure) -> Snapshot {
        do {
            let all = try store.allEntities(versions: .history)
            func versions(_ patient: String) throws -> Set<UUID> {
                Set(try store.scopes(of: all.map(\.version.uuid)).filter { $0.value.patientID == patient }.keys)
            }
            return Snapshot(john: try versions("john"), maria: try versions("maria"),
                            johnKnowledge: try store.patientKnowledge("john"), mariaKnowledge: try store.patientKnowledge("maria"))
        } catch {
            throw PropertyFailure("the store could not be read: \(error)")
        }
    }

    /// A pull for Maria from `since`, page by page, returns only her versions.
    func pullStaysInside(_ since: KnowledgeVector) throws(PropertyFailure) {
        do {
            let john = try snapshot().john
            var cursor: CareKitSync.PullCursor?
            var pages = 0
            repeat {
                let page = try sync.pull(patientID: "maria", since: since, limit: 2, cursor: cursor)
                if let leaked = try page.record().entities.first(where: { john.contains($0.version.uuid) }) {
                    throw PropertyFailure("a pull for Maria returned John's \(leaked.entityType.rawValue) \(leaked.version.id)")
                }
                cursor = page.next
                pages += 1
            } while cursor != nil && pages < 10_000
        } catch let failure as PropertyFailure {
            throw failure
        } catch {
            throw PropertyFailure("a pull failed: \(error)")
        }
    }
}
