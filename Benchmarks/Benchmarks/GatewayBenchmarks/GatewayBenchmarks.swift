// Gateway benchmarks (package-benchmark): export 100,000 outcomes to one transaction Bundle file,
// as `caregate export --format bundle` does (outcomes/s = 100,000 / wall clock).
import Benchmark
import CareStore
import FHIR
import Foundation
import Gateway
import Mapping

let root: URL = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }
    return url
}()
let zone = TimeZone(identifier: "America/New_York")!

/// The demo patient imported from FHIRSamples, and `count` outcomes recorded across its tasks
/// (booleans, doses and blood pressure pairs), as an app would have over years.
func storeWithOutcomes(_ count: Int) throws -> (SQLiteCarePlanStore, MappingSet) {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-benchmark-export-\(UUID().uuidString).sqlite").path
    let store = try SQLiteCarePlanStore(path: path)
    let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
    let start = ISO8601DateFormatter().date(from: "2026-11-01T09:00:00-04:00")!
    _ = FHIRImporter(mappings: mappings, store: store, timeZone: zone, now: start)
        .run([root.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path])
    let tasks = try store.fetchTasks().filter { $0.schedule.elements.allSatisfy { $0.end == nil } }  // open-ended schedules
    var outcomes: [CareEntity] = []
    outcomes.reserveCapacity(count)
    for i in 0..<count {
        let task = tasks[i % tasks.count]
        let occurrence = 1000 + i / tasks.count  // after those the demo imported
        let values: [OutcomeValue]
        switch task.version.groupIdentifier {
        case "85354-9": values = [OutcomeValue(.integer(120 + i % 20), kind: "8480-6", units: "mmHg", createdDate: start),
                                  OutcomeValue(.integer(75 + i % 10), kind: "8462-4", units: "mmHg", createdDate: start)]
        case "229065009": values = [OutcomeValue(.boolean(i % 3 != 0), createdDate: start)]
        default: values = [OutcomeValue(.double(500), kind: "dose", units: "mg", createdDate: start)]
        }
        outcomes.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: occurrence, values: values,
                                         effectiveDate: start, timezone: zone)))
    }
    try store.add(outcomes)
    return (store, mappings)
}

let benchmarks: @Sendable () -> Void = {
    Benchmark("Export 100,000 outcomes to a transaction Bundle file",
              configuration: .init(metrics: [.wallClock, .peakMemoryResident, .mallocCountTotal], maxDuration: .seconds(120), maxIterations: 3)) { benchmark in
        let (store, mappings) = try storeWithOutcomes(100_000)
        let export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: mappings, timeZone: zone))
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-benchmark-export-\(UUID().uuidString).json")
        benchmark.startMeasurement()
        // As caregate export --format bundle -o FILE does: streamed, entry by entry.
        let sink = try FHIROutput(path: output.path)
        let count = try export.writeBundle(to: sink)
        try sink.close()
        benchmark.stopMeasurement()
        precondition(count == 100_000, "exported \(count)")
        try? FileManager.default.removeItem(at: output)
    }
}
