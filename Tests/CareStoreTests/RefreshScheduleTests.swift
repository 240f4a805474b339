import CareStore
import Foundation
import Testing

@Suite("The refresh schedule, on every backend")
struct RefreshScheduleTests {
    func patients(_ range: Range<Int>) -> [EnrolledPatient] {
        range.map { EnrolledPatient(storeID: "Patient/p\($0)", ehrID: "p\($0)") }
    }

    @Test("patients are scheduled due at once and taken off with their last device; a claim goes to one worker; a dead worker's patient comes back when its lease ends, and its late finish changes nothing", arguments: Backend.allCases)
    func claims(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
        #expect(try store.nextRefreshDue() == nil)
        #expect(try store.scheduleRefreshes(patients(0..<3), now: start) == 3)
        #expect(try store.scheduleRefreshes(patients(0..<3), now: start.addingTimeInterval(5)) == 0, "scheduled once")
        #expect(try store.nextRefreshDue() == start)
        let first = try #require(try store.claimRefresh(worker: "a", lease: 60, now: start.addingTimeInterval(1)))
        #expect(first.patient == patients(0..<1)[0] && first.since == nil, "never refreshed: pulled whole")
        let second = try #require(try store.claimRefresh(worker: "b", lease: 60, now: start.addingTimeInterval(2)))
        #expect(second.patient.storeID == "Patient/p1", "a claimed patient is passed by")
        try store.finishRefresh(second, worker: "b", next: start.addingTimeInterval(902), succeeded: true)

        // p2 leaves (its last device revoked); p0's worker dies with its claim.
        try store.scheduleRefreshes(patients(0..<2), now: start.addingTimeInterval(3))
        #expect(try store.claimRefresh(worker: "b", lease: 60, now: start.addingTimeInterval(30)) == nil, "p0 is leased, p1 not due, p2 gone")
        #expect(try store.nextRefreshDue() == start.addingTimeInterval(61), "due when p0's lease ends")
        let taken = try #require(try store.claimRefresh(worker: "b", lease: 60, now: start.addingTimeInterval(61)))
        #expect(taken.patient.storeID == "Patient/p0")
        try store.finishRefresh(first, worker: "a", next: start.addingTimeInterval(5), succeeded: true)
        #expect(try store.claimRefresh(worker: "c", lease: 60, now: start.addingTimeInterval(62)) == nil, "the dead worker's late finish ended nothing")
        try store.finishRefresh(taken, worker: "b", next: start.addingTimeInterval(961), succeeded: false)
        #expect(try store.nextRefreshDue() == start.addingTimeInterval(902))
        let again = try #require(try store.claimRefresh(worker: "c", lease: 60, now: start.addingTimeInterval(902)))
        #expect(again.patient.storeID == "Patient/p1" && again.since == start.addingTimeInterval(2), "changes since the last success began")
        let failed = try #require(try store.claimRefresh(worker: "c", lease: 60, now: start.addingTimeInterval(961)))
        #expect(failed.patient.storeID == "Patient/p0" && failed.since == nil, "a failed refresh is no success to count from")
    }

    @Test("a notification makes its patients due and pulled whole; one that comes during a refresh keeps the patient due after it; unnamed, it names everyone", arguments: Backend.allCases)
    func notifications(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
        try store.scheduleRefreshes(patients(0..<3), now: start)
        for n in 0..<3 {
            let claim = try #require(try store.claimRefresh(worker: "w", lease: 60, now: start.addingTimeInterval(Double(n))))
            try store.finishRefresh(claim, worker: "w", next: claim.claimedAt.addingTimeInterval(900), succeeded: true)
        }
        #expect(try store.requestRefresh(ehrIDs: ["p1", "not-enrolled"], now: start.addingTimeInterval(100)) == 1)
        let notified = try #require(try store.claimRefresh(worker: "w", lease: 60, now: start.addingTimeInterval(101)))
        #expect(notified.patient.storeID == "Patient/p1" && notified.since == nil)
        #expect(try store.requestRefresh(ehrIDs: ["p1"], now: start.addingTimeInterval(102)) == 1, "the EHR changed the plan again meanwhile")
        try store.finishRefresh(notified, worker: "w", next: start.addingTimeInterval(1001), succeeded: true)
        let followUp = try #require(try store.claimRefresh(worker: "w", lease: 60, now: start.addingTimeInterval(103)))
        #expect(followUp.patient.storeID == "Patient/p1" && followUp.since == nil, "the notification during the refresh is not lost")
        try store.finishRefresh(followUp, worker: "w", next: start.addingTimeInterval(1003), succeeded: true)
        #expect(try store.claimRefresh(worker: "w", lease: 60, now: start.addingTimeInterval(104)) == nil)

        #expect(try store.requestRefresh(ehrIDs: nil, now: start.addingTimeInterval(200)) == 3)
        var claimed: [String] = []
        while let claim = try store.claimRefresh(worker: "w", lease: 60, now: start.addingTimeInterval(201)) {
            #expect(claim.since == nil)
            claimed.append(claim.patient.storeID)
        }
        #expect(claimed.sorted() == patients(0..<3).map(\.storeID))
    }

    @Test("workers over two handles claiming at once each refresh patients of their own, and together every due one once", arguments: Backend.allCases)
    func concurrentClaims(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let other = try Backend.reopen(store)
        let now = Date()
        try store.scheduleRefreshes(patients(0..<120), now: now.addingTimeInterval(-1))
        let claimed = try concurrently(8) { worker in
            let handle: any RefreshSchedule = worker % 2 == 0 ? store : other
            var mine: [RefreshClaim] = []
            while let claim = try handle.claimRefresh(worker: "w\(worker)", lease: 600, now: now) { mine.append(claim) }
            for claim in mine { try handle.finishRefresh(claim, worker: "w\(worker)", next: now.addingTimeInterval(900), succeeded: true) }
            return mine.map(\.patient.storeID)
        }
        let all = claimed.flatMap { $0 }
        #expect(all.count == 120 && Set(all).count == 120, "\(all.count) refreshes of 120 patients")
        #expect(try store.nextRefreshDue() == now.addingTimeInterval(900))
    }
}
