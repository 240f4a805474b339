// A patient, a plan and a daily task in a SQLite care store; today's events, an outcome,
// the task's history and the change feed.
import CareStore
import Foundation

// snippet.add
let store = try SQLiteCarePlanStore(path: "caregate.sqlite")
let zone = TimeZone(identifier: "America/New_York")!
let patient = Patient(id: "maria", name: PersonName(givenName: "María", familyName: "López"), timezone: zone)
let plan = CarePlan(id: "home-care", title: "Home care", patientUUID: patient.uuid, timezone: zone)
let pill = CareTask(id: "metformin", title: "Metformin 500 mg", carePlanUUID: plan.uuid,
                    schedule: try .dailyAtTime(hour: 8, minutes: 0, start: Date(), timeZone: zone), timezone: zone)
try store.add([.patient(patient), .carePlan(plan), .task(pill)])        // one transaction
// snippet.end

// snippet.events
let calendar = Schedule.calendar(zone)
let startOfToday = calendar.startOfDay(for: Date())
let startOfTomorrow = calendar.date(byAdding: .day, value: 1, to: startOfToday)!
let today = try store.events(from: startOfToday, to: startOfTomorrow, tasks: EntityQuery())
try store.add([.outcome(Outcome(taskUUID: pill.uuid, taskOccurrenceIndex: today[0].occurrence,
                                values: [OutcomeValue(.boolean(true))]))])
let done = try store.events(from: startOfToday, to: startOfTomorrow, tasks: EntityQuery())
let adherence = Adherence(events: done).value                         // completed over expected: 1.0
// snippet.end

// snippet.history
let history = try store.fetchTasks(EntityQuery(versions: .history, ids: ["metformin"]))
let feed = try store.changes(since: 0)        // versions written after a revision; feed.revision is the next "since"
// snippet.end

// From async code (a server), without blocking Swift's cooperative threads on SQLite:
// let added = try await store.perform { try $0.add([.task(pill)]) }
// snippet.hide
print("events today: \(today.count)")
print("adherence: \(adherence.map { "\($0)" } ?? "none")")
print("history: \(history.count) version")
print("revision: \(feed.revision)")
// snippet.show
