import JSON
import ArgumentParser
import CareStore
import FHIR
import Foundation

/// `caregate store ...`: the CareKit-compatible care-plan store.
struct Store: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Work with the care-plan store: CareKit JSON in and out, and the events of a day.",
        discussion: """
            The store is an SQLite file or a postgres:// URL (--store, else $CAREGATE_STORE, else \
            caregate.sqlite in the working directory), \
            versioned as CareKit's own store is: updates append versions, deletes append tombstones.

            Examples:
              caregate store import --carekit revision.json
              caregate store events --from 2026-11-02 --to 2026-11-03 --tz America/New_York
              caregate store export --carekit --carekit-version 3 -o for-old-app.json
              caregate store copy --from caregate.sqlite \\
                  --to postgres://caregate@db.internal/care --to-password-file db.password
            """,
        subcommands: [StoreExport.self, StoreImport.self, StoreEvents.self, StoreCopy.self])
}

struct StoreExport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the whole store as one CareKit revision record (compact JSON, parents before children).")

    @OptionGroup var options: StoreOptions

    @Flag(help: "Write CareKit JSON (the only export format so far; required for clarity).")
    var carekit = false

    @Option(name: .customLong("carekit-version"), help: "The CareKit major version of the app that reads the file: 3 or 4.")
    var careKitVersion: Int = 4

    @Option(name: .shortAndLong, help: "The file to write (standard output when absent).", completion: .file())
    var output: String?

    func validate() throws {
        guard carekit else { throw ValidationError("Say --carekit: CareKit JSON is the store's export format.") }
        guard CareKitVersion(rawValue: careKitVersion) != nil else { throw ValidationError("--carekit-version must be 3 or 4, not \(careKitVersion).") }
    }

    func run() throws {
        let store = try options.open(.existing)
        let record: RevisionRecord
        do { record = try store.revisionRecord() } catch { throw CommandError.store(error) }
        let patients = record.entities.compactMap { entity -> String? in if case .patient(let patient) = entity { patient.id } else { nil } }
        if !patients.isEmpty {
            try CommandAccess("store export", trail: store).record(.read, patients: patients) { _ in "the whole store, \(record.entities.count) versions" }
        }
        var text = record.bytes(version: CareKitVersion(rawValue: careKitVersion)!)
        text.append(0x0A)
        do {
            try FHIROutput.writing(to: output) { try $0.write(text) }
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        }
        if let output {
            StandardError.print("exported \(record.entities.count) versions (CareKit \(careKitVersion) JSON) to \(output)")
        }
    }
}

struct StoreImport: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Read a CareKit revision record, or a JSON array of {type, object} entities, into the store.",
        discussion: "Versions already in the store are skipped, so importing the same file twice changes nothing. The whole file is one transaction.")

    @OptionGroup var options: StoreOptions

    @Flag(help: "The file is CareKit JSON (the only import format here; FHIR goes through `caregate import`).")
    var carekit = false

    @Argument(help: "The CareKit JSON file.", completion: .file())
    var file: String

    func validate() throws {
        guard carekit else { throw ValidationError("Say --carekit: this command reads CareKit JSON.") }
    }

    func run() throws {
        let data: [UInt8]
        do { data = try FileBytes.read(file) } catch { throw CommandError.fhir(error) }
        let json: JSONValue
        do { json = try JSONValue.parse(data) } catch { throw CommandError.message("\(file):\(error.description)") }
        let record: RevisionRecord
        do { record = try RevisionRecord(json: json) } catch { throw CommandError.message("\(file): \(error.description)") }
        let store = try options.open(.creating)
        let inserted: Int
        do { inserted = try store.merge(record) } catch { throw CommandError.store(error) }
        print("imported \(inserted) of \(record.entities.count) versions into \(options.path) (\(record.entities.count - inserted) already present)")
    }
}

