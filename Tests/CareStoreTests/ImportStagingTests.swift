import Foundation
import Testing
@testable import CareStore

/// The staging areas an import may use: a scratch SQLite file, or memory (a small import).
enum StagingKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case file, memory
    var testDescription: String { rawValue }

    /// A new, empty staging area of this kind; a file's goes in `directory`.
    func make(in directory: String) throws -> any ImportStaging {
        switch self {
        case .file: try SQLiteImportStaging(directory: directory)
        case .memory: InMemoryImportStaging()
        }
    }
}

@Suite("Import staging: resources kept on disk or in memory under their patient")
struct ImportStagingTests {
    /// A new folder for a staging file, removed with `defer`.
    static func folder() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-staging-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    static func item(_ group: String, _ identity: String?, url: String? = nil, _ text: String) -> StagedItem {
        StagedItem(group: group, identity: identity, fullURL: url, container: 0, origin: "test.ndjson", bytes: Array(text.utf8))
    }

    @Test("items are found by identity (through the map in memory) and by full URL; an identity never staged finds nothing; the count is what was staged, a replaced item counted once",
          arguments: StagingKind.allCases)
    func lookUps(kind: StagingKind) throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let staging = try kind.make(in: directory)
        let sequence = try staging.write { writer in
            try writer.insert(Self.item("Patient/p1", "Patient/p1", #"{"resourceType":"Patient","id":"p1"}"#))
            try writer.insert(Self.item("", "Practitioner/d1", #"{"resourceType":"Practitioner","id":"d1"}"#))
            try writer.insert(Self.item("Patient/p2", nil, url: "urn:uuid:0001", #"{"resourceType":"Observation"}"#))
            return try writer.insert(Self.item("Patient/p1", "Observation/o1", #"{"resourceType":"Observation","id":"o1"}"#))
        }
        try staging.write { writer in
            let earlier = try #require(try writer.item(identity: "Observation/o1"))
            #expect(earlier.sequence == sequence)
            try writer.replace(earlier.sequence, with: Self.item("Patient/p1", "Observation/o1", #"{"resourceType":"Observation","id":"o1","status":"final"}"#))
            #expect(try writer.item(identity: "Observation/o2") == nil)
        }
        #expect(try staging.count() == 4)
        let found = try staging.items(identities: ["Practitioner/d1", "Observation/o1", "Practitioner/unknown"], fullURLs: ["urn:uuid:0001"])
        #expect(Set(found.map { $0.identity ?? $0.fullURL ?? "" }) == ["Practitioner/d1", "Observation/o1", "urn:uuid:0001"])
        #expect(found.first { $0.identity == "Observation/o1" }.map { String(decoding: $0.bytes, as: UTF8.self) }?.contains("final") == true)
        #expect(try staging.items(identities: ["Patient/p3"], fullURLs: []).isEmpty)
        #expect(try staging.groups() == ["Patient/p1", "Patient/p2"])
        #expect(try staging.items(group: "Patient/p1").map(\.identity) == ["Patient/p1", "Observation/o1"])
        // A group read with only some bytes: the others are read when asked for, as staged (the replacement's).
        let outline = try staging.items(group: "Patient/p1") { $0.identity == "Patient/p1" }
        #expect(outline.map { String(decoding: $0.bytes, as: UTF8.self) } == [#"{"resourceType":"Patient","id":"p1"}"#, ""])
        #expect(outline.map(\.origin) == ["test.ndjson", "test.ndjson"] && outline.map(\.sequence) == [1, sequence])
        let later = try staging.readingBytes(of: [outline[1]])
        #expect(later.map { String(decoding: $0.bytes, as: UTF8.self) } == [#"{"resourceType":"Observation","id":"o1","status":"final"}"#])
        #expect(later.map(\.identity) == ["Observation/o1"])
    }

    @Test("groups are read back on several threads at once, each through a connection of its own; what is staged after a read is seen by the next")
    func concurrentReads() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-staging-test-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let staging = try SQLiteImportStaging(directory: directory)
        try staging.write { writer in
            for p in 0..<40 {
                for o in 0..<5 { try writer.insert(Self.item("Patient/p\(p)", "Observation/p\(p)-\(o)", #"{"resourceType":"Observation"}"#)) }
            }
        }
        let groups = try staging.groups()
        #expect(groups.count == 40)
        let read = try await withThrowingTaskGroup(of: (String, [String?]).self) { tasks in
            for group in groups { tasks.addTask { (group, try staging.items(group: group).map(\.identity)) } }
            return try await tasks.reduce(into: [String: [String?]]()) { $0[$1.0] = $1.1 }
        }
        for p in 0..<40 { #expect(read["Patient/p\(p)"] == (0..<5).map { "Observation/p\(p)-\($0)" }) }
        #expect(staging.readers.withLock { $0.count } >= 1)
        try staging.write { try $0.insert(Self.item("Patient/p0", "Observation/p0-late", #"{"resourceType":"Observation"}"#)) }
        #expect(try staging.count() == 201)
        #expect(try staging.items(group: "Patient/p0").last?.identity == "Observation/p0-late")
    }

    @Test("a write whose body throws leaves nothing of it: items it added and replaced, their groups, identities and full URLs are as before",
          arguments: StagingKind.allCases)
    func failedWrite(kind: StagingKind) throws {
        let directory = try Self.folder()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let staging = try kind.make(in: directory)
        let first = try staging.write { writer in
            try writer.insert(Self.item("Patient/p1", "Patient/p1", #"{"resourceType":"Patient","id":"p1"}"#))
            return try writer.insert(Self.item("Patient/p1", "Observation/o1", url: "urn:uuid:o1", #"{"resourceType":"Observation","id":"o1"}"#))
        }
        struct Refused: Error {}
        #expect(throws: (any Error).self) {
            try staging.write { writer in
                try writer.replace(first, with: Self.item("Patient/p1", "Observation/o1", url: "urn:uuid:other", #"{"resourceType":"Observation","id":"o1","status":"final"}"#))
                try writer.insert(Self.item("Patient/p2", "Patient/p2", url: "urn:uuid:p2", #"{"resourceType":"Patient","id":"p2"}"#))
                try writer.insert(Self.item("Patient/p1", "Observation/o2", #"{"resourceType":"Observation","id":"o2"}"#))
                throw Refused()
            }
        }
        #expect(try staging.count() == 2)
        #expect(try staging.groups() == ["Patient/p1"])
        #expect(try staging.items(group: "Patient/p1").map { String(decoding: $0.bytes, as: UTF8.self) }
            == [#"{"resourceType":"Patient","id":"p1"}"#, #"{"resourceType":"Observation","id":"o1"}"#])
        #expect(try staging.items(identities: ["Patient/p2", "Observation/o2"], fullURLs: ["urn:uuid:p2", "urn:uuid:other"]).isEmpty)
        #expect(try staging.items(identities: [], fullURLs: ["urn:uuid:o1"]).map(\.sequence) == [first])
        // What comes next is staged as if the failed write had never been.
        let next = try staging.write { try $0.insert(Self.item("Patient/p3", "Patient/p3", #"{"resourceType":"Patient","id":"p3"}"#)) }
        #expect(next == 3)
        #expect(try staging.groups() == ["Patient/p1", "Patient/p3"])
    }

    @Test("in memory, groups are read back on several threads at once while another write goes on")
    func concurrentMemoryReads() async throws {
        let staging = InMemoryImportStaging()
        try staging.write { writer in
            for p in 0..<40 {
                for o in 0..<5 { try writer.insert(Self.item("Patient/p\(p)", "Observation/p\(p)-\(o)", #"{"resourceType":"Observation"}"#)) }
            }
        }
        let groups = try staging.groups()
        let read = try await withThrowingTaskGroup(of: (String, [String?]).self) { tasks in
            tasks.addTask { try staging.write { try $0.insert(Self.item("Patient/late", "Patient/late", "{}")) }; return ("", []) }
            for group in groups { tasks.addTask { (group, try staging.items(group: group).map(\.identity)) } }
            return try await tasks.reduce(into: [String: [String?]]()) { $0[$1.0] = $1.1 }
        }
        for p in 0..<40 { #expect(read["Patient/p\(p)"] == (0..<5).map { "Observation/p\(p)-\($0)" }) }
        #expect(try staging.count() == 201)
        #expect(try staging.groups().last == "Patient/late")
    }
}
