import Foundation
import Testing

/// An empty working folder of a test's own, outside the repository.
func outsideFolder(_ name: String) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-outside-\(name)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// CareGate as a new user meets it: run from a folder that is not the repository, with the
/// mapping files built into the binary, a site's files over them, and defaults from the environment.
@Suite("caregate outside the repository")
struct OutsideRepositoryTests {
    let cli = CommandLineTests()

    func emptyFolder(_ name: String) throws -> URL { try outsideFolder(name) }

    var demoBundle: String { CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path }

    @Test("import, export and validate use the built-in mappings when no --mappings is given")
    func builtInMappings() async throws {
        let folder = try emptyFolder("builtin")
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try await cli.caregate(["import", demoBundle, "--tz", "America/New_York"], directory: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("1 file, 15 resources, 1 patient: 15 created"))
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("caregate.sqlite").path))
        // The same files on disk are the same mappings: nothing changes, provenance included.
        let repository = CommandLineTests.projectRoot.appendingPathComponent("Mappings").path
        let again = try await cli.caregate(["import", demoBundle, "--tz", "America/New_York", "--mappings", repository,
                                            "--mapping-root", CommandLineTests.projectRoot.path], directory: folder)
        #expect(again.stdout.contains("1 file, 15 resources, 1 patient: 15 unchanged"), "\(again.stdout)")
        let export = try await cli.caregate(["export", "-o", "out.ndjson", "--tz", "America/New_York"], directory: folder)
        #expect(export.status == 0, "\(export.stderr)")
        let validate = try await cli.caregate(["validate"], directory: folder)
        #expect(validate.status == 0, "\(validate.stderr)")
        // The built-in files' golden tests read the repository's samples: nothing to warn of here.
        #expect(validate.stderr.contains("11 mapping files checked: 0 errors, 0 warnings"), "\(validate.stderr)")
        #expect(validate.stdout.isEmpty, "\(validate.stdout)")
    }

    @Test("mappings dump writes the built-in files; a site file given with --mappings overrides its type, extends builtin: files, and the rest stay built in")
    func siteOverBuiltIn() async throws {
        let folder = try emptyFolder("site")
        defer { try? FileManager.default.removeItem(at: folder) }
        let dump = try await cli.caregate(["mappings", "dump", "dumped"], directory: folder)
        #expect(dump.status == 0, "\(dump.stderr)")
        for file in ["careplan.yaml", "shared/timing.yaml", "README.md", "tests/maria-lopez-demo-bundle.expected.json"] {
            let written = try Data(contentsOf: folder.appendingPathComponent("dumped/\(file)"))
            #expect(written == (try Data(contentsOf: CommandLineTests.projectRoot.appendingPathComponent("Mappings/\(file)"))), "\(file)")
        }
        let again = try await cli.caregate(["mappings", "dump", "dumped"], directory: folder)
        #expect(again.status == 1 && again.stderr.contains("the file exists already"))
        // A site's CarePlan mapping: the built-in one with another plan title.
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("site"), withIntermediateDirectories: true)
        try """
            caregate-mapping: 1
            resource: CarePlan
            extends: builtin:careplan.yaml
            care-plan:
              title: "'Plan from the clinic'"
            """.write(to: folder.appendingPathComponent("site/careplan.yaml"), atomically: true, encoding: .utf8)
        let run = try await cli.caregate(["import", demoBundle, "--mappings", "site", "--tz", "America/New_York"], directory: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("15 created"), "the patient, care team and requests still map through the built-in files")
        let plans = try await cli.caregate(["store", "export", "--carekit"], directory: folder)
        #expect(plans.stdout.contains("\"title\":\"Plan from the clinic\""))
        // The same through the environment, into the store it names.
        let environment = ["CAREGATE_MAPPINGS": "site", "CAREGATE_STORE": folder.appendingPathComponent("env.sqlite").path]
        let viaEnvironment = try await cli.caregate(["import", demoBundle, "--tz", "America/New_York"], environment: environment, directory: folder)
        #expect(viaEnvironment.status == 0 && viaEnvironment.stdout.contains("15 created"), "\(viaEnvironment.stderr)")
        let fromEnvironment = try await cli.caregate(["store", "export", "--carekit"], environment: environment, directory: folder)
        #expect(fromEnvironment.stdout.contains("\"title\":\"Plan from the clinic\""))
        let status = try await cli.caregate(["status"], environment: environment, directory: folder)
        #expect(status.status == 0 && status.stdout.contains("outbox: 0 queued"))
        // A site file with an error stops the command with its location.
        try "caregate-mapping: 1\nresource: CarePlan\nextends: builtin:careplan.yaml\ncare-plan:\n  titel: x\n"
            .write(to: folder.appendingPathComponent("site/careplan.yaml"), atomically: true, encoding: .utf8)
        let broken = try await cli.caregate(["import", demoBundle, "--mappings", "site"], directory: folder)
        #expect(broken.status == 1)
        #expect(broken.stderr.contains("site/careplan.yaml:5:3: error: unknown key 'titel' in 'care-plan'; did you mean 'title'?"), "\(broken.stderr)")
    }

    @Test("a mapping folder copied without FHIRSamples/: import works, validate warns, caregate test fails naming the missing input")
    func goldenInputMissing() async throws {
        let folder = try emptyFolder("copied")
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try await cli.caregate(["mappings", "dump", "Mappings"], directory: folder).status == 0)
        let run = try await cli.caregate(["import", demoBundle, "--mappings", "Mappings", "--tz", "America/New_York"], directory: folder)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("15 created"))
        let validate = try await cli.caregate(["validate", "Mappings"], directory: folder)
        #expect(validate.status == 0)
        #expect(validate.stdout.contains("Mappings/careplan.yaml:78:5: warning: the test file '../FHIRSamples/bundle/maria-lopez-demo-bundle.json' does not exist"))
        let test = try await cli.caregate(["test", "Mappings"], directory: folder)
        #expect(test.status == 1)
        #expect(test.stdout.contains("the test input '../FHIRSamples/bundle/maria-lopez-demo-bundle.json' does not exist (named in Mappings/careplan.yaml)"))
        #expect(test.stdout.contains("6 golden tests: 0 passed, 6 failed"))
        // With the samples beside it, the dumped folder's tests pass as the repository's do.
        try FileManager.default.copyItem(at: CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples"), to: folder.appendingPathComponent("FHIRSamples"))
        let passing = try await cli.caregate(["test", "Mappings"], directory: folder)
        #expect(passing.status == 0, "\(passing.stdout)")
    }

    @Test("an unknown --tz is refused with the same message by import, export, push and store events")
    func badTimeZone() async throws {
        let folder = try emptyFolder("tz")
        defer { try? FileManager.default.removeItem(at: folder) }
        let commands = [["import", demoBundle], ["export"], ["push", "--to", "http://127.0.0.1:9/fhir"], ["store", "events", "--from", "2026-11-02", "--to", "2026-11-03"]]
        for command in commands {
            let run = try await cli.caregate(command + ["--tz", "Bad/Zone"], directory: folder)
            #expect(run.status == 64, "\(command)")
            #expect(run.stderr.contains("unknown time zone 'Bad/Zone' (use an IANA name such as America/New_York)"), "\(command): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("caregate.sqlite").path), "refused before the store is opened")
    }

    @Test("export refuses a --format that the output's extension contradicts, and writes nothing")
    func exportFormatMismatch() async throws {
        let folder = try emptyFolder("export")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cases: [([String], String)] = [
            (["--format", "ndjson", "-o", "out.xml"], "--format ndjson writes JSON lines, not a .xml file"),
            (["-o", "out.json"], "--format ndjson writes JSON lines, not a .json file"),
            (["--format", "bundle", "-o", "out.ndjson"], "--format bundle writes one Bundle, not .ndjson lines"),
            (["--format", "xml", "-o", "out.xml"], "--format xml writes one file per resource into a directory"),
            (["--format", "json"], "--format json writes one file per resource: give -o DIRECTORY"),
        ]
        for (arguments, message) in cases {
            let run = try await cli.caregate(["export"] + arguments, directory: folder)
            #expect(run.status == 64, "\(arguments)")
            #expect(run.stderr.contains(message), "\(arguments): \(run.stderr)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).isEmpty)
        // With a store to read, the same outputs named as their formats are written.
        #expect(try await cli.caregate(["import", CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path, "--tz", "America/New_York"], directory: folder).status == 0)
        #expect(try await cli.caregate(["export", "--format", "bundle", "-o", "out.xml"], directory: folder).status == 0)
        #expect(try await cli.caregate(["export", "-o", "out.ndjson"], directory: folder).status == 0)
    }
}

@Suite("What an operator sees")
struct OperatorOutputTests {
    let cli = CommandLineTests()

    @Test("terminal control sequences in FHIR data are shown escaped, never sent to the terminal")
    func escapesReachNoTerminal() async throws {
        let folder = try outsideFolder("escapes")
        defer { try? FileManager.default.removeItem(at: folder) }
        let plan = #"""
            {"resourceType": "CarePlan", "id": "esc", "status": "active", "intent": "plan", "subject": {"reference": "Patient/p"},
             "activity": [{"detail": {"status": "scheduled", "code": {"text": "Walk"}, "scheduledString": "\u001b[2J\u001b[31mOWNED\u0007"}}]}
            """#
        try plan.write(to: folder.appendingPathComponent("plan.json"), atomically: true, encoding: .utf8)
        // FHIR strings may not hold them: the import says so where they are, and keeps U+FFFD.
        let run = try await cli.caregate(["import", "plan.json", "--tz", "America/New_York"], directory: folder)
        #expect(run.stdout.contains("plan.json:2:96: CarePlan/esc CarePlan.activity[0].detail.scheduledString: warning: control character U+001B in a string"), "\(run.stdout)")
        #expect(run.stdout.contains(#"("\#u{FFFD}[2J\#u{FFFD}[31mOWNED\#u{FFFD}")"#), "\(run.stdout)")
        #expect(!run.stdout.contains("\u{1B}") && !run.stderr.contains("\u{1B}"))
        // CareKit strings may: the events list shows them escaped.
        var record = try StoreCommandTests().record(tasks: 1).json().serialized(pretty: true)
        record = record.replacingOccurrences(of: "Task 0", with: #"\u001b[2J\u001b[31mOWNED\u0007"#)
        try record.write(to: folder.appendingPathComponent("record.json"), atomically: true, encoding: .utf8)
        #expect(try await cli.caregate(["store", "import", "--carekit", "record.json"], directory: folder).status == 0)
        let events = try await cli.caregate(["store", "events", "--from", "2026-11-02", "--to", "2026-11-03", "--tz", "America/New_York"], directory: folder)
        #expect(events.stdout.contains(#"\u{1B}[2J\u{1B}[31mOWNED\u{7}"#), "\(events.stdout)")
        #expect(!events.stdout.contains("\u{1B}") && !events.stderr.contains("\u{1B}"))
    }

    @Test("a token file other users can read is accepted with a warning naming it")
    func sharedSecretWarning() async throws {
        let folder = try outsideFolder("secret")
        defer { try? FileManager.default.removeItem(at: folder) }
        let token = folder.appendingPathComponent("ehr.token").path
        try "abc\n".write(toFile: token, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: token)
        #expect(try await cli.caregate(["import", CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path, "--tz", "America/New_York"], directory: folder).status == 0)
        let shared = try await cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--dry-run", "--token-file", token], directory: folder)
        #expect(shared.stderr.contains("warning: \(token) can be read by other users (mode 644)"), "\(shared.stderr)")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: token)
        let owned = try await cli.caregate(["push", "--to", "http://127.0.0.1:9/fhir", "--dry-run", "--token-file", token], directory: folder)
        #expect(!owned.stderr.contains("can be read by other users"))
    }
}

@Suite("Mapping files read inside their root")
struct MappingRootTests {
    let cli = CommandLineTests()

    @Test("the shipped Mappings/ named from another working folder: validate finds nothing wrong, its golden tests pass, import and export use it (the mapping root came from the working directory)")
    func mappingsFromElsewhere() async throws {
        let folder = try outsideFolder("elsewhere")
        defer { try? FileManager.default.removeItem(at: folder) }
        let mappings = CommandLineTests.projectRoot.appendingPathComponent("Mappings").path
        let demoBundle = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json").path
        let validate = try await cli.caregate(["validate", mappings], directory: folder)
        #expect(validate.status == 0 && validate.stderr.contains(": 0 errors, 0 warnings"), "\(validate.stdout)\(validate.stderr)")
        let test = try await cli.caregate(["test", mappings], directory: folder)
        #expect(test.status == 0 && test.stdout.contains("6 golden tests: 6 passed, 0 failed"), "\(test.stdout)")
        let run = try await cli.caregate(["import", demoBundle, "--mappings", mappings, "--store", "care.sqlite", "--tz", "America/New_York"], directory: folder)
        #expect(run.status == 0 && run.stdout.contains("15 created"), "\(run.stderr)")
        let export = try await cli.caregate(["export", "--mappings", mappings, "--store", "care.sqlite", "-o", "out.ndjson"], directory: folder)
        #expect(export.status == 0, "\(export.stderr)")
    }

    @Test("include, extends and test inputs outside the mapping root (the folder holding the mapping folder, or --mapping-root) are errors naming them")
    func confinement() async throws {
        let folder = try outsideFolder("root")
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("site"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try "caregate-mapping: 1\nresource: Patient\ninclude:\n  - /etc/passwd\nextends: ../../outside.yaml\ntests:\n  - input: /etc/hostname\n    expect: t.json\n"
            .write(to: folder.appendingPathComponent("site/patient.yaml"), atomically: true, encoding: .utf8)
        let run = try await cli.caregate(["validate", "site"], directory: folder)
        #expect(run.status == 1)
        #expect(run.stdout.contains("site/patient.yaml:2:1: error: '/etc/passwd' is outside the mapping root"), "\(run.stdout)")
        #expect(run.stdout.contains("error: '../../outside.yaml' is outside the mapping root"))
        #expect(run.stdout.contains("error: the test input '/etc/hostname' is outside the mapping root"))
        #expect(!run.stdout.contains("root:x:0:0"), "nothing of the file is shown")
        let widened = try await cli.caregate(["validate", "site", "--mapping-root", "/"], directory: folder)
        #expect(!widened.stdout.contains("is outside the mapping root"), "\(widened.stdout)")
    }
}

