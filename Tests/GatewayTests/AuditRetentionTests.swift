import CareStore
import FHIR
import Foundation
import Gateway
import GRDB
import PostgresNIO
import PostgresStore
import Testing

/// `audit.keep-days`: the old prefix archived as AuditEvents, then dropped; the rest verifies
/// from the anchor, and tampering after a prune is still found.
@Suite("Audit retention")
struct AuditRetentionTests {
    static let now = Date(timeIntervalSinceReferenceDate: 817_000_000)

    /// An entry `daysAgo` days before `now`.
    static func entry(daysAgo: Double, patient: String = "Patient/p1") -> AuditEntry {
        AuditEntry(recorded: now.addingTimeInterval(-daysAgo * 86_400), actor: .device("device-1"), action: .read, event: AuditEvent.pull,
                   patientID: patient, source: "203.0.113.7", outcome: .success, detail: "\(daysAgo) days ago")
    }

    @Test("entries past keep-days that open the chain are archived, then dropped; a newer entry stops the prefix; the rest verifies", arguments: Backend.allCases)
    func prune(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let archive = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-audit-archive-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: archive) }
        // Days ago: 40, 35, 31, then 5 (recent), then 33 (old, but after a recent one: kept), 2, 1.
        try store.record([40, 35, 31, 5, 33, 2, 1].map { Self.entry(daysAgo: $0) })
        let retention = AuditRetention(trail: store, keepDays: 30, archive: archive, observer: "ward-3")
        let pruned = try retention.prune(now: Self.now)
        #expect(pruned.dropped == 3 && pruned.file == "\(archive)/audit-events-from-1.ndjson")
        #expect(try store.auditEntries(AuditQuery()).map(\.sequence) == [4, 5, 6, 7])
        #expect(try store.auditAnchor()?.sequence == 3)
        #expect(try AuditChain.verify(store) == (4, nil))
        // The archive holds the dropped three as valid AuditEvents, oldest first; owner-only.
        let file = try #require(pruned.file)
        let events = try String(decoding: FileBytes.read(file), as: UTF8.self).split(separator: "\n").map { try FHIRJSONReader().read(String($0)).resource }
        #expect(events.map { $0.string("outcomeDesc") } == ["40.0 days ago", "35.0 days ago", "31.0 days ago"])
        for event in events { #expect(ResourceValidator().validate(event).isEmpty) }
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o600)
        // Nothing more is old enough; appends go on from the kept end and verify.
        let nothing = try retention.prune(now: Self.now)
        #expect(nothing.dropped == 0 && nothing.file == nil)
        try store.record([Self.entry(daysAgo: 0)])
        #expect(try AuditChain.verify(store) == (5, nil))
        // A month later the rest goes too, in a second file; the chain still verifies (empty but for the new entry).
        let later = try retention.prune(now: Self.now.addingTimeInterval(30 * 86_400))
        #expect(later.dropped == 4 && later.file == "\(archive)/audit-events-from-4.ndjson")
        #expect(try AuditChain.verify(store) == (1, nil))
        // Tampering after a prune is still found: the kept entry changed, or the anchor moved.
        try Backend.tamper(store, "UPDATE audit_entry SET detail = 'nothing' WHERE sequence = 8")
        #expect(try AuditChain.verify(store).break?.sequence == 8)
    }

    @Test("an archive that cannot be written drops nothing", arguments: Backend.allCases)
    func unwritableArchive(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let blocker = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-audit-blocker-\(UUID().uuidString)").path
        FileManager.default.createFile(atPath: blocker, contents: Data("a file, not a folder".utf8))
        defer { try? FileManager.default.removeItem(atPath: blocker) }
        try store.record([Self.entry(daysAgo: 90), Self.entry(daysAgo: 1)])
        #expect(throws: (any Error).self) { try AuditRetention(trail: store, keepDays: 30, archive: blocker + "/archive", observer: "x").prune(now: Self.now) }
        #expect(try store.auditEntries(AuditQuery()).count == 2 && store.auditAnchor() == nil)
        #expect(try AuditChain.verify(store) == (2, nil))
    }
}
