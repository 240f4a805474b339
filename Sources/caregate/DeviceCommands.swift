import ArgumentParser
import CareStore
import Foundation
import FHIRClient
import Gateway

/// `caregate enroll`: a one-time code for a patient's CareKit app.
struct EnrollCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enroll",
        abstract: "Print a one-time code that enrolls one device of a patient for CareKit sync.",
        discussion: """
            The code is valid for 15 minutes and once. The patient's app sends it to \
            POST /carekit/v1/enroll on `caregate serve` and gets a device token bound to that \
            patient; the gateway keeps only hashes of codes and tokens.

            Example:
              caregate enroll --patient Patient/maria-lopez
            """)

    @OptionGroup var options: StoreOptions

    @Option(help: ArgumentHelp("The patient's id in the store (as `caregate store events` and exports show it).", valueName: "id"))
    var patient: String

    func run() throws {
        let store = try options.open(.existing)
        let access = CommandAccess("enroll", trail: store)
        do {
            let issued = try DeviceEnrollment(store: store).issueCode(patientID: patient)
            let time = ISO8601DateFormatter().string(from: issued.expires)
            try access.record(.create, patients: [patient]) { _ in "an enrollment code, valid once until \(time)" }
            print(issued.code)
            StandardError.print("enrollment code for \(TerminalText.escaped(patient)), valid once until \(time)")
        } catch let error as EnrollmentError {
            try access.record(.create, patients: [patient], outcome: .refused) { _ in error.description }
            throw CommandError.message(error.description)
        }
    }
}

/// `caregate devices list|revoke`.
struct DevicesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the devices enrolled for CareKit sync, or revoke one.",
        discussion: """
            Examples:
              caregate devices list --patient Patient/maria-lopez
              caregate devices revoke 3f9a1c07d2e4
              caregate devices try --gateway http://127.0.0.1:8080 --code KX7P2-M9QRT \\
                  --token-file device.token --days 7
            """,
        subcommands: [DevicesList.self, DevicesRevoke.self, DevicesTry.self])
}

struct DevicesList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "One line per device: id, patient, enrolled, last sync, revoked.")

    @OptionGroup var options: StoreOptions

    @Option(help: ArgumentHelp("Only this patient's devices.", valueName: "id"))
    var patient: String?

    func run() throws {
        let store = try options.open(.existing)
        let devices: [Device]
        do { devices = try store.devices(patientID: patient) } catch { throw CommandError.store(error) }
        let format = ISO8601DateFormatter()
        for device in devices {
            let synced = device.lastSyncAt.map { "last sync \(format.string(from: $0))" } ?? "never synced"
            let revoked = device.revokedAt.map { "  revoked \(format.string(from: $0))" } ?? ""
            // The name and app are the device's own words: escaped like everything a device sends.
            let named = [device.name, device.app].compactMap { $0 }.map { "  \"\(TerminalText.escaped($0))\"" }.joined()
            print("\(device.id)  \(TerminalText.escaped(device.patientID))  enrolled \(format.string(from: device.enrolledAt))  \(synced)\(revoked)\(named)")
        }
        if devices.isEmpty { StandardError.print("no devices enrolled\(patient.map { " for \(TerminalText.escaped($0))" } ?? "")") }
    }
}

struct DevicesRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke a device: its token stops working at once.")

    @OptionGroup var options: StoreOptions

    @Argument(help: "The device's id (from `caregate devices list`).")
    var id: String

    func run() throws {
        let store = try options.open(.existing)
        let revoked: Bool, patient: String?
        do {
            patient = try store.device(id: id)?.patientID
            revoked = try store.revokeDevice(id: id, at: Date())
        } catch { throw CommandError.store(error) }
        try CommandAccess("devices revoke", trail: store).record(.update, patients: patient.map { [$0] } ?? [], outcome: revoked ? .success : .refused) { _ in
            revoked ? "revoked device \(id)" : "no such device, or revoked already"
        }
        guard revoked else { throw CommandError.message("no device \"\(TerminalText.escaped(id))\" (see `caregate devices list`)") }
        StandardError.print("revoked device \(id)")
    }
}

