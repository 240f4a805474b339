import CareStore
import FHIRClient
import Foundation
import Testing

@Suite("caregate import")
struct ImportCommandTests {
    let cli = CommandLineTests()
    let bundle = "FHIRSamples/bundle/maria-lopez-demo-bundle.json"

    @Test("imports the demo Bundle, prints the report and a summary; again changes nothing; --dry-run writes nothing")
    func importAndReimport() async throws {
        let store = cli.temporaryPath("import.sqlite")
        let first = try await cli.caregate(["import", bundle, "--store", store, "--tz", "America/New_York"])
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("skipped: doNotPerform - the activity is forbidden, not a to-do"))
        #expect(first.stdout.hasSuffix("1 file, 15 resources, 1 patient: 15 created\n"))
        let second = try await cli.caregate(["import", bundle, "--store", store, "--tz", "America/New_York"])
        #expect(second.stdout.hasSuffix("1 file, 15 resources, 1 patient: 15 unchanged\n"))
        let dryStore = cli.temporaryPath("dry.sqlite")
        let dry = try await cli.caregate(["import", bundle, "--store", dryStore, "--dry-run", "--format", "json"])
        let report = try JSONSerialization.jsonObject(with: Data(dry.stdout.utf8)) as! [String: Any]
        #expect(report["dryRun"] as? Bool == true)
        let changes = (report["patients"] as! [[String: Any]])[0]["changes"] as! [[String: Any]]
        #expect(changes.count == 15 && changes.allSatisfy { $0["action"] as? String == "create" })
        #expect(!FileManager.default.fileExists(atPath: dryStore), "a dry run creates no store")
        // The report file holds patients' data: owner-only, like the store.
        let reportPath = cli.temporaryPath("report.json")
        defer { try? FileManager.default.removeItem(atPath: reportPath) }
        let reported = try await cli.caregate(["import", bundle, "--store", store, "--tz", "America/New_York", "--report", reportPath])
        #expect(reported.status == 0)
        #expect((try FileManager.default.attributesOfItem(atPath: reportPath)[.posixPermissions] as? Int) == 0o600)
        #expect((try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: reportPath))) as? [String: Any])?["resources"] as? Int == 15)
    }

    @Test("a store named by a bare file name is made in the working directory, its scratch files beside it (it crashed)")
    func bareStoreName() async throws {
        let dir = URL(fileURLWithPath: cli.temporaryPath("bare-\(UUID().uuidString)"))
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let absolute = CommandLineTests.projectRoot.appendingPathComponent(bundle).path
        let run = try await cli.caregate(["import", absolute, "--store", "S", "--tz", "America/New_York"], directory: dir)
        #expect(run.status == 0 && run.stdout.hasSuffix("15 created\n"), "\(run.stderr)")
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("S").path))
    }

    @Test("mapping files with errors are refused with their diagnostics, and nothing is imported")
    func badMappings() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-badmap-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try "caregate-mapping: 1\nresource: Patient\npatient-fields:\n  id: idd\n".write(to: directory.appendingPathComponent("patient.yaml"), atomically: true, encoding: .utf8)
        let store = cli.temporaryPath("bad.sqlite")
        let run = try await cli.caregate(["import", bundle, "--store", store, "--mappings", directory.path])
        #expect(run.status == 1)
        #expect(run.stderr.contains("patient.yaml:4:7: error: 'idd' is not an element of Patient; did you mean 'id'?"))
        #expect(run.stderr.contains("the mapping files have errors; nothing was imported"))
        // Site files are loaded before the store opens: a refused run makes no store.
        #expect(!FileManager.default.fileExists(atPath: store))
    }

    @Test("an unreadable file is reported with its place; the other files are imported")
    func badFile() async throws {
        let broken = cli.temporaryPath("broken.json")
        try "{\"resourceType\": \"Patient\", \"id\": \"x\", \"gender\": \"robot\"".write(toFile: broken, atomically: true, encoding: .utf8)
        let store = cli.temporaryPath("partial.sqlite")
        let run = try await cli.caregate(["import", broken, bundle, "--store", store])
        #expect(run.status == 1)
        #expect(run.stdout.contains("broken.json"))
        #expect(run.stdout.contains("15 created"))
    }
}

@Suite("Folders given to caregate import and validate")
struct FolderArgumentTests {
    let cli = CommandLineTests()

