// push-throughput: the gateway's push (outbox, export, conditional batch writes, bookkeeping,
// Provenance) against posting the same batch Bundles straight to a FHIR server, each on its own
// fresh server, one after the other in one run. Prints Observations/s for both and the ratio.
//
//   ./push-vs-ingest.sh [--outcomes N] [--batch B]      (starts the two servers)
//   swift run -c release push-throughput --direct URL --push URL [--outcomes N] [--batch B]
import CareStore
import FHIR
import FHIRClient
import Foundation
import Gateway
import Mapping

let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).map { arguments[$0 + 1] } }
guard let directBase = option("--direct"), let pushBase = option("--push") else {
    print("usage: push-throughput --direct URL --push URL [--outcomes N] [--batch B]")
    exit(64)
}
let count = Int(option("--outcomes") ?? "2000")!
let batchSize = Int(option("--batch") ?? "50")!

var root = URL(fileURLWithPath: #filePath)
for _ in 0..<4 { root.deleteLastPathComponent() }
let zone = TimeZone(identifier: "America/New_York")!
let start = ISO8601DateFormatter().date(from: "2026-11-01T09:00:00-04:00")!
let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
let store = try SQLiteCarePlanStore(path: FileManager.default.temporaryDirectory.appendingPathComponent("caregate-push-bench-\(UUID().uuidString).sqlite").path)
_ = FHIRImporter(mappings: mappings, store: store, timeZone: zone, now: start)
    .run([root.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path])
let tasks = try store.fetchTasks().filter { $0.schedule.elements.allSatisfy { $0.end == nil } }  // open-ended schedules
try store.add((0..<count).map { i in
    .outcome(Outcome(taskUUID: tasks[i % tasks.count].uuid, taskOccurrenceIndex: 1000 + i / tasks.count,
                     values: [OutcomeValue(.double(Double(i % 50)), kind: "dose", units: "mg", createdDate: start)], effectiveDate: start, timezone: zone))
})
let export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: mappings, timeZone: zone))

func seconds(_ d: Duration) -> Double { Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18 }

// Direct: the same conditional batch Bundles, built beforehand, posted one after another.
let exportStart = ContinuousClock.now
let exported = try export.observations()
let exporting = seconds(ContinuousClock.now - exportStart)
if arguments.contains("--export-only") {
    print(String(format: "exporting %d outcomes: %.2f s", count, exporting))
    exit(0)
}
let bundles = stride(from: 0, to: exported.count, by: batchSize).map { i in
    FHIRJSONWriter(pretty: false).write(export.bundle(Array(exported[i..<min(i + batchSize, exported.count)]), type: "batch"))
}
let transport = CurlTransport()
var created = 0
let directStart = ContinuousClock.now
for body in bundles {
    let response = try await transport.send(HTTPRequest(method: "POST", url: directBase, headers: [
        ("Content-Type", "application/fhir+json"), ("Accept", "application/fhir+json"),
    ], body: body, timeout: 120))
    guard response.status == 200, let answer = try? FHIRJSONReader().read(response.body).resource else {
        print("direct: HTTP \(response.status)")
        exit(1)
    }
    created += FHIRRESTClient.entryOutcomes(answer).filter(\.succeeded).count
}
let direct = seconds(ContinuousClock.now - directStart)

// Through the gateway: queue, export, send in batches, mark each pushed, Provenance.
var push = OutcomePush(outbox: store, export: export, client: FHIRRESTClient(base: pushBase))
push.batchSize = batchSize
let pushStart = ContinuousClock.now
let queued = try push.enqueue()
let queuing = seconds(ContinuousClock.now - pushStart)
let report = try await push.run()
let pushed = seconds(ContinuousClock.now - pushStart)
precondition(queued == count)

let directRate = Double(created) / direct
let pushRate = Double(report.pushed.count) / pushed
print("outcomes: \(count), batch size: \(batchSize)")
print(String(format: "direct ingest (same batches, posted straight): %d created in %.2f s = %.0f Observations/s", created, direct, directRate))
print(String(format: "caregate push (outbox, export, batches, bookkeeping): %d pushed in %.2f s = %.0f Observations/s", report.pushed.count, pushed, pushRate))
print(String(format: "exporting %d outcomes alone: %.2f s", count, exporting))
print(String(format: "  of which queueing (export and outbox insert): %.2f s", queuing))
print(String(format: "push / direct: %.2f× (the gateway's overhead: %.0f%%)", pushRate / directRate, (directRate / pushRate - 1) * 100))
if report.pushed.count != count || created != count { print("warning: not every outcome arrived (\(report.failed.count) refused, \(report.deferred.count) deferred)") }