/// `caregate devices try`: a CareKit app's sync, from the command line, against a running gateway.
struct DevicesTry: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "try",
        abstract: "Act as a patient's CareKit app against a running gateway: enroll, pull, record outcomes, push.",
        discussion: """
            For trying a gateway or a deployment without an iPhone. With --code it enrolls first \
            (and keeps the token in --token-file, owner-only); with --token-file alone it uses \
            that token. It pulls the patient's versions into a store in memory, records an outcome \
            for each event of the last --days days that has none (missing every --skip-th of each task, as \
            patients do), and pushes them through POST /carekit/v1/revisions. A task's values \
            come from --value for its group, else its target values, else `true`. Survey tasks \
            (those naming a Questionnaire) are left to the app.
            """)

    @Option(help: ArgumentHelp("The gateway's address.", valueName: "url"))
    var gateway: String

    @Option(help: ArgumentHelp("An enrollment code from `caregate enroll`.", valueName: "code"))
    var code: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp("The device token: read from it, or written to it (owner-only) after enrolling with --code.", valueName: "path"))
    var tokenFile: String?

    @Option(help: "Record outcomes for the events of this many days up to now (0: none).")
    var days = 7

    @Option(help: "Miss every this-many-th event (0: miss none).")
    var skip = 5

    @Option(name: .customLong("value"), help: ArgumentHelp("Values for a task group, as GROUP=KIND:NUMBER:UNIT (repeat for several).", valueName: "spec"))
    var values: [String] = []

    @Option(help: ArgumentHelp("The device's time zone (IANA name; default: this machine's).", valueName: "zone"))
    var tz: String?

    func validate() throws {
        if code == nil && tokenFile == nil { throw ValidationError("give --code (to enroll) or --token-file (an enrolled device's token)") }
        if days < 0 || skip < 0 { throw ValidationError("--days and --skip are 0 or more") }
        if let tz, TimeZone(identifier: tz) == nil { throw ValidationError("--tz: unknown time zone '\(tz)'") }
        _ = try Self.recorded(values)
    }

    /// `GROUP=KIND:NUMBER:UNIT` specs as the values of each group.
    static func recorded(_ specs: [String]) throws -> RecordedValues {
        var byGroup: [String: [OutcomeValue]] = [:]
        for spec in specs {
            let halves = spec.split(separator: "=", maxSplits: 1).map(String.init)
            let parts = halves.count == 2 ? halves[1].split(separator: ":", omittingEmptySubsequences: false).map(String.init) : []
            guard parts.count == 3, let number = Double(parts[1]) else {
                throw ValidationError("--value \(spec): expected GROUP=KIND:NUMBER:UNIT, such as 29463-7=29463-7:78.4:kg")
            }
            let value: OutcomeValue.Value = parts[1].contains(".") ? .double(number) : .integer(Int(number))
            byGroup[halves[0], default: []].append(OutcomeValue(value, kind: parts[0], units: parts[2].isEmpty ? nil : parts[2]))
        }
        return RecordedValues(byGroup: byGroup)
    }

    func run() async throws {
        let transport = CurlTransport()
        let token = try await deviceToken(transport)
        let device = CareKitDevice(gateway: gateway, token: token, transport: transport)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = tz.flatMap(TimeZone.init(identifier:)) ?? .current
        do {
            let local = try SQLiteCarePlanStore(inMemory: ())
            let (pulled, knowledge) = try await device.pull(into: local)
            print("pulled \(pulled) versions")
            guard days > 0 else { return }
            let now = Date()
            let start = calendar.date(byAdding: .day, value: -days, to: now)!
            let outcomes = try Self.recorded(values).outcomes(for: try local.events(from: start, to: now, tasks: EntityQuery()), skip: skip, calendar: calendar)
            let answer = try await device.push(outcomes, knowing: knowledge, clock: 1)
            print("recorded \(outcomes.count) outcomes over \(days) days; the gateway merged \(answer["merged"]?.numberValue.map { Int($0) } ?? 0)")
            let surveys = Set(try local.fetchTasks().filter(RecordedValues.isSurvey).map { $0.title ?? $0.id }).sorted()
            if !surveys.isEmpty { print("left the survey tasks to the app (their answers are a form's): \(surveys.joined(separator: ", "))") }
        } catch let error as CareKitDeviceError {
            throw CommandError.message(error.description)
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
    }

    /// The token: enrolled with the code (and kept in --token-file), or read from --token-file.
    func deviceToken(_ transport: CurlTransport) async throws -> String {
        guard let code else {
            // Every token file is read by one rule: the first line, one word, a bounded read.
            guard let token = SecretSource.file(tokenFile!).read() else { throw CommandError.message("\(tokenFile!): no device token in it") }
            return token
        }
        let enrolled: (token: String, patientID: String)
        do { enrolled = try await CareKitDevice.enroll(gateway: gateway, code: code, transport: transport) } catch { throw CommandError.message(error.description) }
        print("enrolled for \(TerminalText.escaped(enrolled.patientID))")
        if let tokenFile {
            guard FileManager.default.createFile(atPath: tokenFile, contents: Data((enrolled.token + "\n").utf8), attributes: [.posixPermissions: 0o600]) else {
                throw CommandError.message("\(tokenFile): cannot write the device token")
            }
        }
        return enrolled.token
    }
}
