import CareStore
import Dispatch
import Foundation
import PostgresStore
import Testing

/// Runs `body` on `count` threads of its own at once (off Swift's cooperative pool: the stores
/// block, and a body may wait for another).
func concurrently<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
    let results = LockedResults<T>(count)
    let done = DispatchGroup()
    for i in 0..<count {
        done.enter()
        Thread.detachNewThread {
            results.set(i, Result { try body(i) })
            done.leave()
        }
    }
    done.wait()
    return try results.values.map { try $0!.get() }
}

final class LockedResults<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [Result<T, any Error>?]
    init(_ count: Int) { stored = Array(repeating: nil, count: count) }
    func set(_ i: Int, _ value: Result<T, any Error>) { lock.lock(); stored[i] = value; lock.unlock() }
    var values: [Result<T, any Error>?] { lock.lock(); defer { lock.unlock() }; return stored }
}

func outboxItem(_ n: Int) -> OutboxItem {
    OutboxItem(versionUUID: UUID(), entityID: "patient-\(n % 3)/outcome-\(n)", idempotencyKey: "urn:caregate:outcome|patient-\(n % 3)/outcome-\(n)",
               payload: Array(#"{"resourceType":"Observation","n":\#(n)}"#.utf8))
}

@Suite("The push outbox, on every backend")
struct OutboxBackendTests {
    @Test("a version is queued once; deliveries and dead letters are recorded with their attempts; counts, lists and last deliveries read back", arguments: Backend.allCases)
    func bookkeeping(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let items = (0..<5).map(outboxItem)
        #expect(try store.enqueue(items) == 5)
        #expect(try store.enqueue(items + [outboxItem(5)]) == 1)
        #expect(try store.outboxEntities(versions: [items[2].versionUUID, UUID()]) == [items[2].versionUUID: items[2].entityID])
        #expect(try store.outbox(state: .queued, limit: 10).map(\.versionUUID).prefix(5) == items.map(\.versionUUID)[...])
        try store.record([.pushed(items[0].versionUUID, location: "Observation/1/_history/1"),
                          .failed(items[1].versionUUID, error: "HTTP 422: no code", dead: true),
                          .failed(items[2].versionUUID, error: "HTTP 503", dead: false)])
        #expect(try store.outboxCounts() == OutboxCounts(queued: 4, pushed: 1, failed: 1))
        let pushed = try #require(try store.latestOutbox(state: .pushed, limit: 5).first)
        #expect(pushed.remoteLocation == "Observation/1/_history/1" && pushed.attempts == 1 && pushed.finishedAt != nil && pushed.payload == items[0].payload)
        let retried = try #require(try store.outbox(state: .queued, limit: 10).first { $0.versionUUID == items[2].versionUUID })
        #expect(retried.attempts == 1 && retried.lastError == "HTTP 503" && retried.finishedAt == nil)
        #expect(Set(try store.lastPushed(entityIDs: items.map(\.entityID)).keys) == [items[0].entityID])
        #expect(try store.forgetFailed(versions: [items[0].versionUUID, items[1].versionUUID]) == 1, "only dead letters are forgotten")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 4, pushed: 1, failed: 0))
        #expect(try store.enqueue([items[1]]) == 1, "a forgotten dead letter can be queued again")
    }

    @Test("workers claiming at once each get items of their own, and together all of them", arguments: Backend.allCases)
    func concurrentClaims(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let items = (0..<60).map(outboxItem)
        try store.enqueue(items)
        let claimed = try concurrently(4) { worker in
            var mine: [UUID] = []
            while true {
                let batch = try store.claim(limit: 4, worker: "worker-\(worker)", lease: 600, now: Date())
                if batch.isEmpty { return mine }
                mine += batch.map(\.versionUUID)
                try store.record(batch.map { .pushed($0.versionUUID, location: nil) })
            }
        }
        let all = claimed.flatMap { $0 }
        #expect(all.count == 60 && Set(all) == Set(items.map(\.versionUUID)), "\(all.count) claims for 60 items")
        #expect(try store.outboxCounts() == OutboxCounts(queued: 0, pushed: 60, failed: 0))
    }

    @Test("a dead worker's claims come back when its lease ends; a failure in passing keeps the lease until the worker releases it", arguments: Backend.allCases)
    func leases(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let items = (0..<4).map(outboxItem)
        try store.enqueue(items)
        let start = Date()
        let dead = try store.claim(limit: 2, worker: "dies", lease: 60, now: start)
        #expect(dead.map(\.versionUUID) == items.prefix(2).map(\.versionUUID), "oldest first")
        let other = try store.claim(limit: 10, worker: "lives", lease: 60, now: start.addingTimeInterval(30))
        #expect(other.map(\.versionUUID) == items.suffix(2).map(\.versionUUID), "leased items are passed by")
        try store.record([.failed(other[0].versionUUID, error: "HTTP 503", dead: false), .pushed(other[1].versionUUID, location: nil)])
        #expect(try store.claim(limit: 10, worker: "third", lease: 60, now: start.addingTimeInterval(31)).isEmpty)
        let back = try store.claim(limit: 10, worker: "third", lease: 60, now: start.addingTimeInterval(61))
        #expect(Set(back.map(\.versionUUID)) == Set(dead.map(\.versionUUID)), "the dead worker's items, after its lease")
        try store.release(worker: "lives")
        #expect(try store.claim(limit: 10, worker: "fourth", lease: 60, now: start.addingTimeInterval(62)).map(\.versionUUID) == [other[0].versionUUID])
    }
}

@Suite("Devices and enrollment codes, on every backend")
struct DeviceRegistryBackendTests {
    func device(_ n: Int) -> Device {
        Device(id: "dev-\(n)", patientID: "claimed-by-device", tokenHash: String(repeating: "\(n % 10)", count: 64), enrolledAt: Date(timeIntervalSinceReferenceDate: 8e8 + Double(n)))
    }

    @Test("a code enrolls one device, for the code's patient, however many redeem it at once; an expired code enrolls none", arguments: Backend.allCases)
    func singleUse(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let now = Date()
        try store.addEnrollment(codeHash: "code-a", patientID: "maria-lopez", expires: now.addingTimeInterval(600))
        try store.addEnrollment(codeHash: "code-old", patientID: "maria-lopez", expires: now.addingTimeInterval(-1))
        let devices = (0..<8).map(device)
        let enrolled = try concurrently(8) { i in try store.redeemEnrollment(codeHash: "code-a", device: devices[i], now: now) }.compactMap { $0 }
        #expect(enrolled.count == 1 && enrolled.first?.patientID == "maria-lopez")
        #expect(try store.redeemEnrollment(codeHash: "code-old", device: device(9), now: now) == nil)
        #expect(try store.devices(patientID: nil).map(\.id) == enrolled.map(\.id))
    }

    @Test("devices are found by token hash and by id, listed by patient in enrollment order, revoked once, and keep their last sync", arguments: Backend.allCases)
    func lifecycle(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let now = Date()
        for (n, patient) in [(1, "maria"), (2, "zoe"), (3, "maria")] {
            try store.addEnrollment(codeHash: "code-\(n)", patientID: patient, expires: now.addingTimeInterval(600))
            _ = try store.redeemEnrollment(codeHash: "code-\(n)", device: device(n), now: now)
        }
        #expect(try store.devices(patientID: "maria").map(\.id) == ["dev-1", "dev-3"])
        #expect(try store.device(tokenHash: device(2).tokenHash)?.patientID == "zoe")
        #expect(try store.device(tokenHash: String(repeating: "f", count: 64)) == nil)
        #expect(try store.device(id: "dev-2")?.patientID == "zoe" && store.device(id: "dev-3")?.patientID == "maria")
        #expect(try store.device(id: "dev-404") == nil)
        let revokedAt = Date(timeIntervalSinceReferenceDate: 8.1e8)
        #expect(try store.revokeDevice(id: "dev-3", at: revokedAt))
        #expect(try store.revokeDevice(id: "dev-3", at: revokedAt.addingTimeInterval(5)), "revoking again keeps the first time")
        #expect(try !store.revokeDevice(id: "dev-404", at: revokedAt))
        let synced = Date(timeIntervalSinceReferenceDate: 8.2e8)
        try store.recordSyncs(["dev-1": synced])
        let maria = try store.devices(patientID: "maria")
        #expect(maria.first?.lastSyncAt == synced && maria.last?.revokedAt == revokedAt)
    }
}

@Suite("The import log and Bulk Data fetches, on every backend")
struct ImportAndBulkLogBackendTests {
    @Test("runs keep counts and report, listed newest first without reports", arguments: Backend.allCases)
    func importRuns(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let first = try store.recordImport(ImportRun(startedAt: Date(timeIntervalSinceReferenceDate: 8e8), source: "a.json",
                                                     counts: ["files": 1, "created": 12], report: Array(#"{"files":1}"#.utf8)))
        let second = try store.recordImport(ImportRun(startedAt: Date(timeIntervalSinceReferenceDate: 8e8 + 60), source: "EHR refresh",
                                                      counts: ["failedPatients": 0], report: Array("{}".utf8)))
        let runs = try store.importRuns(limit: 10)
        #expect(runs.map(\.id) == [second, first] && runs.allSatisfy { $0.report.isEmpty })
        let run = try #require(try store.importRun(id: first))
        #expect(run.counts == ["files": 1, "created": 12] && run.source == "a.json" && run.report == Array(#"{"files":1}"#.utf8))
        #expect(run.startedAt == Date(timeIntervalSinceReferenceDate: 8e8))
        #expect(try store.importRun(id: 999_999) == nil)
    }

    @Test("a fetch under way is kept and replaced; finishing it keeps its transaction time as the source's last", arguments: Backend.allCases)
    func bulkFetches(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let started = Date(timeIntervalSinceReferenceDate: 8e8)
        try store.saveBulkFetch(BulkFetch(source: "https://ehr/fhir/Group/1/$export", statusURL: "https://ehr/status/1", startedAt: started))
        try store.saveBulkFetch(BulkFetch(source: "https://ehr/fhir/Group/1/$export", statusURL: "https://ehr/status/1", startedAt: started,
                                          manifest: Array("{}".utf8), downloaded: ["https://ehr/files/1.ndjson"]))
        let fetch = try #require(try store.bulkFetch(source: "https://ehr/fhir/Group/1/$export"))
        #expect(fetch.manifest == Array("{}".utf8) && fetch.downloaded == ["https://ehr/files/1.ndjson"] && fetch.startedAt == started)
        try store.finishBulkFetch(source: "https://ehr/fhir/Group/1/$export", transactionTime: "2026-11-27T10:00:00Z")
        #expect(try store.bulkFetch(source: "https://ehr/fhir/Group/1/$export") == nil)
        #expect(try store.lastTransactionTime(source: "https://ehr/fhir/Group/1/$export") == "2026-11-27T10:00:00Z")
        try store.finishBulkFetch(source: "https://ehr/fhir/Group/1/$export", transactionTime: nil)
        #expect(try store.lastTransactionTime(source: "https://ehr/fhir/Group/1/$export") == "2026-11-27T10:00:00Z")
    }
}

@Suite("Attempts and dashboard sessions, on every backend")
struct AccessLedgerBackendTests {
    @Test("a client's attempts are held to the limit in the window even when taken at once; a right one is given back; the window slides", arguments: Backend.allCases)
    func attempts(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let now = Date()
        let answers = try concurrently(16) { _ in try store.reserveAttempt(client: "203.0.113.7", limit: 5, window: 900, now: now) }
        #expect(answers.filter { $0 == nil }.count == 5, "\(answers)")
        #expect(answers.compactMap { $0 }.allSatisfy { $0 == 900 })
        #expect(try store.reserveAttempt(client: "198.51.100.1", limit: 5, window: 900, now: now) == nil, "another client has its own budget")
        try store.releaseAttempt(client: "203.0.113.7")
        #expect(try store.reserveAttempt(client: "203.0.113.7", limit: 5, window: 900, now: now.addingTimeInterval(1)) == nil)
        #expect(try store.reserveAttempt(client: "203.0.113.7", limit: 5, window: 900, now: now.addingTimeInterval(2)) == 898)
        #expect(try store.reserveAttempt(client: "203.0.113.7", limit: 5, window: 900, now: now.addingTimeInterval(900)) == nil, "the first four left the window")
    }

    @Test("a session is found by its id's hash until it is idle too long or closed; each use restarts its clock", arguments: Backend.allCases)
    func sessions(backend: Backend) throws {
        guard let store = try backend.freshTables() else { return }
        let now = Date()
        try store.openSession(idHash: "hash-a", csrf: "csrf-a", now: now)
        try store.openSession(idHash: "hash-b", csrf: "csrf-b", now: now)
        #expect(try store.touchSession(idHash: "hash-a", idleTimeout: 60, now: now.addingTimeInterval(50)) == "csrf-a")
        #expect(try store.touchSession(idHash: "hash-a", idleTimeout: 60, now: now.addingTimeInterval(100)) == "csrf-a", "used at 50 s: not idle at 100 s")
        #expect(try store.touchSession(idHash: "hash-b", idleTimeout: 60, now: now.addingTimeInterval(100)) == nil, "idle for 100 s")
        #expect(try store.touchSession(idHash: "hash-unknown", idleTimeout: 60, now: now) == nil)
        try store.closeSession(idHash: "hash-a")
        #expect(try store.touchSession(idHash: "hash-a", idleTimeout: 60, now: now.addingTimeInterval(101)) == nil)
    }

    @Test("a key's call slots: no more than the limit held, even taken at once over two handles; a slot is freed by its own holder only; a dead holder's slot frees itself when its lease ends", arguments: Backend.allCases)
    func callSlots(backend: Backend) throws {
        guard let store = try backend.freshStore() else { return }
        let other = try Backend.reopen(store)
        let now = Date()
        let taken = try concurrently(8) { i in try (i % 2 == 0 ? store : other).enterCall(key: "device:a", limit: 3, lease: 60, now: now) }
        let held = taken.compactMap { $0 }
        #expect(held.count == 3 && Set(held.map(\.number)) == [0, 1, 2], "\(taken)")
        #expect(try store.enterCall(key: "device:b", limit: 3, lease: 60, now: now) != nil, "another key has slots of its own")
        try store.leaveCall(held[0])
        let again = try #require(try other.enterCall(key: "device:a", limit: 3, lease: 60, now: now.addingTimeInterval(1)))
        #expect(again.number == held[0].number)
        try store.leaveCall(held[0])
        #expect(try store.enterCall(key: "device:a", limit: 3, lease: 60, now: now.addingTimeInterval(2)) == nil, "a holder's second leave freed another's slot")
        #expect(try store.enterCall(key: "device:a", limit: 3, lease: 60, now: now.addingTimeInterval(60.5)) != nil, "the leases from the start have ended")
    }

    @Test("an SQLite store's call-slot file is made by the first call that takes a slot, owner-only; a store that serves no device never makes it")
    func callSlotFileOnFirstCall() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("call-slots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("store.sqlite").path
        do {
            let store = try SQLiteCarePlanStore(path: path)
            _ = try store.add([.patient(Patient(id: "ana", name: PersonName(givenName: "Ana"), effectiveDate: Date(), timezone: .gmt))])
        }
        #expect(!FileManager.default.fileExists(atPath: path + "-calls"), "opened, written and closed without a device call")
        let store = try SQLiteCarePlanStore(path: path)
        let other = try SQLiteCarePlanStore(path: path)
        let taken = try concurrently(4) { i in try (i % 2 == 0 ? store : other).enterCall(key: "device:a", limit: 2, lease: 60, now: Date()) }
        #expect(taken.compactMap { $0 }.count == 2, "two handles making the file at once still share its slots: \(taken)")
        #expect((try FileManager.default.attributesOfItem(atPath: path + "-calls")[.posixPermissions] as? Int) == 0o600)
    }
}
