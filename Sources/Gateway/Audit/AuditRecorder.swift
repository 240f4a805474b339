import CareStore
import Foundation

/// Accesses noted as they happen and appended to the store's trail in batches: a request pays
/// for a lock and an append to an array, and one write carries every access since the last
/// (`caregate serve` writes every 250 ms and when it stops). A write that fails keeps its
/// entries, in order, ahead of those noted since.
///
/// Two things keep a flood of refused requests (bad tokens from one address, say) from growing
/// the trail, or the memory waiting for it, without bound; neither drops an access unsaid:
/// - **Repeats.** A request refused before any patient is known (no valid token, a bad
///   enrollment code) is noted in full the first time in a window (`repeatWindow`) for its
///   address, event and actor; the rest of that window are counted and written as one entry
///   ("41 more like this …") when the window closes, or when the recorder is closed.
/// - **A bound.** While the store refuses writes, the entries wait. Past `capacity`, the oldest
///   refused requests not tied to a patient are taken out and summarised into one entry with
///   their count, first and last times and busiest sources, written ahead of the rest. Accesses
///   to a patient's data are never summarised.
///
/// ```swift
/// let audit = AuditRecorder(trail: store)
/// audit.note(AuditEntry(recorded: Date(), actor: .device("device-7f3a"), action: .read, event: AuditEvent.pull,
///                       patientID: "Patient/maria-lopez", outcome: .success, detail: "41 versions"))
/// try audit.flush()
/// ```
public final class AuditRecorder: Sendable {
    /// Where the entries go.
    public let trail: any AuditTrail
    /// With `ehr.audit`: each entry's outbox item, queued in the append's transaction.
    public let queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)?
    /// Most entries kept waiting before the oldest refused requests are summarised.
    public let capacity: Int
    /// How long repeated refusals from one address are counted into one entry.
    public let repeatWindow: TimeInterval
    private let backlog = Locked(Backlog())
    /// Held while a batch is written, so batches reach the chain in the order they were noted.
    private let writing = Locked<Int>(0)

    /// Ten thousand entries: minutes of a busy gateway's accesses.
    public static let defaultCapacity = 10_000
    /// One minute.
    public static let defaultRepeatWindow: TimeInterval = 60

    /// A recorder appending to `trail` (and queueing each entry for the EHR with `queueing`).
    public init(trail: any AuditTrail, queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)? = nil,
                capacity: Int = AuditRecorder.defaultCapacity, repeatWindow: TimeInterval = AuditRecorder.defaultRepeatWindow) {
        self.trail = trail
        self.queueing = queueing
        self.capacity = max(capacity, 1)
        self.repeatWindow = repeatWindow
    }

    /// Notes one access, to be written with the next batch (a repeated refusal only counted).
    public func note(_ entry: AuditEntry) {
        backlog.withLock { $0.note(entry, window: repeatWindow, capacity: capacity) }
    }

    /// Notes several accesses, in order.
    public func note(contentsOf entries: [AuditEntry]) {
        guard !entries.isEmpty else { return }
        backlog.withLock { backlog in for entry in entries { backlog.note(entry, window: repeatWindow, capacity: capacity) } }
    }

    /// Entries noted and not yet written (a summary counts as one).
    public var pendingCount: Int { backlog.withLock { $0.entries.count + ($0.summary.count > 0 ? 1 : 0) } }

    /// Appends everything noted, in one write, with the counts of repeat windows closed by `now`
    /// (every window, when `closing`: the server stops); returns how many entries it wrote. When
    /// the write fails the entries stay noted, ahead of any noted meanwhile, and the error is thrown.
    @discardableResult
    public func flush(now: Date = Date(), closing: Bool = false) throws(StoreError) -> Int {
        try writing.withLock { (written: inout Int) throws(StoreError) -> Int in
            let (batch, summary) = backlog.withLock { backlog in
                backlog.closeWindows(before: closing ? .distantFuture : now.addingTimeInterval(-repeatWindow))
                defer { backlog.entries = []; backlog.summary = RefusalSummary() }
                return (backlog.entries, backlog.summary)
            }
            let entries = (summary.entry().map { [$0] } ?? []) + batch
            guard !entries.isEmpty else { return 0 }
            do throws(StoreError) { try trail.record(entries, queueing: queueing) } catch {
                backlog.withLock { backlog in
                    backlog.entries.insert(contentsOf: batch, at: 0)
                    backlog.summary.merge(summary)
                    backlog.bound(capacity)
                }
                throw error
            }
            written += entries.count
            return entries.count
        }
    }

    /// What waits to be written.
    struct Backlog {
        var entries: [AuditEntry] = []
        /// Refused requests taken out of `entries` past the bound.
        var summary = RefusalSummary()
        /// The open repeat windows, by address, event and actor.
        var repeats: [RepeatKey: RepeatWindow] = [:]

        mutating func note(_ entry: AuditEntry, window: TimeInterval, capacity: Int) {
            if let key = RepeatKey(entry) {
                if var open = repeats[key], entry.recorded < open.start.addingTimeInterval(window) {
                    open.count += 1
                    open.last = max(open.last, entry.recorded)
                    repeats[key] = open
                    return
                }
                if let closed = repeats[key]?.entry(key) { entries.append(closed) }
                repeats[key] = RepeatWindow(start: entry.recorded, last: entry.recorded)
            }
            entries.append(entry)
            bound(capacity)
        }

        /// Writes the counts of the windows opened before `cutoff` (and forgets them).
        mutating func closeWindows(before cutoff: Date) {
            for (key, window) in repeats.sorted(by: { $0.value.start < $1.value.start }) where window.start < cutoff {
                if let entry = window.entry(key) { entries.append(entry) }
                repeats[key] = nil
            }
        }

        /// Past `capacity`, the oldest refused requests without a patient go into the summary
        /// (a tenth of the capacity more than needed, so that this runs now and then, not per note).
        mutating func bound(_ capacity: Int) {
            guard entries.count > capacity else { return }
            var excess = entries.count - capacity + capacity / 10
            entries.removeAll { entry in
                guard excess > 0, RefusalSummary.takes(entry) else { return false }
                excess -= 1
                summary.add(entry)
                return true
            }
        }
    }

    /// What makes refusals repeats of one another: requests over the network (a device's, an
    /// operator's, the EHR's) refused before any patient was known, from one address, for one
    /// event and actor. Commands and workers on the host are written one by one.
    struct RepeatKey: Hashable {
        var source: String
        var event: String
        var actor: AuditEntry.Actor
        var action: AuditEntry.Action

        init?(_ entry: AuditEntry) {
            guard RefusalSummary.takes(entry), let source = entry.source, entry.actor.kind != .command, entry.actor.kind != .worker else { return nil }
            self.source = source
            self.event = entry.event
            self.actor = entry.actor
            self.action = entry.action
        }
    }

    /// A window of repeats: its first entry was noted in full; the rest are counted.
    struct RepeatWindow {
        var start: Date
        var last: Date
        var count = 0

        /// The entry that says how many more there were; nil when there were none.
        func entry(_ key: RepeatKey) -> AuditEntry? {
            guard count > 0 else { return nil }
            return AuditEntry(recorded: last, actor: key.actor, action: key.action, event: key.event, patientID: nil, source: key.source,
                              outcome: .refused, detail: "\(count) more like this from \(key.source) between \(AuditTime.text(start)) and \(AuditTime.text(last))")
        }
    }
}

