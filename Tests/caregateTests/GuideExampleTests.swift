import CareStore
import FHIR
import FHIRClient
import Foundation
import Testing

/// The guides in `docs/` teach by example: every ```` ```console ```` block is run here from the
/// repository's folder, on a store of its own, and its output compared line by line (those that
/// talk to an EHR against sekmet-fhir in its place). The commands of ```` ```sh ```` blocks and
/// `caregate --help`'s examples are checked to be commands that exist, with options they have.
@Suite("The guides' examples")
struct GuideExampleTests {
    let cli = CommandLineTests()

    /// One ```` ```console ```` block: its commands (`$ ` lines) with the output each should print.
    struct ConsoleBlock: CustomStringConvertible {
        var file: String
        var line: Int
        var steps: [(command: String, output: [String])]
        /// The words after `console` on the opening line: `ehr` for a block run against a FHIR
        /// server, `recorded` for one that starts from the demo patient with outcomes an app recorded.
        var settings: [String] = []
        var description: String { "\(file):\(line)" }
    }

    static func consoleBlocks(in file: URL) throws -> [ConsoleBlock] {
        let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
        var blocks: [ConsoleBlock] = []
        var current: ConsoleBlock?
        for (index, line) in lines.enumerated() {
            if current == nil {
                if line == "```console" || line.hasPrefix("```console ") {
                    current = ConsoleBlock(file: "docs/" + file.lastPathComponent, line: index + 1, steps: [],
                                           settings: line.split(separator: " ").dropFirst().map(String.init))
                }
            } else if line == "```" {
                blocks.append(current!)
                current = nil
            } else if line.hasPrefix("$ ") {
                current!.steps.append((String(line.dropFirst(2)), []))
            } else if let last = current!.steps.last, last.output.isEmpty, last.command.hasSuffix("\\") {
                current!.steps[current!.steps.count - 1].command = last.command.dropLast() + line.trimmingCharacters(in: .whitespaces)
            } else if !current!.steps.isEmpty {
                current!.steps[current!.steps.count - 1].output.append(line)
            }
        }
        return blocks
    }

