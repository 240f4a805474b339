// import-throughput: `caregate import` of all 20 Synthea bundles (../../shared/synthea, 25.5 MB),
// or of any files (--input), into an empty store with the shipped mappings (release build).
// Prints MB/s, store entries written per second, the share of time reading (parsing), mapping
// and storing, and the process's peak resident memory.
//
//   swift run -c release import-throughput [--runs N] [--input PATH] [--mode whole|staged] [--window N]
//                                          [--store postgres://… --store-password-file F]
//
// --mode whole: the whole run in memory on one core (FHIRImporter.run); staged (the default, as
// `caregate import` runs): staged on disk, one patient at a time, --window patients mapped at once.
// Run each mode in a process of its own: the peak memory is the process's.
// --store: into that PostgreSQL database (empty: one run, whatever --runs says) instead of a new
// SQLite file; the staging stays a SQLite file in a temporary folder, as `caregate import` has it.
import CareStore
import PostgresStore
import Foundation
import Gateway
import Mapping

var root = URL(fileURLWithPath: #filePath)
for _ in 0..<4 { root.deleteLastPathComponent() }
let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).map { arguments[$0 + 1] } }
let synthea = option("--input") ?? root.deletingLastPathComponent().appendingPathComponent("shared/synthea").path
guard FileManager.default.fileExists(atPath: synthea) else {
    print("SKIPPED: \(synthea) not found; the import benchmark needs ../shared")
    exit(0)
}
let postgres = option("--store")
let runs = postgres != nil ? 1 : option("--runs").map { Int($0)! } ?? 3
let staged = option("--mode") != "whole"
let window = option("--window").map { Int($0)! } ?? ProcessInfo.processInfo.activeProcessorCount
let bytes = ResourceFiles().files([synthea]).reduce(0) { $0 + ((try? FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0) }
let mappings = try MappingSet.load([root.appendingPathComponent("Mappings").path])
let zone = TimeZone(identifier: "America/New_York")!

var results: [(total: Double, report: ImportReport, written: Int)] = []
for run in 0..<runs {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-import-bench-\(getpid())-\(run)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let store: any CarePlanStore
    if let postgres {
        let location = try PostgresLocation(url: postgres)
        store = try PostgresCarePlanStore(location, password: try location.password(file: option("--store-password-file"),
                                                                                       environment: ProcessInfo.processInfo.environment))
    } else {
        store = try SQLiteCarePlanStore(path: directory.appendingPathComponent("store.sqlite").path)
    }
    sync()
    let start = ContinuousClock.now
    let importer = FHIRImporter(mappings: mappings, store: store, timeZone: zone)
    let report = staged ? try await StagedImport(importer: importer, window: window).run([synthea], staging: try SQLiteImportStaging(directory: directory.path),
                                                                                  spill: SpilledNotes(directory: directory.path))
        : importer.run([synthea])
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
var usage = rusage()
getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
print(String(format: "import of %d files (%.1f MB, %d resources) into an empty store (%@), ", best.report.files, Double(bytes) / 1e6, best.report.resources,
             postgres == nil ? "SQLite" : "PostgreSQL")
      + (staged ? "staged, \(window) at once" : "whole run in memory") + ", best of \(runs) runs:")
print(String(format: "  %.2f s (median %.2f s): %.1f MB/s, %.0f resources/s, %d store entries written (%.0f entries/s)",
             best.total, median, Double(bytes) / 1e6 / best.total, Double(best.report.resources) / best.total, best.written, Double(best.written) / best.total))
print(String(format: "  reading and parsing %.0f%%, mapping %.0f%%, storing %.0f%% (%.2f s, %.2f s, %.2f s)",
             s.reading / phases * 100, s.mapping / phases * 100, s.storing / phases * 100, s.reading, s.mapping, s.storing))
print(String(format: "  peak resident memory %.0f MB", Double(usage.ru_maxrss) / 1024))
print("  changes: \(best.report.counts.map { "\($0.key.rawValue) \($0.value)" }.sorted().joined(separator: ", ")); notes: \(best.report.noteCounts.values.reduce(0, +)) (\(best.report.notes.count) in memory)")
