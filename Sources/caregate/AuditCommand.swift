import ArgumentParser
import CareStore
import Foundation
import FHIR
import Gateway

/// `caregate audit ...`: the store's trail of accesses to patients' data.
struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit",
        abstract: "Read the store's audit trail of accesses to patients' data, and check that it was not changed.",
        discussion: """
            Every entry is chained to the one before by SHA-256, so an entry changed, removed or \
            inserted after the fact breaks the chain where it happened.

            Examples:
              caregate audit list --patient Patient/maria-lopez --since 2026-11-01
              caregate audit list --actor device-7f3a --json
              caregate audit verify
              caregate audit export --format ndjson -o audit.ndjson
              caregate audit prune --keep-days 400 --archive /var/lib/caregate/audit
            """,
        subcommands: [AuditList.self, AuditVerify.self, AuditExport.self, AuditPrune.self],
        defaultSubcommand: AuditList.self)
}

/// Which entries: by patient, actor and time (the options `list` and `export` share).
struct AuditFilter: ParsableArguments {
    @Option(help: "Only entries naming this patient (the store's id, Patient/…).")
    var patient: String?

    @Option(help: "Only entries by this actor (a device id, an operator fingerprint, an OS user, an EHR base URL).")
    var actor: String?

    @Option(help: "Only entries at or after this instant (2026-11-01T00:00:00Z), or date in UTC.")
    var since: String?

    @Option(help: "Only entries before this instant.")
    var until: String?

    func validate() throws {
        for (name, value) in [("--since", since), ("--until", until)] where value.flatMap(AuditList.instant) == nil && value != nil {
            throw ValidationError("\(name) must be an instant with a time zone (2026-11-01T00:00:00Z) or a date in UTC (2026-11-01)")
        }
    }

    func query(limit: Int) -> AuditQuery {
        AuditQuery(patientID: patient, actorID: actor, since: since.flatMap(AuditList.instant), until: until.flatMap(AuditList.instant), limit: limit)
    }
}

struct AuditList: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List audit entries, oldest first: by patient, actor and time.")

    @OptionGroup var options: StoreOptions

    @OptionGroup var filter: AuditFilter

    @Option(help: "At most this many entries (the newest).")
    var limit = 1_000

    @Flag(help: "One JSON object per line instead of text.")
    var json = false

    func validate() throws {
        guard limit > 0 else { throw ValidationError("--limit must be at least 1") }
    }

    func run() throws {
        let store = try options.open(.existing)
        let entries: [ChainedAuditEntry]
        do { entries = try store.auditEntries(filter.query(limit: limit)) } catch { throw CommandError.store(error) }
        for row in entries { print(json ? Self.json(row) : Self.text(row)) }
        if entries.isEmpty && !json { StandardError.print("no audit entries match") }
    }

    /// An instant with its zone, or a date alone (its midnight in UTC).
    static func instant(_ text: String) -> Date? {
        if let instant = ISO8601DateFormatter().date(from: text) { return instant }
        let day = ISO8601DateFormatter()
        day.formatOptions = [.withFullDate]
        return text.count == 10 ? day.date(from: text) : nil
    }

    /// `#12 2026-11-28T18:00:00Z device device-7f3a R carekit.pull Patient/maria-lopez from 203.0.113.9: success (41 versions)`
    static func text(_ row: ChainedAuditEntry) -> String {
        let e = row.entry
        var line = "#\(row.sequence) \(ISO8601DateFormatter().string(from: e.recorded)) \(e.actor.kind.rawValue) \(e.actor.id) \(e.action.rawValue) \(e.event)"
        line += " \(e.patientID ?? "(no patient)")"
        if !e.entities.isEmpty { line += " [\(e.entities.joined(separator: ", "))]" }
        if let source = e.source { line += " from \(source)" }
        line += ": \(e.outcome.rawValue)" + (e.detail.map { " (\($0))" } ?? "")
        return TerminalText.escaped(line)
    }

    static func json(_ row: ChainedAuditEntry) -> String {
        let e = row.entry
        var object: [String: Any] = ["sequence": row.sequence, "recorded": ISO8601DateFormatter().string(from: e.recorded), "actorKind": e.actor.kind.rawValue,
                                     "actor": e.actor.id, "action": e.action.rawValue, "event": e.event, "entities": e.entities, "outcome": e.outcome.rawValue,
                                     "hash": row.hash, "previousHash": row.previousHash]
        object["patient"] = e.patientID
        object["source"] = e.source
        object["detail"] = e.detail
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}

