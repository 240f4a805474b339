// import-throughput: `caregate import` of all 20 Synthea bundles (../../shared/synthea, 25.5 MB)
// into an empty store with the shipped mappings (release build). Prints MB/s, store entries
// written per second, and the share of time reading (parsing), mapping and storing.
//
//   swift run -c release import-throughput [--runs N]
import CareStore
import Foundation
import Gateway
import Mapping

var root = URL(fileURLWithPath: #filePath)
for _ in 0..<4 { root.deleteLastPathComponent() }
let synthea = root.deletingLastPathComponent().appendingPathComponent("shared/synthea").path
guard FileManager.default.fileExists(atPath: synthea) else {
    print("SKIPPED: \(synthea) not found; the import benchmark needs ../shared")
    exit(0)
}
let arguments = CommandLine.arguments
let runs = arguments.firstIndex(of: "--runs").map { Int(arguments[$0 + 1])! } ?? 3
let bytes = (try FileManager.default.contentsOfDirectory(atPath: synthea)).filter { $0.hasSuffix(".json") }
    .reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: synthea + "/" + $1)[.size] as? Int) ?? 0) }
let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
let zone = TimeZone(identifier: "America/New_York")!

var results: [(total: Double, report: ImportReport, written: Int)] = []
for run in 0..<runs {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-import-bench-\(getpid())-\(run)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let store = try SQLiteCarePlanStore(path: directory.appendingPathComponent("store.sqlite").path)
    sync()
    let start = ContinuousClock.now
    let report = FHIRImporter(mappings: mappings, store: store, timeZone: zone).run([synthea])
    let elapsed = ContinuousClock.now - start
    let total = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    let written = try store.changes(since: 0, limit: nil).entities.count
    results.append((total, report, written))
    try? FileManager.default.removeItem(at: directory)
}
let best = results.min { $0.total < $1.total }!
let median = results.map(\.total).sorted()[results.count / 2]
let s = best.report.seconds
let phases = s.reading + s.mapping + s.storing
print(String(format: "import of %d Synthea bundles (%.1f MB, %d resources) into an empty store, best of %d runs:",
             best.report.files, Double(bytes) / 1e6, best.report.resources, runs))
print(String(format: "  %.2f s (median %.2f s): %.1f MB/s, %.0f resources/s, %d store entries written (%.0f entries/s)",
             best.total, median, Double(bytes) / 1e6 / best.total, Double(best.report.resources) / best.total, best.written, Double(best.written) / best.total))
print(String(format: "  reading and parsing %.0f%%, mapping %.0f%%, storing %.0f%% (%.2f s, %.2f s, %.2f s)",
             s.reading / phases * 100, s.mapping / phases * 100, s.storing / phases * 100, s.reading, s.mapping, s.storing))
print("  changes: \(best.report.counts.map { "\($0.key.rawValue) \($0.value)" }.sorted().joined(separator: ", ")); notes: \(best.report.notes.count)")
