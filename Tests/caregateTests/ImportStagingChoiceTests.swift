import CareStore
import Foundation
import Testing
@testable import caregate

@Suite("Where caregate import stages its files")
struct ImportStagingChoiceTests {
    @Test("files of at most the in-memory limit in all (256 MiB here, a sixteenth of memory on a small machine, 64 MiB at least) are staged in memory; more go to a scratch database beside the store")
    func choice() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-staging-choice-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let memory = ProcessInfo.processInfo.physicalMemory
        #expect(InMemoryImportStaging.limit == (memory >= 4 << 30 ? 256 << 20 : max(64 << 20, Int(memory / 16))))
        let small = folder + "/small.json", exact = folder + "/exact.ndjson", over = folder + "/over.ndjson"
        try Data("{}".utf8).write(to: URL(fileURLWithPath: small))
        // Sparse files: their size is what counts, not what they hold.
        for (path, size) in [(exact, InMemoryImportStaging.limit - 2), (over, InMemoryImportStaging.limit - 1)] {
            #expect(FileManager.default.createFile(atPath: path, contents: nil))
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            try handle.truncate(atOffset: UInt64(size))
            try handle.close()
        }
        let command = try ImportCommand.parse(["--store", folder + "/care.sqlite", small])
        #expect(try command.staging(holding: [small]) is InMemoryImportStaging)
        #expect(try command.staging(holding: [small, exact]) is InMemoryImportStaging)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).allSatisfy { !$0.hasPrefix("caregate-staging") })
        let large = try command.staging(holding: [small, over])
        #expect(large is SQLiteImportStaging)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).contains { $0.hasPrefix("caregate-staging") })
    }
}
