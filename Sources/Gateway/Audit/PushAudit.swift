import CareStore
import Foundation

/// What a push run leaves in the audit trail.
extension PushReport {
    /// What a push run leaves in the audit trail: per patient, one entry for the outcomes sent
    /// (created on the EHR) and one for those refused or deferred, naming each by identifier.
    /// An item whose payload names no patient is entered without one. AuditEvents sent
    /// (`ehr.audit`) are no patient's data and leave no entry (each would be sent in turn).
    public func auditEntries(actor: AuditEntry.Actor, source: String?, at date: Date = Date()) -> [AuditEntry] {
        var entries: [AuditEntry] = []
        func add(_ all: [String], _ outcome: AuditEntry.Outcome, _ detail: (Int) -> String) {
            let items = all.filter { !auditEvents.contains($0) }
            let byPatient = Dictionary(grouping: items) { patients[$0] }
            for patient in byPatient.keys.sorted(by: { ($0 ?? "") < ($1 ?? "") }) {
                let identifiers = byPatient[patient]!
                entries.append(AuditEntry(recorded: date, actor: actor, action: .create, event: AuditEvent.ehrPush, patientID: patient,
                                          entities: Array(identifiers.prefix(100)), source: source, outcome: outcome, detail: detail(identifiers.count)))
            }
        }
        add(pushed.map(\.identifier), .success) { "\($0) sent" }
        add(failed.map(\.identifier), .refused) { "\($0) refused by the EHR" }
        add(deferred.map(\.identifier), .failed) { "\($0) not sent (the EHR or the network failed), left queued" }
        return entries
    }
}