struct AuditVerify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Walk the whole audit chain; exit 1 naming the first entry changed, removed or inserted.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.open(.existing)
        let result: (checked: Int, break: AuditChain.Break?)
        do { result = try AuditChain.verify(store) } catch { throw CommandError.store(error) }
        if let found = result.break {
            StandardError.print("the audit trail does not hold after \(result.checked) entries: \(found)")
            throw ExitCode(1)
        }
        let head = (try? store.auditHead())?.map { " (last: entry \($0.sequence), \($0.hash))" } ?? ""
        print("the audit trail holds: \(result.checked) entries\(head)")
    }
}


struct AuditExport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write audit entries as FHIR R4 AuditEvents (IHE BALP), one per line, oldest first.",
        discussion: "Each AuditEvent's id comes from its entry's hash: exporting twice gives the same resources.")

    @OptionGroup var options: StoreOptions

    @OptionGroup var filter: AuditFilter

    @Option(help: "ndjson (the only format: one AuditEvent per line).")
    var format: Format = .ndjson

    enum Format: String, ExpressibleByArgument { case ndjson }

    @Option(name: .shortAndLong, help: "The file to write, owner-only (standard output when absent).", completion: .file())
    var output: String?

    @Option(help: "The gateway named as the events' observer (this host's name by default).")
    var observer = ProcessInfo.processInfo.hostName

    func run() throws {
        let store = try options.open(.existing)
        // Read by the store's indexes a page at a time, oldest first.
        var rows = AuditPages(store, matching: filter.query(limit: 1_000))
        let resource = AuditEventResource(observer: observer)
        var written = 0
        do {
            try FHIROutput.writing(to: output) { sink in
                while let row = try rows.next() {
                    try sink.write(resource.json(row).bytes() + [0x0A])
                    written += 1
                }
            }
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
        if let output { StandardError.print("exported \(written) AuditEvents to \(output)") }
    }
}

struct AuditPrune: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Archive the entries older than --keep-days as AuditEvents, then drop them from the store (a prefix of the chain).",
        discussion: "The rest of the chain still verifies, from the last dropped entry's hash. `caregate serve` does the same hourly with audit: in gateway.yaml.")

    @OptionGroup var options: StoreOptions

    @Option(name: .customLong("keep-days"), help: "Keep entries younger than this many days.")
    var keepDays: Int

    @Option(help: "The folder the dropped entries are written to first (owner-only NDJSON).", completion: .directory)
    var archive: String

    @Option(help: "The gateway named as the events' observer (this host's name by default).")
    var observer = ProcessInfo.processInfo.hostName

    func validate() throws {
        guard keepDays >= 1 else { throw ValidationError("--keep-days must be at least 1") }
    }

    func run() throws {
        let store = try options.open(.existing)
        let pruned: AuditRetention.Pruned
        do { pruned = try AuditRetention(trail: store, keepDays: keepDays, archive: archive, observer: observer).prune() } catch let error as StoreError {
            throw CommandError.store(error)
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        } catch {
            throw CommandError.message("cannot archive into \(archive): \(error); nothing was dropped")
        }
        guard let file = pruned.file else { return print("no entries older than \(keepDays) days") }
        print("archived and dropped \(pruned.dropped) entries: \(file)")
    }
}
