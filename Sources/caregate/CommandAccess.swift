import CareStore
import Foundation
import Gateway

/// A command's accesses to patients' data, as the store's audit trail keeps them.
struct CommandAccess {
    let audit: CommandAudit
    let trail: any AuditTrail

    /// Accesses of `command` (`report`, `store export`) to the store behind `trail`.
    init(_ command: String, trail: any AuditTrail) {
        audit = CommandAudit(command: command)
        self.trail = trail
    }

    /// Appends one entry per patient (one without a patient when `patients` is empty); an access
    /// that cannot be recorded fails the command.
    func record(_ action: AuditEntry.Action, patients: [String], outcome: AuditEntry.Outcome = .success, detail: (String?) -> String?) throws {
        let named: [String?] = patients.isEmpty ? [nil] : Array(Set(patients)).sorted()
        let now = Date()
        try append(named.map { audit.entry(action, patientID: $0, outcome: outcome, detail: detail($0), at: now) }, else: "the access was not recorded in the audit trail")
    }

    /// Appends entries; when the trail cannot keep them the command fails, saying `failure`.
    func append(_ entries: [AuditEntry], else failure: String) throws {
        do { try trail.record(entries) } catch { throw CommandError.message("\(failure): \(error)") }
    }

    /// The store ids of the patients whose plans are `plans`.
    static func patients(ofPlans plans: Set<UUID>, in store: any CarePlanStore) throws(StoreError) -> [String] {
        guard !plans.isEmpty else { return [] }
        let owners = Set(try store.fetchCarePlans(EntityQuery(versions: .history, uuids: Array(plans))).compactMap(\.patientUUID))
        guard !owners.isEmpty else { return [] }
        return try store.fetchPatients(EntityQuery(versions: .history, uuids: Array(owners))).map(\.id)
    }
}

extension CommandAccess {
    /// One entry per patient an import wrote: created or changed what (counts), or failed and why.
    func recordImport(_ report: ImportReport) throws {
        let now = Date()
        let entries = report.patients.map { patient in
            let changed = patient.changes.filter { $0.action != .unchanged }.count
            return audit.entry(.update, patientID: patient.patientID, outcome: patient.failure == nil ? .success : .failed,
                               detail: patient.failure ?? "\(changed) of \(patient.changes.count) resources changed", at: now)
        }
        try append(entries, else: "the import is stored, and was not recorded in the audit trail")
    }
}
