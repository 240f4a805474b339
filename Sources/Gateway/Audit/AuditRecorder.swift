import CareStore
import Foundation

/// Accesses noted as they happen and appended to the store's trail in batches: a request pays
/// for a lock and an append to an array, and one write carries every access since the last
/// (`caregate serve` writes every 250 ms and when it stops). A write that fails keeps its
/// entries, in order, ahead of those noted since.
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
    private let pending = Locked<[AuditEntry]>([])
    /// Held while a batch is written, so batches reach the chain in the order they were noted.
    private let writing = Locked<Int>(0)

    /// A recorder appending to `trail` (and queueing each entry for the EHR with `queueing`).
    public init(trail: any AuditTrail, queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)? = nil) {
        self.trail = trail
        self.queueing = queueing
    }

    /// Notes one access, to be written with the next batch.
    public func note(_ entry: AuditEntry) {
        pending.withLock { $0.append(entry) }
    }

    /// Notes several accesses, in order.
    public func note(contentsOf entries: [AuditEntry]) {
        guard !entries.isEmpty else { return }
        pending.withLock { $0.append(contentsOf: entries) }
    }

    /// Entries noted and not yet written.
    public var pendingCount: Int { pending.withLock { $0.count } }

    /// Appends everything noted, in one write; returns how many entries it wrote. When the write
    /// fails the entries stay noted, ahead of any noted meanwhile, and the error is thrown.
    @discardableResult
    public func flush() throws(StoreError) -> Int {
        try writing.withLock { (written: inout Int) throws(StoreError) -> Int in
            let batch = pending.withLock { pending in defer { pending = [] }; return pending }
            guard !batch.isEmpty else { return 0 }
            do throws(StoreError) { try trail.record(batch, queueing: queueing) } catch {
                pending.withLock { $0.insert(contentsOf: batch, at: 0) }
                throw error
            }
            written += batch.count
            return batch.count
        }
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
