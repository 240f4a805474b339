import Foundation
import Testing
@testable import CareStore

@Suite("Scratch files beside the store")
struct ScratchFileTests {
    @Test("what a killed import left (its process gone) is removed when the next staging starts; files of live processes and the store stay")
    func abandoned() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-scratch-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A process that has exited: its pid names no process now.
        let gone = Process()
        gone.executableURL = URL(fileURLWithPath: "/bin/true")
        try gone.run()
        gone.waitUntilExit()
        let dead = gone.processIdentifier
        let left = ["caregate-staging-\(dead)-A.sqlite", "caregate-staging-\(dead)-A.sqlite-wal"]
        let kept = ["caregate-staging-\(getpid())-B.sqlite", "caregate-staging-1-C.sqlite", "caregate-notes-\(dead)-D.ndjson", "care.sqlite"]
        for name in left + kept { FileManager.default.createFile(atPath: "\(directory)/\(name)", contents: Data("x".utf8)) }
        let staging = try SQLiteImportStaging(directory: directory)
        let now = Set(try FileManager.default.contentsOfDirectory(atPath: directory))
        #expect(now.isDisjoint(with: left))
        // The notes are another kind of scratch file: left to the notes' own sweep.
        #expect(now.isSuperset(of: kept))
        #expect(now.contains { $0.hasPrefix("caregate-staging-\(getpid())-") && $0 != kept[0] })
        _ = staging
        #expect(ScratchFile.removeAbandoned(in: directory, prefix: "caregate-notes") == ["caregate-notes-\(dead)-D.ndjson"])
    }
}