/// Refused requests not tied to a patient, summarised while the trail could not take them.
struct RefusalSummary {
    var count = 0
    var first = Date.distantFuture
    var last = Date.distantPast
    /// How many by event and address (`carekit.pull from 198.51.100.2`).
    var kinds: [String: Int] = [:]

    /// Whether an entry may be summarised or counted as a repeat: a refusal before any patient was known.
    static func takes(_ entry: AuditEntry) -> Bool { entry.outcome == .refused && entry.patientID == nil }

    mutating func add(_ entry: AuditEntry) {
        count += 1
        first = min(first, entry.recorded)
        last = max(last, entry.recorded)
        kinds["\(entry.event) from \(entry.source ?? "an unknown address")", default: 0] += 1
    }

    mutating func merge(_ other: RefusalSummary) {
        count += other.count
        first = min(first, other.first)
        last = max(last, other.last)
        kinds.merge(other.kinds, uniquingKeysWith: +)
    }

    /// Most kinds a summary names (the busiest); the rest are counted.
    static let kindsNamed = 5

    /// The one entry standing for them all; nil when there are none.
    func entry() -> AuditEntry? {
        guard count > 0 else { return nil }
        let busiest = kinds.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }
        var named = busiest.prefix(Self.kindsNamed).map { "\($0.value) \($0.key)" }
        if busiest.count > Self.kindsNamed { named.append("\(busiest.dropFirst(Self.kindsNamed).reduce(0) { $0 + $1.value }) others") }
        return AuditEntry(recorded: first, actor: .init(kind: .worker, id: "caregate"), action: .execute, event: AuditEvent.refusalsSummarised,
                          patientID: nil, outcome: .refused,
                          detail: "\(count) refused requests between \(AuditTime.text(first)) and \(AuditTime.text(last)), summarised while the trail could not be written: "
                              + named.joined(separator: ", "))
    }
}

