// push-cycle: what one push cycle costs on a store that has pushed a million outcomes, beside
// what the cycle read before outcome versions were noted as pending (every current outcome and
// every outbox item), measured side by side in one run.
//
//   swift run -c release push-cycle [--patients 183] [--new 10] [--rounds 5] [--cycles-only] [PATH]
//
// The store: 183 patients with 15 daily tasks and a year of outcomes each (1,001,925), every one
// queued and pushed. Each round records `--new` outcomes, then times the store's side of a cycle
// (`OutcomePush.enqueue`: the pending versions read, exported and queued; then the claim of the
// queued items and their deliveries recorded); the network is not in it. Beside it, the reads the
// cycle made before: `forEachCurrentOutcome` over the store and every outbox item's id.
import CareStore
import FHIRClient
import Foundation
import Gateway
import GRDB
import Mapping

let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).map { arguments[$0 + 1] } }
let patients = Int(option("--patients") ?? "183")!
let newPerRound = Int(option("--new") ?? "10")!
let rounds = Int(option("--rounds") ?? "5")!
let path = arguments.dropFirst().last.flatMap { $0.hasPrefix("-") || Int($0) != nil ? nil : $0 }
    ?? FileManager.default.temporaryDirectory.appendingPathComponent("caregate-push-cycle-\(patients).sqlite").path

var root = URL(fileURLWithPath: #filePath)
for _ in 0..<4 { root.deleteLastPathComponent() }
let zone = TimeZone(identifier: "America/New_York")!
var calendar = Calendar(identifier: .gregorian)
calendar.timeZone = zone
let yearAgo = calendar.startOfDay(for: calendar.date(byAdding: .day, value: -366, to: Date())!)
func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

let existed = FileManager.default.fileExists(atPath: path)
let store = try SQLiteCarePlanStore(path: path)
if !existed {
    let started = ContinuousClock.now
    for p in 0..<patients {
        let patient = Patient(id: "Patient/cycle-\(p)", name: PersonName(givenName: "Cycle \(p)"), effectiveDate: yearAgo, timezone: zone)
        let plan = CarePlan(id: "CarePlan/cycle-\(p)", title: "Home care", patientUUID: patient.uuid, effectiveDate: yearAgo, timezone: zone)
        var entities: [CareEntity] = [.patient(patient), .carePlan(plan)]
        for t in 0..<15 {
            var task = CareTask(id: "CarePlan/cycle-\(p)/task-\(t)", title: "Weight \(t)", carePlanUUID: plan.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 7 + t % 12, minutes: 0, start: yearAgo, timeZone: zone), timezone: zone)
            task.effectiveDate = yearAgo
            task.groupIdentifier = "29463-7"
            entities.append(.task(task))
            for day in 0..<365 {
                let when = yearAgo.addingTimeInterval(Double(day) * 86_400 + Double(7 + t % 12) * 3600)
                entities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: day,
                                                 values: [OutcomeValue(.double(Double(60 + day % 10)), kind: "weight", units: "kg", createdDate: when)],
                                                 effectiveDate: when, timezone: zone)))
            }
        }
        try store.add(entities)
    }
    // Every outcome queued and pushed, as a year of pushes leaves the outbox (written straight:
    // exporting a million outcomes is not what is measured).
    try DatabaseQueue(path: path).write { db in
        try db.execute(sql: """
            INSERT INTO push_outbox (version_uuid, entity_id, idempotency_key, payload, state, attempts, queued_at, finished_at)
                SELECT uuid, patient_id || '/' || id, 'urn:caregate:outcome|' || patient_id || '/' || id, x'7B7D', 'pushed', 1, 0, 0
                FROM entity_version WHERE kind = 'outcome';
            DELETE FROM push_pending;
            """)
    }
    print(String(format: "made %@ in %.0f s", path, seconds(ContinuousClock.now - started)))
}

