import CareStore
import Foundation
import PostgresStore
import Testing

/// A store path with a typo: the commands that only read (and `enroll`, which needs the
/// patient in the store) refuse it and make nothing; those that write make the store and say so.
@Suite("A store that does not exist")
struct MissingStoreTests {
    let cli = CommandLineTests()

    /// Every command that reads a store, with what else it needs to run.
    static let readers: [[String]] = [
        ["export"], ["export", "--format", "bundle"], ["store", "events", "--from", "2026-11-01", "--to", "2026-11-08", "--tz", "UTC"],
        ["store", "export", "--carekit"], ["audit", "list"], ["audit", "verify"], ["audit", "export"], ["audit", "prune", "--keep-days", "30", "--archive", "archive"],
        ["status"], ["devices", "list"], ["devices", "revoke", "some-device"], ["enroll", "--patient", "Patient/maria-lopez"],
        ["report", "--patient", "Patient/maria-lopez", "--from", "2026-11-01", "--to", "2026-11-08", "--tz", "UTC", "-o", "report.html"],
    ]

    @Test("every command that only reads refuses a missing SQLite store with 'no store at PATH' and makes no file; import makes it and says so")
    func sqlite() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-missing-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let typo = folder.appendingPathComponent("caregat.sqlite").path
        for command in Self.readers {
            let run = try await cli.caregate(command + ["--store", typo], directory: folder)
            #expect(run.status != 0, "\(command): \(run.stderr)")
            #expect(run.stderr.contains("no store at \(typo)"), "\(command): \(run.stderr)")
            let made = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            #expect(made.isEmpty, "\(command) made \(made)")
        }
        // The default path too (caregate.sqlite in the working directory).
        let bare = try await cli.caregate(["export"], environment: ["CAREGATE_STORE": ""], directory: folder)
        #expect(bare.status != 0 && bare.stderr.contains("no store at caregate.sqlite"), "\(bare.stderr)")
        let made = folder.appendingPathComponent("made.sqlite").path
        let imported = try await cli.caregate(["import", CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path,
                                               "--store", made, "--tz", "America/New_York"])
        #expect(imported.status == 0 && imported.stderr.contains("created a new store at \(made)"), "\(imported.stderr)")
        let again = try await cli.caregate(["import", CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path,
                                            "--store", made, "--tz", "America/New_York"])
        #expect(again.status == 0 && !again.stderr.contains("created a new store"), "\(again.stderr)")
        // Now that it exists, a reader opens it.
        #expect(try await cli.caregate(["audit", "verify", "--store", made]).status == 0)
        #expect(try await cli.caregate(["enroll", "--patient", "Patient/maria-lopez", "--store", made]).status == 0)
    }

    @Test("on PostgreSQL, a database without CareGate's tables is no store to a command that reads: refused, and no table is made")
    func postgres() async throws {
        guard let (location, password) = try TestPostgres.freshLocation(), let passwordFile = ProcessInfo.processInfo.environment["CAREGATE_TEST_POSTGRES_PASSWORD_FILE"] else { return }
        let url = location.description
        let store = ["--store", url, "--store-password-file", passwordFile]
        for command in [["export"], ["audit", "list"], ["status"], ["store", "events", "--from", "2026-11-01", "--to", "2026-11-08", "--tz", "UTC"]] {
            let run = try await cli.caregate(command + store)
            #expect(run.status != 0 && run.stderr.contains("no store at \(url)"), "\(command): \(run.stderr)")
        }
        let database = try PostgresDatabase(location, password: password, maximumConnections: 1)
        defer { database.close() }
        #expect(try PostgresSchema.isPresent(database) == false)
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--tz", "America/New_York"] + store)
        #expect(imported.status == 0 && imported.stderr.contains("created a new store in \(url)"), "\(imported.stderr)")
        #expect(try PostgresSchema.isPresent(database))
        #expect(try await cli.caregate(["audit", "verify"] + store).status == 0)
    }
}
