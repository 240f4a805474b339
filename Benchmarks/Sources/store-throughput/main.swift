// store-throughput: the care store's figures on this machine (release build).
//
//   store-throughput [--tasks N]
//
// 1. bulk insert: N tasks and N outcomes (one per task) in one transaction, entities per second;
// 2. the events of one day across 1,000 tasks (warm), milliseconds;
// 3. a history query over a year of daily outcomes for 10 tasks (3,650 outcomes), milliseconds.
import CareStore
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
var taskCount = 50_000
if let i = arguments.firstIndex(of: "--tasks") { taskCount = Int(arguments[i + 1])!; arguments.removeSubrange(i...(i + 1)) }

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

let zone = TimeZone(identifier: "America/New_York")!
var calendar = Calendar(identifier: .gregorian)
calendar.timeZone = zone
let start = calendar.date(from: DateComponents(year: 2026, month: 1, day: 1))!

func freshStore(_ name: String) throws -> SQLiteCarePlanStore {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-bench-\(name)-\(getpid()).sqlite").path
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
    return try SQLiteCarePlanStore(path: path)
}

func seed(_ store: SQLiteCarePlanStore, tasks: Int, outcomesPerTask: Int) throws -> [CareEntity] {
    let patient = Patient(id: "p", name: PersonName(givenName: "María"), effectiveDate: start, timezone: zone)
    let plan = CarePlan(id: "plan", title: "Plan", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
    try store.add([.patient(patient), .carePlan(plan)])
    var entities: [CareEntity] = []
    var taskList: [CareTask] = []
    for i in 0..<tasks {
        var task = CareTask(id: "task-\(i)", title: "Task \(i)", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: i % 24, minutes: (i * 7) % 60, start: start, timeZone: zone), timezone: zone)
        task.effectiveDate = start
        taskList.append(task)
        entities.append(.task(task))
    }
    for task in taskList {
        for k in 0..<outcomesPerTask {
            entities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: k, values: [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: start)],
                                             effectiveDate: start, timezone: zone)))
        }
    }
    return entities
}

// 1. Bulk insert.
do {
    let store = try freshStore("bulk")
    let entities = try seed(store, tasks: taskCount, outcomesPerTask: 1)
    // Files of earlier runs still being written back to disk would slow this commit: flush first.
    sync()
    let t0 = now()
    try store.add(entities)
    let seconds = now() - t0
    print(String(format: "bulk-insert %.0f entities/s (%d tasks + %d outcomes in %.2f s, one transaction)", Double(entities.count) / seconds, taskCount, taskCount, seconds))
}

if arguments.contains("--bulk-only") { exit(0) }

