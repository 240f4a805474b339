// A read-decide-write in one transaction, a consistent read, and a store in memory.
import CareStore
// snippet.hide
import Foundation
let setUp = try SQLiteCarePlanStore(path: "caregate.sqlite")
let zone = TimeZone(identifier: "America/New_York")!
let maria = Patient(id: "maria", name: PersonName(givenName: "María", familyName: "López"), timezone: zone)
try setUp.add([.patient(maria), .carePlan(CarePlan(id: "home-care", title: "Home care", patientUUID: maria.uuid, timezone: zone))])
let store = setUp
// snippet.show

// snippet.transactions
try store.write { tx in
    guard var plan = try tx.fetchCarePlans(EntityQuery(ids: ["home-care"])).first else { return }
    plan.title = "Home care, week 2"
    try tx.update([.carePlan(plan)])
}
let record = try store.read { tx in try tx.revisionRecord() }
let scratch = try SQLiteCarePlanStore(inMemory: ())     // same rules, nothing on disk (tests, tools)
// snippet.end
// snippet.hide
print("title: \(try store.fetchCarePlans(EntityQuery(ids: ["home-care"]))[0].title)")
print("record: \(record.entities.count) entities")
print("scratch: \(try scratch.fetchPatients(EntityQuery()).count) patients")
