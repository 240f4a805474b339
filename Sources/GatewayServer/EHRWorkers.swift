import CareStore
import Crypto
import FHIRClient
import Foundation
import Gateway
import JSON
import Logging
import ServiceLifecycle

/// The EHR side of `caregate serve`: the outbox pushed on an interval and right after a device's
/// push, enrolled patients refreshed on an interval and when the EHR notifies.
public struct EHRLink: Sendable {
    public var push: OutcomePush
    public var refresh: PatientRefresh
    /// When each enrolled patient is next refreshed, shared by every gateway over the store.
    public var schedule: any RefreshSchedule
    public var pushInterval: TimeInterval
    public var refreshInterval: TimeInterval
    /// How long a refresh worker's claim on a patient holds: how soon a killed instance's
    /// patient is refreshed by another.
    public var refreshLease: TimeInterval
    /// The token `/fhir/notify` requires (`Authorization: Bearer …`); nil: the route refuses all.
    public var notifyToken: String?
    /// What the workers' intervals and back-off are measured on.
    public var clock: WorkerClock

    public init(push: OutcomePush, refresh: PatientRefresh, schedule: any RefreshSchedule, pushInterval: TimeInterval = 60,
                refreshInterval: TimeInterval = 900, refreshLease: TimeInterval = 600, notifyToken: String? = nil, clock: WorkerClock = .continuous) {
        self.push = push
        self.refresh = refresh
        self.schedule = schedule
        self.pushInterval = pushInterval
        self.refreshInterval = refreshInterval
        self.refreshLease = refreshLease
        self.notifyToken = notifyToken
        self.clock = clock
    }
}

/// The time the EHR workers wait on: the continuous clock in service; in tests a clock moved by
/// hand, so that minutes of an EHR outage and its back-off run in a moment.
public struct WorkerClock: Sendable {
    /// Time since the clock was wrapped.
    let elapsed: @Sendable () -> Duration
    let sleep: @Sendable (Duration) async throws -> Void

    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleep = { try await clock.sleep(for: $0) }
    }

    public static var continuous: WorkerClock { WorkerClock(ContinuousClock()) }
}

/// Wakes a waiting worker early: `fire()` ends the current or next `wait`. Several fires before
/// a wait count as one.
final class Wakeup: Sendable {
    private let state = Locked<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func fire() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else { state.pending = true; return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Returns when fired, after `duration` on `clock`, or when the task is cancelled.
    func wait(upTo duration: Duration, on clock: WorkerClock) async {
        let timer = Task { [self] in
            try? await clock.sleep(max(.zero, duration))
            if !Task.isCancelled { fire() }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if state.pending { state.pending = false; return true }
                    state.waiter = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: { fire() }
        timer.cancel()
        state.withLock { $0.pending = false }
    }
}

/// What the workers know of the EHR, for `/readyz` and `/metrics`, and the requests that wake
/// them (a device push, a notification).
public final class EHRActivity: Sendable {
    struct State {
        var lastContact: Date?
        var lastError: String?
    }
    private let state = Locked(State())
    let pushWake = Wakeup()
    let refreshWake = Wakeup()

    public init() {}

    /// When the EHR last answered.
    public var lastContact: Date? { state.withLock { $0.lastContact } }
    public var lastError: String? { state.withLock { $0.lastError } }

    func reached() { state.withLock { $0.lastContact = Date(); $0.lastError = nil } }
    func failed(_ error: String) { state.withLock { $0.lastError = error } }

    /// Asks for the outbox to be pushed now.
    public func pushSoon() { pushWake.fire() }

    /// Asks for the refresh schedule to be looked at now (a notification made patients due).
    public func refreshSoon() { refreshWake.fire() }
}

/// Patient ids in logs: a keyed hash (HMAC-SHA256 with a key of this process, 12 hex digits),
/// so a log line can be matched with others of one patient but names nobody.
public struct PatientLogID: Sendable {
    let key: SymmetricKey

    public init(key: SymmetricKey = SymmetricKey(size: .bits256)) {
        self.key = key
    }

    public func callAsFunction(_ patientID: String) -> String {
        TextEncoding.hexadecimal(HMAC<SHA256>.authenticationCode(for: Array(patientID.utf8), using: key).prefix(6))
    }
}

/// Pushes the outbox on an interval and when woken, backing off while the EHR fails. A batch in
/// flight finishes on graceful shutdown; what it did not send stays queued for the next start.
struct OutboxPushWorker: Service {
    let push: OutcomePush
    let interval: TimeInterval
    let clock: WorkerClock
    let activity: EHRActivity
    let audit: AuditRecorder
    let logger: Logger

    func run() async throws {
        var backoff: TimeInterval = 0
        await withGracefulShutdownHandler {
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                let delivered = await drain()
                // Failing: 1, 2, 4… seconds, up to the interval or ten of them (at most a minute) when that is longer.
                backoff = delivered ? 0 : min(max(1, backoff * 2), max(interval, min(60, 10 * interval)))
                await activity.pushWake.wait(upTo: .seconds(delivered ? interval : backoff), on: clock)
            }
        } onGracefulShutdown: { activity.pushWake.fire() }
    }

    /// One push run; false when the EHR could not be reached or deferred something.
    func drain() async -> Bool {
        do {
            let report = try await push.run()
            settle(report)
            if report.pushed.isEmpty && report.failed.isEmpty && report.deferred.isEmpty {
                _ = try await push.client.capabilities()  // nothing to send: still learn whether the EHR answers
            }
            if !report.pushed.isEmpty || !report.failed.isEmpty || !report.deferred.isEmpty {
                logger.info("outbox pushed", metadata: ["pushed": "\(report.pushed.count)", "refused": "\(report.failed.count)",
                                                        "deferred": "\(report.deferred.count)", "queued": "\(report.newlyQueued)"])
            }
            guard report.deferred.isEmpty else {
                activity.failed("\(report.deferred.count) outcome(s) deferred: \(report.deferred[0].error)")
                return false
            }
            activity.reached()
            return true
        } catch {
            // A run stopped partway still sent what it sent: that is entered and counted.
            if let stopped = error as? PushInterrupted { settle(stopped.report) }
            let cause = (error as? PushInterrupted)?.cause ?? error
            activity.failed("\(cause)")
            logger.warning("push failed; outcomes stay queued", metadata: ["error": "\((cause as? FHIRClientError)?.kind ?? "\(cause)")"])
            return false
        }
    }

    /// Enters what a run sent or settled in the audit trail, and counts it.
    func settle(_ report: PushReport) {
        audit.note(contentsOf: report.auditEntries(actor: .worker(push.client.base), source: push.worker))
        // Outcomes (and survey responses), not the AuditEvents of `ehr.audit`.
        GatewayMetrics.shared.ehrPushed.increment(by: Int64(report.pushedOutcomes.count))
        GatewayMetrics.shared.ehrDeadLetters.increment(by: Int64(report.failed.count))
    }
}

/// Refreshes enrolled patients as the store's `RefreshSchedule` makes them due: each one
/// `interval` after its last refresh began, at once when a notification names it. Every gateway
/// over the store runs one; a patient is claimed by one at a time, so they share the patients.
struct PatientRefreshWorker: Service {
    let link: EHRLink
    let activity: EHRActivity
    let audit: AuditRecorder
    let logID: PatientLogID
    let logger: Logger
    /// This worker in the schedule's claims.
    let worker = "refresh-\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"

