import CareStore
import Foundation
import JSON
import Mapping

/// The quiet notes of a large import (skipped, ended, deleted: a population has one for each
/// Observation no task records) past the first ones of each kind, written to a file as they come
/// instead of held in memory. The report keeps the others and counts these; `caregate import`
/// reads them back for `--report` and `--verbose`. The file goes with this object.
///
/// ```swift
/// let spill = try SpilledNotes(directory: "/var/lib/caregate")
/// let report = try await StagedImport(importer: importer).run(paths, staging: staging, spill: spill)
/// try report.spilled?.forEach { print($0) }
/// ```
public final class SpilledNotes: Sendable {
    /// The file the notes go to.
    public let path: String
    private let state: Locked<State>

    struct State: @unchecked Sendable {
        var file: UnsafeMutablePointer<FILE>?
        var counts: [ImportNote.Kind: Int] = [:]
    }

    /// Notes past this many in a report are spilled (the quiet kinds only).
    public let threshold: Int
    /// Of each quiet kind, the first this many stay in the report (what `caregate import` prints
    /// without `--verbose`).
    public static let kept = 20

    /// A spill file in `directory`, made on first use, for reports of more than `threshold` notes.
    public init(directory: String = NSTemporaryDirectory(), threshold: Int = 10_000) {
        self.threshold = threshold
        ScratchFile.removeAbandoned(in: directory, prefix: "caregate-notes")
        path = ScratchFile.path(in: directory, prefix: "caregate-notes", suffix: ".ndjson")
        state = Locked(State())
    }

    deinit {
        state.withLock { if let file = $0.file { fclose(file) } }
        unlink(path)
    }

    /// Spilled notes by kind.
    public var counts: [ImportNote.Kind: Int] { state.withLock { $0.counts } }

    /// Writes notes to the file, a JSON object per line.
    func append(_ notes: [ImportNote]) throws(StoreError) {
        try state.withLock { state throws(StoreError) in
            if state.file == nil {
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                guard fd >= 0, let file = fdopen(fd, "w") else { throw .database(path: path, message: "cannot write the notes file: \(String(cString: strerror(errno)))") }
                state.file = file
            }
            for note in notes {
                var line = note.jsonValue.bytes(sortedKeys: true)
                line.append(0x0A)
                guard fwrite(line, 1, line.count, state.file) == line.count else {
                    throw .database(path: path, message: "cannot write the notes file: \(String(cString: strerror(errno)))")
                }
                state.counts[note.kind, default: 0] += 1
            }
        }
    }

    /// Each spilled note, in the order spilled.
    public func forEach(_ body: (ImportNote) throws -> Void) throws {
        let written = state.withLock { state -> Bool in
            if let file = state.file { fflush(file) }
            return state.file != nil
        }
        guard written else { return }
        guard let file = fopen(path, "r") else { throw StoreError.database(path: path, message: "cannot read the notes file") }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while true {
            let n = getline(&line, &capacity, file)
            guard n > 0, let line else { break }
            let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(line).assumingMemoryBound(to: UInt8.self), count: n - 1))
            guard let note = ImportNote(json: try JSONValue.parse(bytes)) else { throw StoreError.database(path: path, message: "a note in the notes file cannot be read") }
            try body(note)
        }
    }
}

extension ImportNote {
    /// The note as the import report writes it.
    var jsonValue: JSONValue {
        var note: [(String, JSONValue)] = [("kind", .init(kind.rawValue)), ("resource", .init(resource)), ("origin", .init(origin)), ("message", .init(message))]
        if let path { note.append(("path", .init(path))) }
        return .object(note)
    }

    init?(json: JSONValue) {
        guard let kind = json["kind"]?.stringValue.flatMap(Kind.init(rawValue:)), let resource = json["resource"]?.stringValue,
              let origin = json["origin"]?.stringValue, let message = json["message"]?.stringValue else { return nil }
        self.init(kind: kind, resource: resource, path: json["path"]?.stringValue, origin: origin, message: message)
    }
}

extension ImportReport {
    /// Moves the quiet notes past the first `SpilledNotes.kept` of each kind to `spill`, once the
    /// report holds more than the spill's threshold.
    mutating func spillQuietNotes(to spill: SpilledNotes?) throws(StoreError) {
        guard let spill, notes.count > spill.threshold else { return }
        spilled = spill
        var seen: [ImportNote.Kind: Int] = [:]
        var kept: [ImportNote] = []
        var moved: [ImportNote] = []
        for note in notes {
            guard [.skipped, .ended, .deleted].contains(note.kind) else { kept.append(note); continue }
            seen[note.kind, default: 0] += 1
            if seen[note.kind]! <= SpilledNotes.kept { kept.append(note) } else { moved.append(note) }
        }
        try spill.append(moved)
        notes = kept
    }

    /// Every note: those kept, then those spilled.
    public func allNotes() throws -> [ImportNote] {
        var all = notes
        try spilled?.forEach { all.append($0) }
        return all
    }

    /// Notes by kind, spilled ones included.
    public var noteCounts: [ImportNote.Kind: Int] {
        var counts = spilled?.counts ?? [:]
        for note in notes { counts[note.kind, default: 0] += 1 }
        return counts
    }
}
