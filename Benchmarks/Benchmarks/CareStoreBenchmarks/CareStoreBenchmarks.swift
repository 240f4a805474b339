// Care store benchmarks (package-benchmark): bulk insert in one transaction, the events of one
// day across 1,000 tasks, and a history query over a year of outcomes.
import Benchmark
import CareStore
import Foundation

let zone = TimeZone(identifier: "America/New_York")!
let calendar: Calendar = {
    var c = Calendar(identifier: .gregorian)
    c.timeZone = zone
    return c
}()
let yearStart = calendar.date(from: DateComponents(year: 2026, month: 1, day: 1))!

func temporaryStore(_ name: String) throws -> SQLiteCarePlanStore {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-benchmark-\(name)-\(UUID().uuidString).sqlite").path
    return try SQLiteCarePlanStore(path: path)
}

/// A patient and plan in the store, and `tasks` daily tasks with `outcomesPerTask` outcomes each (not yet added).
func workload(_ store: SQLiteCarePlanStore, tasks: Int, outcomesPerTask: Int) throws -> [CareEntity] {
    let patient = Patient(id: "p", name: PersonName(givenName: "María"), effectiveDate: yearStart, timezone: zone)
    let plan = CarePlan(id: "plan", title: "Plan", patientUUID: patient.uuid, effectiveDate: yearStart, timezone: zone)
    try store.add([.patient(patient), .carePlan(plan)])
    var taskEntities: [CareEntity] = []
    var outcomeEntities: [CareEntity] = []
    for i in 0..<tasks {
        var task = CareTask(id: "task-\(i)", title: "Task \(i)", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: i % 24, minutes: (i * 7) % 60, start: yearStart, timeZone: zone), timezone: zone)
        task.effectiveDate = yearStart
        taskEntities.append(.task(task))
        for k in 0..<outcomesPerTask {
            outcomeEntities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: k,
                                                    values: [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: yearStart)],
                                                    effectiveDate: yearStart, timezone: zone)))
        }
    }
    return taskEntities + outcomeEntities
}

let benchmarks: @Sendable () -> Void = {
    Benchmark("Bulk insert 20,000 tasks + 20,000 outcomes (one transaction)",
              configuration: .init(metrics: [.wallClock, .peakMemoryResident], maxDuration: .seconds(60), maxIterations: 5)) { benchmark in
        // Setup outside the measurement: a fresh store and 40,000 entities (entities/s = 40,000 / wall clock).
        let store = try temporaryStore("bulk")
        let entities = try workload(store, tasks: 20_000, outcomesPerTask: 1)
        // Earlier iterations' files still being written back would slow this one's commit.
        sync()
        benchmark.startMeasurement()
        try store.add(entities)
        benchmark.stopMeasurement()
    }

    // One store, set up once: 1,000 daily tasks since January.
    let dayStore = try! temporaryStore("day")
    try! dayStore.add(try! workload(dayStore, tasks: 1000, outcomesPerTask: 0))
    let day = calendar.date(from: DateComponents(year: 2026, month: 11, day: 3))!
    let nextDay = calendar.date(byAdding: .day, value: 1, to: day)!
    _ = try! dayStore.events(from: day, to: nextDay, tasks: EntityQuery())

    Benchmark("Events of one day across 1,000 tasks (through the store, warm)",
              configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(10), maxIterations: 200)) { _ in
        blackHole(try dayStore.events(from: day, to: nextDay, tasks: EntityQuery()))
    }

    let tasksInMemory = try! dayStore.fetchTasks()
    Benchmark("Events of one day across 1,000 tasks (schedule arithmetic only)",
              configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(10), maxIterations: 200)) { _ in
        for task in tasksInMemory { blackHole(task.schedule.events(from: day, to: nextDay)) }
    }

    let historyStore = try! temporaryStore("history")
    try! historyStore.add(try! workload(historyStore, tasks: 10, outcomesPerTask: 365))
    Benchmark("History: a year of outcomes (10 tasks × 365)",
              configuration: .init(metrics: [.wallClock, .mallocCountTotal], maxDuration: .seconds(10), maxIterations: 100)) { _ in
        blackHole(try historyStore.fetchOutcomes(EntityQuery(versions: .history)))
    }
}