// 2. One day across 1,000 tasks.
do {
    let store = try freshStore("day")
    try store.add(try seed(store, tasks: 1000, outcomesPerTask: 0))
    let day = calendar.date(from: DateComponents(year: 2026, month: 11, day: 3))!
    let next = calendar.date(byAdding: .day, value: 1, to: day)!
    _ = try store.events(from: day, to: next, tasks: EntityQuery())
    var best = Double.infinity
    var count = 0
    for _ in 0..<20 {
        let t0 = now()
        count = try store.events(from: day, to: next, tasks: EntityQuery()).count
        best = min(best, now() - t0)
    }
    // The schedule arithmetic alone, on tasks in memory.
    let tasks = try store.fetchTasks()
    var bestCompute = Double.infinity
    for _ in 0..<20 {
        let t0 = now()
        var n = 0
        for task in tasks { n += task.schedule.events(from: day, to: next).count }
        bestCompute = min(bestCompute, now() - t0)
        precondition(n == count)
    }
    if arguments.contains("--parts") {
        var bestFetch = Double.infinity, bestOutcomes = Double.infinity
        for _ in 0..<20 {
            var t0 = now()
            _ = try store.fetchTasks(EntityQuery(versions: .inEffect(DateInterval(start: day.addingTimeInterval(-26 * 3600), end: next))))
            bestFetch = min(bestFetch, now() - t0)
            t0 = now()
            _ = try store.fetchOutcomes(EntityQuery(versions: .inEffect(DateInterval(start: day, end: next))))
            bestOutcomes = min(bestOutcomes, now() - t0)
        }
        print(String(format: "  day-view parts: fetch task versions %.2f ms, fetch outcomes %.2f ms", bestFetch * 1000, bestOutcomes * 1000))
    }
    /// The sorted times of one-day event queries for days at these offsets from `base`.
    func dayTimes(_ offsets: [Int], from base: Date) throws -> [Double] {
        try offsets.map { offset in
            let d = calendar.date(byAdding: .day, value: offset, to: base)!
            let e = calendar.date(byAdding: .day, value: 1, to: d)!
            let t0 = now()
            _ = try store.events(from: d, to: e, tasks: EntityQuery())
            return now() - t0
        }.sorted()
    }
    // A different day each time: no jump is reused from the previous query.
    let perDay = try dayTimes(Array(1...20), from: next)
    print(String(format: "day-view, a new day each time: median %.2f ms, best %.2f ms (20 consecutive days)", perDay[10] * 1000, perDay[0] * 1000))
    let scattered = try dayTimes([-250, 40, -170, -90, 20, -300, -20, -130, -60, 10, -210, -280, -5, -110, 30, -45, -190, -240, -75, -150], from: day)
    print(String(format: "day-view, days scattered over the year: median %.2f ms, worst %.2f ms (20 days)", scattered[10] * 1000, scattered[19] * 1000))
    print(String(format: "day-view, the same day again: %.2f ms through the store, %.2f ms schedule arithmetic alone (%d events of 1,000 tasks, 306 days after their start)", best * 1000, bestCompute * 1000, count))
}

// 3. A year of outcomes.
do {
    let store = try freshStore("history")
    try store.add(try seed(store, tasks: 10, outcomesPerTask: 365))
    var best = Double.infinity
    var count = 0
    for _ in 0..<10 {
        let t0 = now()
        count = try store.fetchOutcomes(EntityQuery(versions: .history)).count
        best = min(best, now() - t0)
    }
    let coldStore = try SQLiteCarePlanStore(path: store.path)
    let t0 = now()
    _ = try coldStore.fetchOutcomes(EntityQuery(versions: .history))
    let cold = now() - t0
    print(String(format: "history %.2f ms warm, %.2f ms cold (%d outcome versions over a year)", best * 1000, cold * 1000, count))
}

// 4. The parts of a bulk insert, alone (to see where the time goes).
if arguments.contains("--parts") {
    let store = try freshStore("parts")
    let entities = try seed(store, tasks: 20_000, outcomesPerTask: 1)
    var t0 = now()
    var bytes = 0
    for e in entities { bytes += CareKitJSON.bytes(e).count }
    print(String(format: "  CareKit JSON bytes (the store's path): %.2f µs/entity (%d bytes avg)", (now() - t0) / Double(entities.count) * 1e6, bytes / entities.count))
    t0 = now()
    var n = 0
    for e in entities { n += e.version.uuid.uuidString.utf8.count }
    print(String(format: "  uuidString: %.2f µs/entity", (now() - t0) / Double(entities.count) * 1e6))
    t0 = now()
    for case .outcome(let o) in entities { _ = o.taskOccurrenceIndex }
    var tasksByUUID: [UUID: CareTask] = [:]
    for case .task(let t) in entities { tasksByUUID[t.uuid] = t }
    t0 = now()
    for case .outcome(let o) in entities { _ = tasksByUUID[o.taskUUID]!.schedule.event(occurrence: o.taskOccurrenceIndex) }
    print(String(format: "  event(occurrence:) per outcome: %.2f µs", (now() - t0) / Double(entities.count / 2) * 1e6))
}
for name in ["bulk", "day", "history", "parts"] {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-bench-\(name)-\(getpid()).sqlite").path
    for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
}