    func run() async throws {
        await withGracefulShutdownHandler {
            while !Task.isShuttingDownGracefully && !Task.isCancelled {
                let wait = await refreshDue()
                await activity.refreshWake.wait(upTo: wait, on: link.clock)
            }
        } onGracefulShutdown: { activity.refreshWake.fire() }
    }

    /// Puts the enrolled patients on the schedule, refreshes the due ones one claim at a time,
    /// and returns how long to wait for the next (at least a second, at most the interval: a
    /// patient enrolled meanwhile is scheduled within it).
    func refreshDue() async -> Duration {
        let schedule = link.schedule, interval = link.refreshInterval
        do {
            try await Blocking.run { [link] in
                try schedule.scheduleRefreshes(link.refresh.enrolledPatients(), now: Date())
            }
            while !Task.isShuttingDownGracefully && !Task.isCancelled,
                  let claim = try await Blocking.run({ [worker, link] in try schedule.claimRefresh(worker: worker, lease: link.refreshLease, now: Date()) }) {
                let succeeded = await refreshOne(claim.patient, since: claim.since)
                // A failure is tried again an interval later, as a success is refreshed again.
                let next = (succeeded ? claim.claimedAt : Date()).addingTimeInterval(interval)
                try await Blocking.run { [worker] in try schedule.finishRefresh(claim, worker: worker, next: next, succeeded: succeeded) }
            }
            let due = try await Blocking.run { try schedule.nextRefreshDue() }
            let seconds = due.map { $0.timeIntervalSinceNow.rounded(.up) } ?? interval
            return .seconds(min(max(1, seconds), interval))
        } catch {
            logger.warning("the refresh schedule could not be read or written; trying again", metadata: ["error": "\(error)"])
            return .seconds(min(interval, 30))
        }
    }

    func refreshOne(_ patient: EnrolledPatient, since: Date?) async -> Bool {
        do {
            let result = try await link.refresh.refresh(patient, since: since)
            audit(patient, .success, detail: Self.changes(in: result))
            activity.reached()
            GatewayMetrics.shared.ehrRefreshes.increment()
            if case .imported(let report) = result {
                let changed = report.counts.filter { $0.key != .unchanged }.values.reduce(0, +)
                logger.info("patient refreshed", metadata: ["patient": "\(logID(patient.storeID))", "changes": "\(changed)",
                                                            "failed": "\(report.failedPatients.count)"])
            }
            return true
        } catch {
            // The kind only: the EHR's text may quote the patient (a name, a birth date) and its
            // URLs name them in any spelling. (Readiness follows the push worker, which probes
            // the EHR: one patient the EHR refuses does not make the gateway unready.)
            logger.warning("refresh failed", metadata: ["patient": "\(logID(patient.storeID))", "error": "\(error.kind)"])
            audit(patient, .failed, detail: error.kind)
            return false
        }
    }

    /// Notes a refresh of `patient`: the worker, as the EHR it reads from, wrote the patient's plans.
    func audit(_ patient: EnrolledPatient, _ outcome: AuditEntry.Outcome, detail: String) {
        audit.note(AuditEntry(recorded: Date(), actor: .worker(link.refresh.client.base), action: .update, event: AuditEvent.ehrRefresh,
                              patientID: patient.storeID, source: worker, outcome: outcome, detail: detail))
    }

    /// `12 changes` or `unchanged` (what a refresh result says for the trail).
    static func changes(in result: PatientRefresh.Result) -> String {
        guard case .imported(let report) = result else { return "unchanged" }
        return "\(report.counts.filter { $0.key != .unchanged }.values.reduce(0, +)) changes"
    }
}