let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
let export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: mappings, timeZone: zone))
let push = OutcomePush(outbox: store, export: export, client: FHIRRESTClient(base: "http://127.0.0.1:9/fhir"))  // not called: nothing is sent
let pushed = try store.outboxCounts().pushed
let tasks = try store.fetchTasks(EntityQuery(ids: (0..<newPerRound).map { "CarePlan/cycle-0/task-\($0 % 15)" }))
var cycles: [Double] = [], scans: [Double] = []
// Occurrences no earlier run of this store used (a store is kept between runs).
let firstOccurrence = 366 + Int(Date().timeIntervalSince1970) % 2_000 * 10
for round in 0..<rounds {
    let occurrence = firstOccurrence + round
    try store.add(tasks.prefix(newPerRound).map { task in
        .outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: occurrence, values: [OutcomeValue(.double(71), kind: "weight", units: "kg")],
                         effectiveDate: yearAgo.addingTimeInterval(Double(occurrence) * 86_400 + 8 * 3600), timezone: zone))
    })
    if arguments.contains("--steps") {
        var t = ContinuousClock.now
        func lap(_ what: String) { print(String(format: "  %@ %.1f ms", what, seconds(ContinuousClock.now - t) * 1000)); t = ContinuousClock.now }
        let pending = try store.pendingOutcomeVersions(limit: 500); lap("pending (\(pending.count))")
        _ = try store.outboxEntities(versions: pending); lap("outboxEntities")
        let outcomes = try store.fetchOutcomes(EntityQuery(versions: .history, uuids: pending)); lap("fetchOutcomes (\(outcomes.count))")
        _ = try store.scopes(of: outcomes.map(\.taskUUID)); lap("scopes")
        _ = try store.fetchTasks(EntityQuery(versions: .history, uuids: outcomes.map(\.taskUUID))); lap("fetchTasks by uuid")
        var q = EntityQuery(versions: .history, ids: ["CarePlan/cycle-0/task-0"], patientIDs: ["Patient/cycle-0"])
        q.gatewayWrittenOnly = true
        _ = try store.fetchTasks(q); lap("newest written task")
        var pq = EntityQuery(versions: .history, ids: ["Patient/cycle-0"], patientIDs: ["Patient/cycle-0"])
        pq.gatewayWrittenOnly = true
        _ = try store.fetchPatients(pq); lap("newest written patient")
        _ = try export.observations(versions: pending) { v throws(StoreError) in try store.outboxEntities(versions: v) }; lap("export")
    }
    let started = ContinuousClock.now
    let queued = try push.enqueue()
    let afterQueue = ContinuousClock.now
    let claimed = try store.claim(limit: 100, worker: "bench", lease: 60, now: Date())
    let afterClaim = ContinuousClock.now
    try store.record(claimed.map { .pushed($0.versionUUID, location: "Observation/\($0.entityID)") })
    if arguments.contains("--steps") {
        print(String(format: "queue %.1f ms, claim %.1f ms, record %.1f ms", seconds(afterQueue - started) * 1000,
                     seconds(afterClaim - afterQueue) * 1000, seconds(ContinuousClock.now - afterClaim) * 1000))
    }
    cycles.append(seconds(ContinuousClock.now - started) * 1000)
    guard queued == tasks.prefix(newPerRound).count, claimed.count == queued else {
        print("round \(round): queued \(queued), claimed \(claimed.count)")
        exit(1)
    }
    if arguments.contains("--cycles-only") { continue }
    // What the cycle read before: every current outcome, and every outbox item's version and id.
    let before = ContinuousClock.now
    var outcomes = 0
    try store.forEachCurrentOutcome { _ in outcomes += 1 }
    let entities = try DatabaseQueue(path: path).read { db in
        var ids: [UUID: String] = [:]
        let rows = try Row.fetchCursor(db, sql: "SELECT version_uuid, entity_id FROM push_outbox")
        while let row = try rows.next() { ids[row["version_uuid"]] = row["entity_id"] }
        return ids.count
    }
    scans.append(seconds(ContinuousClock.now - before) * 1000)
    _ = (outcomes, entities)
}
func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
print(String(format: "a cycle of %d new outcomes among %d pushed: %.1f ms (median of %d: %@)", newPerRound, pushed, median(cycles), rounds,
             cycles.map { String(format: "%.1f", $0) }.joined(separator: ", ")))
if scans.isEmpty { exit(0) }
print(String(format: "what the cycle read before, alone: %.0f ms (median: %@); ratio %.0f×", median(scans),
             scans.map { String(format: "%.0f", $0) }.joined(separator: ", "), median(scans) / median(cycles)))
