import Foundation
import Testing

/// The guides in `docs/` teach by example: every ```` ```console ```` block is run here from the
/// repository's folder, on a store of its own, and its output compared line by line. `caregate
/// --help`'s examples are checked to be commands on files that exist.
@Suite("The guides' examples")
struct GuideExampleTests {
    let cli = CommandLineTests()

    /// One ```` ```console ```` block: its commands (`$ ` lines) with the output each should print.
    struct ConsoleBlock: CustomStringConvertible {
        var file: String
        var line: Int
        var steps: [(command: String, output: [String])]
        var description: String { "\(file):\(line)" }
    }

    static func consoleBlocks(in file: URL) throws -> [ConsoleBlock] {
        let lines = try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n")
        var blocks: [ConsoleBlock] = []
        var current: ConsoleBlock?
        for (index, line) in lines.enumerated() {
            if current == nil {
                if line == "```console" { current = ConsoleBlock(file: "docs/" + file.lastPathComponent, line: index + 1, steps: []) }
            } else if line == "```" {
                blocks.append(current!)
                current = nil
            } else if line.hasPrefix("$ ") {
                current!.steps.append((String(line.dropFirst(2)), []))
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

    /// A printed line matches its expected one exactly, or, when the expected one starts with
    /// `…`, ends with what follows it (a path that differs between machines).
    static func matches(_ printed: String, _ expected: String) -> Bool {
        expected.hasPrefix("…") ? printed.hasSuffix(expected.dropFirst()) : printed == expected
    }

    @Test("every console block in docs/ prints what the guide says it prints")
    func consoleBlocksRun() async throws {
        let blocks = try Self.guides.flatMap(Self.consoleBlocks)
        #expect(blocks.count >= 4, "the guides' console blocks were found: \(blocks)")
        let bin = try temporaryFolder("bin")
        defer { try? FileManager.default.removeItem(at: bin) }
        try FileManager.default.createSymbolicLink(atPath: bin.appendingPathComponent("caregate").path, withDestinationPath: CommandLineTests.binary)
        for block in blocks {
            let scratch = try temporaryFolder("store")
            defer { try? FileManager.default.removeItem(at: scratch) }
            let environment = ["CAREGATE_STORE": scratch.appendingPathComponent("caregate.sqlite").path,
                               "PATH": bin.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
            for step in block.steps {
                let run = try await cli.run(["/bin/bash", "-o", "pipefail", "-c", step.command + " 2>&1"], environment: environment)
                var printed = run.stdout.components(separatedBy: "\n")
                if printed.last == "" { printed.removeLast() }
                let same = printed.count == step.output.count && zip(printed, step.output).allSatisfy(Self.matches)
                #expect(same, "\(block): $ \(step.command)\nprinted:\n\(printed.joined(separator: "\n"))\nthe guide says:\n\(step.output.joined(separator: "\n"))")
            }
        }
    }

    @Test("a console block's output that differs from what runs is caught, and … stands only for a line's start")
    func comparisonCanFail() {
        #expect(Self.matches("/tmp/x/maria.json#entry[1]: ok", "…/maria.json#entry[1]: ok"))
        #expect(!Self.matches("/tmp/x/maria.json#entry[1]: ok", "…/maria.json#entry[2]: ok"))
        #expect(!Self.matches("15 created", "15 unchanged"))
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
