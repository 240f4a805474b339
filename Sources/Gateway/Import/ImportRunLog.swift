import CareStore
import Foundation
import JSON
import Mapping

extension ImportReport {
    /// The report as JSON: every patient's changes and failure, every note, the unmapped
    /// resource types. What `caregate import --report` writes and the import log keeps.
    public func json(dryRun: Bool) -> String {
        let patients = patients.map { p -> JSONValue in
            var patient: [(String, JSONValue)] = [("patient", .init(p.patientID)), ("changes", .array(p.changes.map { c in
                var change: [(String, JSONValue)] = [("action", .init(c.action.rawValue)), ("type", .init(c.type.rawValue)), ("id", .init(c.id))]
                if let detail = c.detail { change.append(("detail", .init(detail))) }
                return .object(change)
            }))]
            if let failure = p.failure { patient.append(("failure", .init(failure))) }
            return .object(patient)
        }
        let notes = notes.map { n -> JSONValue in
            var note: [(String, JSONValue)] = [("kind", .init(n.kind.rawValue)), ("resource", .init(n.resource)), ("origin", .init(n.origin)), ("message", .init(n.message))]
            if let path = n.path { note.append(("path", .init(path))) }
            return .object(note)
        }
        let object: JSONValue = [
            "dryRun": .init(dryRun), "files": .init(files), "resources": .init(resources), "repeated": .init(repeated),
            "patients": .array(patients), "notes": .array(notes),
            "unmapped": .object(unmapped.map { ($0.key, .init($0.value)) }),
        ]
        return object.serialized(sortedKeys: true)
    }

    /// What the import log counts: files, resources, patients and failed patients, changes by
    /// action (`create`, `update`…) and notes by kind (`skipped`, `loss`, `error`…).
    public var logCounts: [String: Int] {
        var counts = ["files": files, "resources": resources, "patients": patients.count, "failedPatients": failedPatients.count]
        for (action, n) in self.counts { counts[action.rawValue] = n }
        for note in notes { counts[note.kind.rawValue, default: 0] += 1 }
        return counts
    }

    /// The run as the import log keeps it; `json` is this report's `json(dryRun: false)`.
    public func importRun(source: String, startedAt: Date, json: String? = nil) -> ImportRun {
        ImportRun(startedAt: startedAt, source: source, counts: logCounts, report: Array((json ?? self.json(dryRun: false)).utf8))
    }

    /// Whether the run changed the store or failed somewhere: a refresh that found nothing new
    /// is not worth a line in the log (its losses are the same as the last logged run's).
    public var isWorthLogging: Bool {
        counts.contains { $0.key != .unchanged && $0.value > 0 } || !failedPatients.isEmpty || notes.contains { $0.kind == .error }
    }
}
