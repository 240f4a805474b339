import CareStore
import Foundation
import JSON
import Mapping

extension ImportReport {
    /// The report as JSON: every patient's changes and failure, the notes, the unmapped resource
    /// types. What `caregate import --format json` prints and the import log keeps: the notes
    /// kept in memory, and how many were spilled (`spilledNotes`) in a large import.
    public func json(dryRun: Bool) -> String {
        var text: [UInt8] = []
        writeJSON(dryRun: dryRun, withSpilledNotes: false) { text += $0 }
        return String(decoding: text, as: UTF8.self)
    }

    /// Writes the report as JSON a piece at a time; with the spilled notes (read back from their
    /// file), what `caregate import --report` writes, in memory for one note at a time.
    public func writeJSON(dryRun: Bool, withSpilledNotes: Bool, to write: ([UInt8]) throws -> Void) rethrows {
        // The members in sorted order, the notes between the head and the tail.
        let head: JSONValue = ["dryRun": .init(dryRun), "files": .init(files)]
        try write(head.bytes(sortedKeys: true).dropLast() + Array(#","notes":["#.utf8))
        var first = true
        func note(_ note: ImportNote) throws {
            try write((first ? [] : [0x2C]) + note.jsonValue.bytes(sortedKeys: true))
            first = false
        }
        for kept in notes { try note(kept) }
        if withSpilledNotes, let spilled {
            do { try spilled.forEach(note) } catch {
                // The file is this process's own: a failure here is the disk's, said in the report.
                try note(ImportNote(kind: .error, resource: "notes", path: nil, origin: spilled.path, message: "the spilled notes could not be read back: \(error)"))
            }
        }
        let patients = patients.map { p -> JSONValue in
            var patient: [(String, JSONValue)] = [("patient", .init(p.patientID)), ("changes", .array(p.changes.map { c in
                var change: [(String, JSONValue)] = [("action", .init(c.action.rawValue)), ("type", .init(c.type.rawValue)), ("id", .init(c.id))]
                if let detail = c.detail { change.append(("detail", .init(detail))) }
                return .object(change)
            }))]
            if let failure = p.failure { patient.append(("failure", .init(failure))) }
            return .object(patient)
        }
        var tail: [(String, JSONValue)] = [
            ("patients", .array(patients)), ("repeated", .init(repeated)), ("resources", .init(resources)),
            ("unmapped", .object(unmapped.map { ($0.key, .init($0.value)) })),
        ]
        if !withSpilledNotes, let spilled { tail.append(("spilledNotes", .init(spilled.counts.values.reduce(0, +)))) }
        try write([0x5D, 0x2C] + JSONValue.object(tail).bytes(sortedKeys: true).dropFirst())
    }

    /// What the import log counts: files, resources, patients and failed patients, changes by
    /// action (`create`, `update`…) and notes by kind (`skipped`, `loss`, `error`…).
    public var logCounts: [String: Int] {
        var counts = ["files": files, "resources": resources, "patients": patients.count, "failedPatients": failedPatients.count]
        for (action, n) in self.counts { counts[action.rawValue] = n }
        for (kind, n) in noteCounts { counts[kind.rawValue] = n }
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