    /// A scratch folder holding a link to the samples' JSON folder, a link to the mappings, and
    /// an empty folder.
    func links() throws -> URL {
        let folder = URL(fileURLWithPath: cli.temporaryPath("links-\(UUID().uuidString)"))
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("empty"), withIntermediateDirectories: true)
        let root = CommandLineTests.projectRoot
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("samples"), withDestinationURL: root.appendingPathComponent("FHIRSamples/json"))
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("mappings"), withDestinationURL: root.appendingPathComponent("Mappings"))
        return folder
    }

    @Test("a link to a folder is searched like the folder (it read as empty: 0 files, nothing to do, exit 0)")
    func linkedFolders() async throws {
        let folder = try links()
        defer { try? FileManager.default.removeItem(at: folder) }
        let store = folder.appendingPathComponent("s.sqlite").path
        let run = try await cli.caregate(["import", folder.appendingPathComponent("samples").path, "--store", store, "--tz", "America/New_York"])
        #expect(run.stdout.hasSuffix("16 files, 16 resources, 1 patient: 17 created\n"), "\(run.stdout)\(run.stderr)")
        let listed = try await cli.caregate(["validate", "--format", "json", folder.appendingPathComponent("mappings").path])
        let files = (try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])?["files"] as? [String] ?? []
        let shipped = try FileManager.default.subpathsOfDirectory(atPath: CommandLineTests.projectRoot.appendingPathComponent("Mappings").path).filter { $0.hasSuffix(".yaml") }
        #expect(files.count == shipped.count && files.allSatisfy { $0.hasPrefix(folder.appendingPathComponent("mappings").path + "/") }, "\(listed.stdout)")
    }

    @Test("a folder with nothing to read is an error naming it, for import and validate, and the other paths are still read")
    func emptyFolders() async throws {
        let folder = try links()
        defer { try? FileManager.default.removeItem(at: folder) }
        let empty = folder.appendingPathComponent("empty").path
        let store = folder.appendingPathComponent("s.sqlite").path
        let run = try await cli.caregate(["import", empty, bundle, "--store", store, "--tz", "America/New_York"])
        #expect(run.status == 1)
        #expect(run.stdout.contains("\(empty): empty: error: a folder with no .json, .xml or .ndjson file in it"), "\(run.stdout)")
        #expect(run.stdout.hasSuffix("15 created\n"))
        let checked = try await cli.caregate(["validate", empty])
        #expect(checked.status == 1)
        #expect(checked.stderr.contains("\(empty): error: a folder with no mapping file (.yaml, .yml) in it") || checked.stdout.contains("\(empty): error: a folder with no mapping file"), "\(checked.stdout)\(checked.stderr)")
    }
    let bundle = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path
}

@Suite("caregate import of a population")
struct PopulationImportTests {
    let cli = CommandLineTests()

    @Test("a population in NDJSON (scripts/population.py) with two malformed lines: each reported with its file and line, skipped; every patient imported; exit status 1")
    func badLinesInAPopulation() async throws {
        guard FileManager.default.fileExists(atPath: "../shared/synthea") else {
            return print("SKIPPED the population import: ../shared/synthea is not present beside the project")
        }
        let directory = cli.temporaryPath("population")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "scripts/population.py", directory, "--copies", "1", "--bad-lines", "2"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let badLines = try #require(printed.split(separator: "\n").first { $0.hasPrefix("bad lines") }).split(separator: ":")[1].split(separator: " ").map(String.init)
        #expect(badLines.count == 2)
        let storeDirectory = cli.temporaryPath("population-store")
        try FileManager.default.createDirectory(atPath: storeDirectory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: storeDirectory) }
        let store = storeDirectory + "/care.sqlite"
        let run = try await cli.caregate(["import", directory, "--store", store, "--tz", "America/New_York"])
        #expect(run.status == 1)
        for line in badLines {
            #expect(run.stdout.contains("\(directory)/Observation.ndjson:\(line):36: line \(line) Observation: error: expected a value, found the end of input"), "\(run.stdout)")
        }
        #expect(run.stdout.contains(", 20 patients: "), "\(run.stdout.suffix(300))")
        #expect(try SQLiteCarePlanStore(path: store).fetchPatients().count == 20)
        #expect(try SQLiteCarePlanStore(path: store).fetchCarePlans().count > 20)
        // The staging database beside the store is gone.
        #expect(try FileManager.default.contentsOfDirectory(atPath: storeDirectory).filter { $0.hasPrefix("caregate-staging-") }.isEmpty)
    }
}

@Suite("caregate import --bulk-from", .serialized)
struct BulkImportCommandTests {
    let cli = CommandLineTests()

    @Test("imports a system-level Bulk Data export of a real FHIR server, says how long the server, the downloads and the import took, cleans up; --since last then finds nothing new")
    func bulkFromServer() async throws {
        guard let server = await LocalFHIRServer() else { return }
        _ = try await seededWithSamples(server)
        let store = cli.temporaryPath("bulk.sqlite")
        let arguments = ["import", "--bulk-from", server.base, "--system-level", "--type", "Patient,CarePlan,MedicationRequest,CareTeam,Practitioner,PractitionerRole",
                         "--store", store, "--tz", "America/New_York"]
        let first = try await cli.caregate(arguments)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stderr.contains("export started: \(server.base)/"))
        #expect(first.stderr.contains("downloaded CarePlan ("))
        #expect(first.stderr.contains(" on the server, ") && first.stderr.contains(" downloading, ") && first.stderr.contains(" importing"))
        #expect(first.stdout.hasSuffix("\(server.base): 11 resources, 1 patient: 13 created\n"), "\(first.stdout)")
        #expect(try !FileManager.default.fileExists(atPath: store + ".bulk/") || FileManager.default.contentsOfDirectory(atPath: store + ".bulk").isEmpty)

        let again = try await cli.caregate(arguments + ["--since", "last"])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("changes for 0 patients"), "\(again.stderr)")
        #expect(again.stdout.hasSuffix("\(server.base): 0 resources, 0 patients: nothing to do\n"), "\(again.stdout)")

        let wrong = try await cli.caregate(["import", "--bulk-from", server.base, "--since", "yesterday", "--store", store])
        #expect(wrong.status != 0 && wrong.stderr.contains("--since must be an instant with a time zone"))
        let mixed = try await cli.caregate(["import", "FHIRSamples/json", "--group", "g", "--store", store])
        #expect(mixed.status != 0 && mixed.stderr.contains("--group, --system-level, --since, --type and --download-dir go with --bulk-from"))
    }
}