    static var guides: [URL] {
        let docs = CommandLineTests.projectRoot.appendingPathComponent("docs")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: docs.path)) ?? []
        return names.filter { $0.hasSuffix(".md") }.sorted().map { docs.appendingPathComponent($0) }
    }

    /// A printed line matches its expected one exactly, where each `…` in the expected one
    /// stands for any text (a path, an id or a time that differs between runs).
    static func matches(_ printed: String, _ expected: String) -> Bool {
        let pieces = expected.components(separatedBy: "…")
        guard pieces.count > 1 else { return printed == expected }
        guard printed.hasPrefix(pieces.first!), printed.dropFirst(pieces.first!.count).hasSuffix(pieces.last!),
              printed.count >= pieces.first!.count + pieces.last!.count else { return false }
        var rest = printed.dropFirst(pieces.first!.count).dropLast(pieces.last!.count)
        for piece in pieces.dropFirst().dropLast() {
            guard let found = rest.range(of: piece) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }

    /// Printed lines match the expected ones line by line, where an expected line that is only
    /// `…` stands for any number of lines (progress that depends on the server's pace).
    static func matches(_ printed: ArraySlice<String>, _ expected: ArraySlice<String>) -> Bool {
        guard let first = expected.first else { return printed.isEmpty }
        if first == "…" {
            return (printed.startIndex...printed.endIndex).contains { matches(printed[$0...], expected.dropFirst()) }
        }
        guard let line = printed.first, matches(line, first) else { return false }
        return matches(printed.dropFirst(), expected.dropFirst())
    }

    @Test("every console block in docs/ prints what the guide says it prints")
    func consoleBlocksRun() async throws {
        let blocks = try Self.guides.flatMap(Self.consoleBlocks).filter { !$0.settings.contains("ehr") && !$0.settings.contains("packages") }
        #expect(blocks.count >= 4, "the guides' console blocks were found: \(blocks)")
        for block in blocks {
            let scratch = try temporaryFolder("store")
            defer { try? FileManager.default.removeItem(at: scratch) }
            try await run(block, in: CommandLineTests.projectRoot, store: scratch.appendingPathComponent("caregate.sqlite"))
        }
    }

    /// Runs a block's commands with `caregate` on the PATH and `CAREGATE_STORE` set, comparing
    /// what each prints (standard output and error together) with the guide; `replacing` turns
    /// the guide's example server into the one the test runs.
    func run(_ block: ConsoleBlock, in directory: URL, store: URL, replacing: (String, String)? = nil) async throws {
        let bin = try temporaryFolder("bin")
        defer { try? FileManager.default.removeItem(at: bin) }
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("caregate").path, withDestinationPath: CommandLineTests.binary)
        let environment = ["CAREGATE_STORE": store.path,
                           "PATH": bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        let local = { (text: String) in replacing.map { text.replacingOccurrences(of: $0.0, with: $0.1) } ?? text }
        for step in block.steps {
            let run = try await cli.run(["/bin/bash", "-o", "pipefail", "-c", local(step.command) + " 2>&1"], environment: environment, directory: directory)
            // The test's store stands in for the reader's default one (`caregate.sqlite` in the working directory).
            var printed = run.stdout.replacingOccurrences(of: store.path, with: "caregate.sqlite").components(separatedBy: "\n")
            if printed.last == "" { printed.removeLast() }
            let expected = step.output.map(local)
            #expect(Self.matches(printed[...], expected[...]), "\(block): $ \(step.command)\nprinted:\n\(printed.joined(separator: "\n"))\nthe guide says:\n\(expected.joined(separator: "\n"))")
        }
    }

    @Test("the console blocks that read FHIR packages print what the guide says, with US Core's packages where the reader downloaded them")
    func packageConsoleBlocksRun() async throws {
        let blocks = try Self.guides.flatMap(Self.consoleBlocks).filter { $0.settings.contains("packages") }
        #expect(blocks.count >= 3, "the guides' package console blocks were found: \(blocks)")
        let packages = CommandLineTests.projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages")
        guard FileManager.default.fileExists(atPath: packages.path) else {
            return print("SKIPPED the guides' package examples: ../shared/fhir-packages is not present")
        }
        for block in blocks {
            // The reader's folder: the samples and mappings, and the packages as downloaded.
            let folder = try temporaryFolder("packages")
            defer { try? FileManager.default.removeItem(at: folder) }
            for linked in ["FHIRSamples", "Mappings", "docs"] {
                try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(linked), withDestinationURL: CommandLineTests.projectRoot.appendingPathComponent(linked))
            }
            for version in ["3.1.1", "6.1.0"] {
                let name = "hl7.fhir.us.core-\(version).tgz"
                try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(name), withDestinationURL: packages.appendingPathComponent(name))
            }
            try await run(block, in: folder, store: folder.appendingPathComponent("caregate.sqlite"))
        }
    }

    @Test("the console blocks that talk to an EHR print what the guide says against a real FHIR server (sekmet-fhir) put in its place")
    func ehrConsoleBlocksRun() async throws {
        let blocks = try Self.guides.flatMap(Self.consoleBlocks).filter { $0.settings.contains("ehr") }
        #expect(blocks.count >= 3, "the guides' EHR console blocks were found: \(blocks)")
        guard let ehr = await LocalFHIRServer() else { return }
        let client = FHIRRESTClient(base: ehr.base, timeout: 20)
        let samples = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/json")
        let files = try FileManager.default.contentsOfDirectory(atPath: samples.path).sorted().map { samples.appendingPathComponent($0).path }
        let cohort = try FHIRJSONReader().read(#"{"resourceType": "Group", "id": "heart-failure-cohort", "type": "person", "actual": true, "member": [{"entity": {"reference": "Patient/maria-lopez"}}]}"#).resource
        _ = try await client.transaction(seedTransaction(resources: try files.map { try FHIRDocument.read(contentsOf: $0).resource } + [cohort], base: ehr.base))
        for block in blocks {
            // The guide's reader is in a folder with the samples, the mappings and a token file.
            let folder = try temporaryFolder("ehr")
            defer { try? FileManager.default.removeItem(at: folder) }
            for linked in ["FHIRSamples", "Mappings"] {
                try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(linked), withDestinationURL: CommandLineTests.projectRoot.appendingPathComponent(linked))
            }
            try "a-token-the-server-takes\n".write(to: folder.appendingPathComponent("ehr.token"), atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: folder.appendingPathComponent("ehr.token").path)
            let store = folder.appendingPathComponent("caregate.sqlite")
            if block.settings.contains("recorded") { try await recordWalks(3, store: store) }
            try await run(block, in: folder, store: store, replacing: ("https://ehr.example.org/fhir", ehr.base))
        }
    }

    /// The demo patient imported, and her walks recorded for the first `count` days, as her app would.
    func recordWalks(_ count: Int, store path: URL) async throws {
        let imported = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", path.path, "--tz", "America/New_York"])
        #expect(imported.status == 0, "\(imported.stderr)")
        let store = try SQLiteCarePlanStore(path: path.path)
        let walk = try #require(store.fetchTasks(EntityQuery(ids: ["CarePlan/maria-lopez-home-care/229065009"])).first)
        try store.add((0..<count).map { .outcome(Outcome(taskUUID: walk.uuid, taskOccurrenceIndex: $0, values: [OutcomeValue(.boolean(true))])) })
    }

    @Test("a console block's output that differs from what runs is caught; … stands for some text within a line, or alone for any lines")
    func comparisonCanFail() {
        #expect(Self.matches("/tmp/x/maria.json#entry[1]: ok", "…/maria.json#entry[1]: ok"))
        #expect(!Self.matches("/tmp/x/maria.json#entry[1]: ok", "…/maria.json#entry[2]: ok"))
        #expect(!Self.matches("15 created", "15 unchanged"))
        #expect(Self.matches("pushed urn:x/7C0F → http://h/Observation/81/_history/1", "pushed urn:x/… → http://h/Observation/…/_history/1"))
        #expect(!Self.matches("pushed urn:x/7C0F → http://h/Observation/81/_history/2", "pushed urn:x/… → http://h/Observation/…/_history/1"))
        #expect(!Self.matches("ab", "ab…b"), "the text around … is not counted twice")
        #expect(Self.matches(["a", "p1", "p2", "z"][...], ["a", "…", "z"][...]) && Self.matches(["a", "z"][...], ["a", "…", "z"][...]))
        #expect(!Self.matches(["a", "p1", "y"][...], ["a", "…", "z"][...]))
    }

    /// The `caregate …` commands of a guide's ```` ```sh ```` blocks (continued lines joined,
    /// `# comments` dropped), each with the line it starts on.
    static func shellCommands(in file: URL) throws -> [(line: Int, words: [String])] {
        var commands: [(Int, [String])] = []
        var inBlock = false
        var pending: (line: Int, text: String)?
        for (index, line) in try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n").enumerated() {
            if !inBlock { inBlock = line == "```sh"; continue }
            if line == "```" { inBlock = false; continue }
            let text = (pending?.text ?? "") + " " + (line.components(separatedBy: " # ").first ?? line).trimmingCharacters(in: .whitespaces)
            if text.hasSuffix("\\") { pending = (pending?.line ?? index + 1, String(text.dropLast())); continue }
            let words = text.split(separator: " ").map(String.init)
            if words.first == "caregate" { commands.append((pending?.line ?? index + 1, Array(words.dropFirst()))) }
            pending = nil
        }
        return commands
    }

    @Test("every caregate command in the guides' sh blocks names a command that exists and only options it has")
    func shellBlockCommands() async throws {
        var helps: [String: String] = [:]
        func help(_ path: [String]) async throws -> String? {
            if let known = helps[path.joined(separator: " ")] { return known }
            let run = try await cli.caregate(["help"] + path)
            let usage = (["USAGE: caregate"] + path).joined(separator: " ")
            guard run.status == 0, run.stdout.contains(usage) else { return nil }
            helps[path.joined(separator: " ")] = run.stdout
            return run.stdout
        }
        var checked = 0
        for guide in [CommandLineTests.projectRoot.appendingPathComponent("README.md")] + Self.guides {
            for (line, words) in try Self.shellCommands(in: guide) {
                let names = Array(words.prefix { !$0.hasPrefix("-") }.prefix(2))
                var found: (path: [String], text: String)?
                for count in stride(from: names.count, through: 0, by: -1) {
                    if let text = try await help(Array(names.prefix(count))) { found = (Array(names.prefix(count)), text); break }
                }
                guard let found, !(found.text.contains("SUBCOMMANDS:") && names.count > found.path.count) else {
                    Issue.record("\(guide.lastPathComponent):\(line): caregate \(words.joined(separator: " ")): no such command")
                    continue
                }
                for option in words where option.hasPrefix("-") {
                    let name = option.components(separatedBy: "=")[0]
                    let listed = [" ", ",", "\n", " <"].contains { found.text.contains(name + $0) }
                    #expect(listed, "\(guide.lastPathComponent):\(line): caregate \(found.path.joined(separator: " ")) has no option \(name)")
                }
                checked += 1
            }
        }
        #expect(checked >= 20, "the guides' sh commands were found")
    }

    @Test("caregate --help and each command's help give examples that are commands on files that exist, one to a line")
    func helpExamples() async throws {
        let top = try await cli.caregate(["--help"])
        let commands = top.stdout.components(separatedBy: "SUBCOMMANDS:").last!.components(separatedBy: "\n")
            .compactMap { line -> String? in
                let words = line.split(separator: " ")
                return line.hasPrefix("  ") && !line.hasPrefix("   ") && !words.isEmpty ? String(words[0]) : nil
            }
        #expect(commands.contains("import") && commands.contains("serve"))
        var checked = 0
        for command in [nil] + commands.map(Optional.some) {
            let help = try await cli.caregate(command.map { ["help", $0] } ?? ["--help"])
            guard let examples = help.stdout.components(separatedBy: "Examples:\n").dropFirst().first else { continue }
            var continued = false
            for line in examples.components(separatedBy: "\n") {
                if line.trimmingCharacters(in: .whitespaces).isEmpty { break }
                let text = line.trimmingCharacters(in: .whitespaces)
                #expect(continued || text.hasPrefix("caregate "), "caregate \(command ?? "--help"): an example line that is not a command: \(line)")
                #expect(line.count <= 79, "caregate \(command ?? "--help"): an example wider than the help's 80 columns: \(line)")
                let words = text.split(separator: " ").map(String.init)
                for (index, word) in words.enumerated() where word.hasPrefix("FHIRSamples/") || word.hasPrefix("Mappings/") {
                    guard !word.contains("*"), index == 0 || words[index - 1] != "-o" else { continue }
                    #expect(FileManager.default.fileExists(atPath: CommandLineTests.projectRoot.appendingPathComponent(word).path),
                            "caregate \(command ?? "--help"): the example names \(word), which does not exist")
                }
                continued = text.hasSuffix("\\")
                checked += 1
            }
        }
        #expect(checked >= 20, "the commands' examples were found")
    }

    /// GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens.
    static func anchor(_ heading: String) -> String {
        String(heading.lowercased().compactMap { c -> Character? in
            c == " " ? "-" : (c.isLetter || c.isNumber || c == "-" || c == "_") ? c : nil
        })
    }

    @Test("every relative link in the README and the guides names a file that exists, and each #anchor a heading in it")
    func links() throws {
        let root = CommandLineTests.projectRoot
        var checked = 0
        for page in [root.appendingPathComponent("README.md")] + Self.guides {
            let text = try String(contentsOf: page, encoding: .utf8)
            for match in text.matches(of: /\]\(([^)\s]+)\)/) {
                let target = String(match.1)
                guard !target.hasPrefix("http://"), !target.hasPrefix("https://") else { continue }
                let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let file = parts[0].isEmpty ? page : page.deletingLastPathComponent().appendingPathComponent(parts[0])
                #expect(FileManager.default.fileExists(atPath: file.path), "\(page.lastPathComponent): the link \(target) names no file")
                if parts.count == 2, let linked = try? String(contentsOf: file, encoding: .utf8) {
                    let anchors = linked.components(separatedBy: "\n").filter { $0.hasPrefix("#") }
                        .map { Self.anchor($0.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)) }
                    #expect(anchors.contains(parts[1]), "\(page.lastPathComponent): the link \(target) names no heading of \(parts[0])")
                }
                checked += 1
            }
        }
        #expect(checked >= 30, "the links were found")
    }

    func temporaryFolder(_ name: String) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-guide-\(name)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
