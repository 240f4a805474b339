import CareStore
import Foundation
import Testing
@testable import Gateway

/// The recorder under a flood of refused requests and a store that refuses writes: the trail
/// and the memory waiting for it stay bounded, and every access is still accounted for.
@Suite("Audit recorder: bounded under floods and outages")
struct AuditRecorderTests {
    /// Makes the store refuse every new audit entry, as a full disk or a lost database would.
    static func outage(_ store: Backend.Store, on: Bool) throws {
        if store is SQLiteCarePlanStore {
            try Backend.tamper(store, on ? "CREATE TRIGGER outage BEFORE INSERT ON audit_entry BEGIN SELECT RAISE(ABORT, 'the disk is full'); END"
                                         : "DROP TRIGGER outage")
        } else {
            try Backend.tamper(store, on ? "ALTER TABLE audit_entry ADD CONSTRAINT outage CHECK (false) NOT VALID" : "ALTER TABLE audit_entry DROP CONSTRAINT outage")
        }
    }

    static let start = Date(timeIntervalSince1970: 1_796_000_000)

    static func refused(_ i: Int, from source: String, at: TimeInterval) -> AuditEntry {
        AuditEntry(recorded: start.addingTimeInterval(at), actor: .device("(no valid token)"), action: .read, event: AuditEvent.pull,
                   patientID: nil, source: source, outcome: .refused, detail: "no valid token")
    }

    static func read(_ patient: String, at: TimeInterval) -> AuditEntry {
        AuditEntry(recorded: start.addingTimeInterval(at), actor: .device("device-1"), action: .read, event: AuditEvent.pull,
                   patientID: patient, source: "192.0.2.7", outcome: .success, detail: "3 versions")
    }

    /// The count an entry stands for: one, or the number its summary or repeat count gives.
    static func count(_ entry: AuditEntry) -> Int {
        guard let detail = entry.detail else { return 1 }
        if entry.event == AuditEvent.refusalsSummarised { return Int(detail.prefix { $0.isNumber })! }
        if detail.contains(" more like this from ") { return Int(detail.prefix { $0.isNumber })! }
        return 1
    }

    @Test("while the store refuses writes, the waiting entries stay within the bound: the oldest refusals are summarised with their count, no patient's access is", arguments: Backend.allCases)
    func boundedInAnOutage(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let recorder = AuditRecorder(trail: store, capacity: 100, repeatWindow: 0)
        try Self.outage(store, on: true)
        for i in 0..<500 {
            recorder.note(Self.refused(i, from: "198.51.100.\(i % 200)", at: Double(i)))
            if i % 10 == 0 { recorder.note(Self.read("Patient/p\(i / 10)", at: Double(i))) }
            if i % 100 == 99 { #expect(throws: StoreError.self) { try recorder.flush(now: Self.start.addingTimeInterval(Double(i))) } }
        }
        #expect(recorder.pendingCount <= 101, "\(recorder.pendingCount) entries waiting")
        #expect(try store.auditEntries(AuditQuery()).isEmpty)
        try Self.outage(store, on: false)
        let written = try recorder.flush(now: Self.start.addingTimeInterval(600))
        let entries = try store.auditEntries(AuditQuery()).map(\.entry)
        #expect(entries.count == written && written <= 101)
        // Every patient's access is there, one entry each, in order.
        #expect(entries.filter { $0.patientID != nil }.map(\.patientID) == (0..<50).map { "Patient/p\($0)" })
        // The summary comes first and with the refusals kept accounts for all 500.
        let summary = try #require(entries.first)
        #expect(summary.event == AuditEvent.refusalsSummarised && summary.outcome == .refused, "\(summary)")
        #expect(summary.detail?.contains("summarised while the trail could not be written") == true)
        #expect(entries.filter { $0.patientID == nil }.map(Self.count).reduce(0, +) == 500)
        #expect(entries.filter { $0.event == AuditEvent.refusalsSummarised }.count == 1)
        #expect(try AuditChain.verify(store).break == nil)
    }

    @Test("a flood of refused requests from one address is one entry in full and one with the count per window; the count of a window still open is written when the recorder closes", arguments: Backend.allCases)
    func repeatsPerWindow(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let recorder = AuditRecorder(trail: store, repeatWindow: 60)
        for i in 0..<1_000 { recorder.note(Self.refused(i, from: "198.51.100.2", at: Double(i) * 0.05)) }
        for i in 0..<3 { recorder.note(Self.refused(i, from: "203.0.113.9", at: Double(i))) }
        recorder.note(Self.read("Patient/ana", at: 1))
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(2)) == 3, "the first of each address, and the patient's access")
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(30)) == 0, "the windows are still open")
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(61)) == 2)
        var entries = try store.auditEntries(AuditQuery()).map(\.entry)
        let flood = entries.filter { $0.source == "198.51.100.2" }
        #expect(flood.count == 2 && flood.map(Self.count).reduce(0, +) == 1_000, "\(flood.map(\.detail))")
        #expect(flood.last?.detail?.hasPrefix("999 more like this from 198.51.100.2 between ") == true, "\(flood.last?.detail ?? "")")
        #expect(entries.filter { $0.source == "203.0.113.9" }.map(Self.count).reduce(0, +) == 3)
        // After the window, the next refusal is written in full again; its window's count when the recorder closes.
        recorder.note(Self.refused(0, from: "198.51.100.2", at: 100))
        recorder.note(Self.refused(1, from: "198.51.100.2", at: 101))
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(102)) == 1)
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(103), closing: true) == 1)
        entries = try store.auditEntries(AuditQuery()).map(\.entry)
        #expect(entries.filter { $0.source == "198.51.100.2" }.map(Self.count).reduce(0, +) == 1_002)
        // A refusal tied to a patient (another patient's outcome pushed) is never counted away.
        for i in 0..<5 {
            recorder.note(AuditEntry(recorded: Self.start.addingTimeInterval(200 + Double(i)), actor: .device("device-1"), action: .update, event: AuditEvent.push,
                                     patientID: "Patient/ana", source: "192.0.2.7", outcome: .refused, detail: "another patient's task"))
        }
        #expect(try recorder.flush(now: Self.start.addingTimeInterval(210)) == 5)
    }
}
