import CareStore
import Foundation
import Testing

@Suite("The import log")
struct ImportLogTests {
    @Test("runs are kept with their counts and report, listed newest first without reports, and survive reopening the store")
    func runs() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-import-log-\(UUID().uuidString).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let started = Date(timeIntervalSinceReferenceDate: 815_202_000)
        do {
            let store = try SQLiteCarePlanStore(path: path)
            #expect(try store.importRuns(limit: 10).isEmpty)
            let first = try store.recordImport(ImportRun(startedAt: started, source: "a.json", counts: ["files": 1, "create": 12], report: Array(#"{"notes":[]}"#.utf8)))
            let second = try store.recordImport(ImportRun(startedAt: started.addingTimeInterval(60), source: "EHR refresh of Patient/p", counts: ["update": 2], report: [0x7B, 0x7D]))
            #expect(second > first)
        }
        let store = try SQLiteCarePlanStore(path: path)
        let runs = try store.importRuns(limit: 10)
        #expect(runs.map(\.source) == ["EHR refresh of Patient/p", "a.json"])
        #expect(runs.allSatisfy { $0.report.isEmpty })
        #expect(runs[1].counts == ["files": 1, "create": 12] && runs[1].startedAt == started)
        #expect(try store.importRuns(limit: 1).count == 1)
        #expect(try store.importRun(id: runs[1].id)?.report == Array(#"{"notes":[]}"#.utf8))
        #expect(try store.importRun(id: 999) == nil)
    }
}
