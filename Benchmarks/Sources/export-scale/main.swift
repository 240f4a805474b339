// export-scale: makes a store of a million outcomes for `caregate export`'s memory figure
// (export-scale.sh runs the export itself as its own process, under /usr/bin/time).
//
//   swift run -c release export-scale PATH [--patients 183]
//
// Each patient has a plan of 15 daily tasks and a year of outcomes (5,475): 183 patients make
// 1,001,925 outcomes, written one patient per transaction.
import CareStore
import Foundation

let arguments = CommandLine.arguments
guard arguments.count > 1 else {
    print("usage: export-scale PATH [--patients N]")
    exit(64)
}
let path = arguments[1]
let patients = arguments.firstIndex(of: "--patients").map { Int(arguments[$0 + 1])! } ?? 183
let zone = TimeZone(identifier: "America/New_York")!
var calendar = Calendar(identifier: .gregorian)
calendar.timeZone = zone
let yearAgo = calendar.startOfDay(for: calendar.date(byAdding: .day, value: -366, to: Date())!)
let store = try SQLiteCarePlanStore(path: path)
let started = ContinuousClock.now
var outcomes = 0
for p in 0..<patients {
    let patient = Patient(id: "Patient/scale-\(p)", name: PersonName(givenName: "Scale \(p)"), effectiveDate: yearAgo, timezone: zone)
    let plan = CarePlan(id: "CarePlan/scale-\(p)", title: "Home care", patientUUID: patient.uuid, effectiveDate: yearAgo, timezone: zone)
    var entities: [CareEntity] = [.patient(patient), .carePlan(plan)]
    for t in 0..<15 {
        var task = CareTask(id: "CarePlan/scale-\(p)/task-\(t)", title: "Task \(t)", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 7 + t % 12, minutes: 0, start: yearAgo, timeZone: zone), timezone: zone)
        task.effectiveDate = yearAgo
        entities.append(.task(task))
        for day in 0..<365 {
            let when = yearAgo.addingTimeInterval(Double(day) * 86_400 + Double(7 + t % 12) * 3600)
            entities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: day,
                                             values: [OutcomeValue(.double(Double(60 + day % 10)), kind: "weight", units: "kg", createdDate: when)],
                                             effectiveDate: when, timezone: zone)))
            outcomes += 1
        }
    }
    try store.add(entities)
}
print("export-scale: \(patients) patients, \(outcomes) outcomes in \(ContinuousClock.now - started): \(path)")
