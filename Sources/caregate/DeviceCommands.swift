import ArgumentParser
import CareStore
import Foundation
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
        let store = try options.open()
        do {
            let issued = try DeviceEnrollment(store: store).issueCode(patientID: patient)
            let time = ISO8601DateFormatter().string(from: issued.expires)
            print(issued.code)
            StandardError.print("enrollment code for \(TerminalText.escaped(patient)), valid once until \(time)")
        } catch {
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
            """,
        subcommands: [DevicesList.self, DevicesRevoke.self])
}

struct DevicesList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "One line per device: id, patient, enrolled, last sync, revoked.")

    @OptionGroup var options: StoreOptions

    @Option(help: ArgumentHelp("Only this patient's devices.", valueName: "id"))
    var patient: String?

    func run() throws {
        let store = try options.open()
        let devices: [Device]
        do { devices = try store.devices(patientID: patient) } catch { throw CommandError.store(error) }
        let format = ISO8601DateFormatter()
        for device in devices {
            let synced = device.lastSyncAt.map { "last sync \(format.string(from: $0))" } ?? "never synced"
            let revoked = device.revokedAt.map { "  revoked \(format.string(from: $0))" } ?? ""
            print("\(device.id)  \(TerminalText.escaped(device.patientID))  enrolled \(format.string(from: device.enrolledAt))  \(synced)\(revoked)")
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
        let store = try options.open()
        let revoked: Bool
        do { revoked = try store.revokeDevice(id: id, at: Date()) } catch { throw CommandError.store(error) }
        guard revoked else { throw CommandError.message("no device \"\(TerminalText.escaped(id))\" (see `caregate devices list`)") }
        StandardError.print("revoked device \(id)")
    }
}