/// Instants as audit details write them (UTC, to the second).
enum AuditTime {
    static func text(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
    }
}

/// The names of the accesses the gateway records (`AuditEntry.event`), one place for the
/// trail, its export and its readers.
public enum AuditEvent {
    /// A device's pull of its patient's versions.
    public static let pull = "carekit.pull"
    /// A device's push of outcomes.
    public static let push = "carekit.push"
    /// A device redeeming an enrollment code.
    public static let enroll = "carekit.enroll"
    /// A device's call to read a kept form.
    public static let questionnaire = "carekit.questionnaire"
    /// An enrollment code issued (`caregate enroll`).
    public static let enrollmentCode = "device.code"
    /// A device revoked (dashboard or `caregate devices revoke`).
    public static let revoke = "device.revoke"
    /// The dashboard's page of one patient.
    public static let dashboardPatient = "dashboard.patient"
    /// The dashboard's lists naming patients (patients, devices, outbox).
    public static let dashboardList = "dashboard.list"
    /// A dead letter given another try from the dashboard.
    public static let dashboardRetry = "dashboard.retry"
    /// Outcomes sent to the EHR by the push worker or `caregate push`.
    public static let ehrPush = "ehr.push"
    /// A patient's plans read again from the EHR.
    public static let ehrRefresh = "ehr.refresh"
    /// A rest-hook notification from the EHR.
    public static let notification = "ehr.notification"
    /// Refused requests summarised into one entry while the trail could not be written (`AuditRecorder`).
    public static let refusalsSummarised = "audit.refusals-summarised"
    /// A command on the host: `command.report`, `command.export`, `command.import`, ….
    public static func command(_ name: String) -> String { "command.\(name)" }
}

/// The actors the gateway names, made one way everywhere.
extension AuditEntry.Actor {
    /// A patient's device, by its id.
    public static func device(_ id: String) -> Self { .init(kind: .device, id: id) }
    /// A worker or the EHR, by the EHR's base URL.
    public static func worker(_ base: String) -> Self { .init(kind: .worker, id: base) }
    /// The OS user running this process.
    public static var osUser: Self { .init(kind: .command, id: CommandAudit.userName()) }
}

/// What every entry of a command run on the host names: the OS user, the host, and the
/// command line (arguments past 200 characters cut).
public struct CommandAudit: Sendable {
    /// The command's name (`report`, `store export`).
    public var command: String
    /// The command line as typed, shortened.
    public var line: String

    /// The audit of `command` run as `arguments` (the process's own by default).
    public init(command: String, arguments: [String] = CommandLine.arguments) {
        self.command = command
        let text = (["caregate"] + arguments.dropFirst()).joined(separator: " ")
        line = text.count > 200 ? String(text.prefix(200)) + "…" : text
    }

    /// One entry of this command's access to `patientID`.
    public func entry(_ action: AuditEntry.Action, patientID: String?, entities: [String] = [], outcome: AuditEntry.Outcome = .success,
                      detail: String? = nil, at date: Date = Date()) -> AuditEntry {
        AuditEntry(recorded: date, actor: .osUser, action: action, event: AuditEvent.command(command.replacingOccurrences(of: " ", with: "-")),
                   patientID: patientID, entities: entities, source: ProcessInfo.processInfo.hostName, outcome: outcome,
                   detail: [line, detail].compactMap { $0 }.joined(separator: ": "))
    }

    /// The effective user's login name, or `uid N` when the system has no name for it.
    public static func userName() -> String {
        let uid = geteuid()
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return String(cString: name)
    }
}