struct StoreEvents: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "events",
        abstract: "List the events from one date to another: what a CareKit app shows for those days.",
        discussion: "Dates are YYYY-MM-DD (midnight in --tz) or ISO 8601 date-times; --to is exclusive.")

    @OptionGroup var options: StoreOptions

    @OptionGroup var range: DateRangeOptions

    @Option(help: "text (default) or json.")
    var format: OutputFormat = .text

    enum OutputFormat: String, ExpressibleByArgument { case text, json }

    func run() throws {
        let (zone, start, end) = try range.resolved()
        let store = try options.open(.existing)
        let events: [TaskEvent]
        do { events = try store.events(from: start, to: end, tasks: EntityQuery()) } catch { throw CommandError.store(error) }
        let patients: [String]
        do { patients = try CommandAccess.patients(ofPlans: Set(events.compactMap(\.task.carePlanUUID)), in: store) } catch { throw CommandError.store(error) }
        if !patients.isEmpty {
            try CommandAccess("store events", trail: store).record(.read, patients: patients) { _ in "events \(range.from) to \(range.to)" }
        }
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = zone
        switch format {
        case .json:
            let items: [JSONValue] = events.map { event in
                var members: [(String, JSONValue)] = [
                    ("taskID", .string(event.task.id)),
                    ("taskUUID", .string(event.task.uuid.uuidString)),
                    ("title", event.task.title.map { .string($0) } ?? .null),
                    ("occurrence", .number(Double(event.occurrence))),
                    ("start", .string(formatter.string(from: event.scheduleEvent.start))),
                    ("end", .string(formatter.string(from: event.scheduleEvent.end))),
                    ("allDay", .bool(event.scheduleEvent.element.duration == .allDay)),
                ]
                if let text = event.scheduleEvent.element.text { members.append(("text", .string(text))) }
                members.append(("outcome", event.outcome.map { outcome in
                    .array(outcome.values.map { CareKitJSON.outcomeValueJSON($0) })
                } ?? .null))
                return .object(members)
            }
            print(JSONValue.array(items).serialized(pretty: true))
        case .text:
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            let day = DateFormatter()
            day.dateFormat = "yyyy-MM-dd EEEE"
            day.timeZone = zone
            day.locale = Locale(identifier: "en_US_POSIX")
            let clock = DateFormatter()
            clock.dateFormat = "HH:mm"
            clock.timeZone = zone
            var currentDay: Date?
            for event in events {
                let eventDay = calendar.startOfDay(for: event.scheduleEvent.start)
                if eventDay != currentDay {
                    print("\(day.string(from: eventDay)) (\(zone.identifier))")
                    currentDay = eventDay
                }
                let when = event.scheduleEvent.element.duration == .allDay ? "all day    "
                    : "\(clock.string(from: event.scheduleEvent.start))–\(clock.string(from: event.scheduleEvent.end))"
                let outcome = event.outcome.map { o in
                    "done" + (o.values.isEmpty ? "" : ": " + o.values.map { $0.text(kindSeparator: "=") }.joined(separator: ", "))
                } ?? "—"
                print("  \(when)  \(event.task.title ?? event.task.id)  #\(event.occurrence)  \(outcome)")
            }
            if events.isEmpty { print("no events") }
        }
    }
}

/// `--from`, `--to` (exclusive) and `--tz`: a range of days or instants.
struct DateRangeOptions: ParsableArguments {
    @Option(help: "The first day (YYYY-MM-DD, midnight in --tz) or ISO 8601 instant.")
    var from: String

    @Option(help: "The day (or instant) to stop before.")
    var to: String

    @Option(help: "The time zone for days and times (default: this machine's).", transform: TimeZoneArgument.parse)
    var tz: TimeZone?

    /// The zone, and the range's start and end, checked to be in order.
    func resolved() throws -> (zone: TimeZone, start: Date, end: Date) {
        let zone = tz ?? .current
        let start = try Self.date(from, zone: zone, option: "--from")
        let end = try Self.date(to, zone: zone, option: "--to")
        guard start < end else { throw ValidationError("--from must be before --to.") }
        return (zone, start, end)
    }

    static func date(_ text: String, zone: TimeZone, option: String) throws -> Date {
        let parts = text.split(separator: "-").compactMap { Int($0) }
        if parts.count == 3, text.count == 10 {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = zone
            if let date = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])) { return date }
        }
        let iso = ISO8601DateFormatter()
        if let date = iso.date(from: text) { return date }
        throw ValidationError("\(option): \"\(text)\" is not a date (YYYY-MM-DD) or an ISO 8601 date-time.")
    }
}
