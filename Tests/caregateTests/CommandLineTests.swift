import Foundation
import Testing
import FHIR

/// At most a few programs run by tests at once, across every test: hundreds of tests start
/// together, and dozens of CPU-bound child processes on two cores starved the servers other tests
/// run in this process (their requests timed out after a minute).
actor ProcessSlots {
    static let shared = ProcessSlots(limit: ProcessInfo.processInfo.activeProcessorCount + 1)
    let limit: Int
    var inUse = 0
    var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    func acquire() async {
        if inUse < limit {
            inUse += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Hands the place to the next waiting, else frees it.
    func release() {
        if waiting.isEmpty { inUse -= 1 } else { waiting.removeFirst().resume() }
    }
}

/// Runs the built `caregate` binary as a user would.
@Suite("caregate command line")
struct CommandLineTests {
    static let projectRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: ".")
    }()

    static let binary: String = {
        // The test bundle sits beside the products in the build folder.
        let buildDir = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [buildDir, buildDir.deletingLastPathComponent(), projectRoot.appendingPathComponent(".build/debug")] {
            let path = candidate.appendingPathComponent("caregate").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return projectRoot.appendingPathComponent(".build/debug/caregate").path
    }()

    struct Run { var status: Int32; var stdout: String; var stderr: String }

    /// Runs the caregate executable (in the repository unless `directory` says otherwise); waits
    /// for it without holding one of the few threads that async tests share. Unless
    /// `throttled` is false, it waits for one of `ProcessSlots`' few places first.
    func caregate(_ arguments: [String], environment: [String: String] = [:], directory: URL? = nil, throttled: Bool = true) async throws -> Run {
        try await run([Self.binary] + arguments, environment: environment, directory: directory, throttled: throttled)
    }

    /// Runs a program (the first argument, a path) the same way.
    func run(_ command: [String], environment: [String: String] = [:], directory: URL? = nil, throttled: Bool = true) async throws -> Run {
        guard throttled else { return try await launch(command, environment: environment, directory: directory) }
        await ProcessSlots.shared.acquire()
        do {
            let run = try await launch(command, environment: environment, directory: directory)
            await ProcessSlots.shared.release()
            return run
        } catch {
            await ProcessSlots.shared.release()
            throw error
        }
    }

    func launch(_ command: [String], environment: [String: String], directory: URL?) async throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.currentDirectoryURL = directory ?? Self.projectRoot
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-cli-\(UUID().uuidString).out")
        let err = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-cli-\(UUID().uuidString).err")
        _ = FileManager.default.createFile(atPath: out.path, contents: nil)
        _ = FileManager.default.createFile(atPath: err.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out); try? FileManager.default.removeItem(at: err) }
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try await withCheckedThrowingContinuation { (exited: CheckedContinuation<Void, any Error>) in
            process.terminationHandler = { _ in exited.resume() }
            do {
                try process.run()
            } catch {
                process.terminationHandler = nil
                exited.resume(throwing: error)
            }
        }
        return Run(status: process.terminationStatus,
                   stdout: String(decoding: try FileBytes.read(out.path), as: UTF8.self),
                   stderr: String(decoding: try FileBytes.read(err.path), as: UTF8.self))
    }

    func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("caregate-cli-\(getpid())-\(name)").path
    }

    @Test("--help lists the commands and version prints the version")
    func helpAndVersion() async throws {
        let help = try await caregate(["--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("USAGE: caregate <subcommand>"))
        #expect(help.stdout.contains("convert"))
        let version = try await caregate(["version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix("caregate ") && version.stdout.contains("FHIR R4 4.0.1"))
        let convertHelp = try await caregate(["help", "convert"])
        #expect(convertHelp.stdout.contains("--to <to>"))
    }

    @Test("convert JSON to XML and back gives the same resource")
    func convertRoundTrip() async throws {
        let xml = temporaryPath("plan.xml")
        let json = temporaryPath("plan.json")
        defer { try? FileManager.default.removeItem(atPath: xml); try? FileManager.default.removeItem(atPath: json) }
        let source = "FHIRSamples/json/CarePlan-maria-lopez-home-care.json"
        #expect(try await caregate(["convert", source, "--to", "xml", "-o", xml]).status == 0)
        let back = try await caregate(["convert", xml, "--to", "json", "-o", json])
        #expect(back.status == 0)
        #expect(back.stderr.contains("1 resource written"))
        let original = try FHIRJSONReader().read(contentsOf: Self.projectRoot.appendingPathComponent(source).path).resource
        #expect(try FHIRJSONReader().read(contentsOf: json).resource == original)
    }

    @Test("converting XML with an unknown element to JSON says the element is left out, not kept; within XML it is kept")
    func convertUnknownContent() async throws {
        let xml = temporaryPath("unknown.xml")
        let json = temporaryPath("unknown.json")
        let copy = temporaryPath("unknown-copy.xml")
        defer { for path in [xml, json, copy] { try? FileManager.default.removeItem(atPath: path) } }
        try #"<Patient xmlns="http://hl7.org/fhir"><id value="p"/><shoeSize value="44"/><active value="true"/></Patient>"#
            .write(toFile: xml, atomically: true, encoding: .utf8)
        let toJSON = try await caregate(["convert", xml, "--to", "json", "-o", json])
        #expect(toJSON.status == 0, "\(toJSON.stderr)")
        #expect(toJSON.stderr.contains("unknown.xml:1:53: warning: Patient: unknown element <shoeSize> in Patient (left out: unknown XML content has no JSON form)"), "\(toJSON.stderr)")
        #expect(try FHIRJSONReader().read(contentsOf: json).resource.children.map(\.name) == ["id", "active"])
        let toXML = try await caregate(["convert", xml, "--to", "xml", "-o", copy])
        #expect(toXML.stderr.contains("unknown element <shoeSize> in Patient (kept)"), "\(toXML.stderr)")
        // Kept after the known elements, as every tree keeps unknown content.
        #expect(try FHIRXMLReader(options: ParseOptions(lenient: true)).read(contentsOf: copy).resource.children.map(\.name) == ["id", "active", "shoeSize"])
    }

    @Test("convert a Bundle to NDJSON and NDJSON to a collection Bundle")
    func convertStreams() async throws {
        let ndjson = temporaryPath("demo.ndjson")
        let bundle = temporaryPath("collection.xml")
        defer { try? FileManager.default.removeItem(atPath: ndjson); try? FileManager.default.removeItem(atPath: bundle) }
        let toLines = try await caregate(["convert", "FHIRSamples/bundle/maria-lopez-demo-bundle.xml", "--to", "ndjson", "-o", ndjson])
        #expect(toLines.status == 0, "\(toLines.stderr)")
        #expect(try String(contentsOfFile: ndjson, encoding: .utf8).split(separator: "\n").count == 15)
        let toBundle = try await caregate(["convert", ndjson, "--to", "xml", "-o", bundle])
        #expect(toBundle.status == 0, "\(toBundle.stderr)")
        let collection = try FHIRXMLReader().read(contentsOf: bundle).resource
        #expect(collection.string("type") == "collection")
        #expect(collection.children(named: "entry").count == 15)
    }

    @Test("an invalid file fails with exit status 1, a located error, and the output file untouched")
    func invalidInput() async throws {
        let bad = temporaryPath("bad.json")
        let out = temporaryPath("out.xml")
        defer { try? FileManager.default.removeItem(atPath: bad); try? FileManager.default.removeItem(atPath: out) }
        try #"{"resourceType": "Observation", "status": "done", "code": {"text": "x"}}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        try "previous content".write(toFile: out, atomically: true, encoding: .utf8)
        let run = try await caregate(["convert", bad, "--to", "xml", "-o", out])
        #expect(run.status == 1)
        #expect(run.stderr.contains("\(bad):1:43: error: Observation.status: expected one of registered|preliminary|final"))
        #expect(try String(contentsOfFile: out, encoding: .utf8) == "previous content")
        let folder = (out as NSString).deletingLastPathComponent, name = (out as NSString).lastPathComponent
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasPrefix(".\(name).partial-") }.isEmpty, "no partial file is left")
    }

    @Test("usage errors name the problem and exit with argument-parser's usage status")
    func usageErrors() async throws {
        let missing = try await caregate(["convert", "FHIRSamples/json/Patient-maria-lopez.json"])
        #expect(missing.status == 64)
        #expect(missing.stderr.contains("Missing expected argument '--to <to>'"))
        let badFormat = try await caregate(["convert", "x.json", "--to", "yaml"])
        #expect(badFormat.status == 64)
        #expect(badFormat.stderr.contains("yaml"))
    }

    @Test("document limits can be set from the command line and are reported when hit")
    func limits() async throws {
        let source = "FHIRSamples/json/CarePlan-maria-lopez-home-care.json"
        let deep = try await caregate(["convert", source, "--to", "xml", "--max-depth", "4"])
        #expect(deep.status == 1)
        #expect(deep.stderr.contains("CarePlan-maria-lopez-home-care.json:13:19: error: CarePlan.category[0].coding[0]: nesting deeper than the limit of 4"))
        let big = try await caregate(["convert", source, "--to", "xml", "--max-size", "1000"])
        #expect(big.status == 1)
        #expect(big.stderr.contains("larger than the limit of 1000"))
        #expect(try await caregate(["convert", source, "--to", "xml", "--max-depth", "20"]).status == 0)
    }

    @Test("a missing input file is reported by path")
    func missingFile() async throws {
        let run = try await caregate(["convert", "/nonexistent/in.json", "--to", "xml"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("/nonexistent/in.json: error: cannot read: No such file or directory"))
    }
}
