import FHIR
import FHIRClient
import Foundation
import Testing

/// The Swift examples in the guides and the API documentation are the files in `Snippets/`:
/// SwiftPM compiles each as a program, DocC shows them (`@Snippet`), and here each is run and
/// every ```` ```swift ```` block in `docs/` and the README is checked to be one of them.
@Suite("The Swift examples (Snippets/)")
struct SnippetTests {
    let cli = CommandLineTests()

    /// A snippet as DocC shows it: leading comment lines are its explanation; `// snippet.hide`
    /// and `// snippet.show` hide and show lines; `// snippet.NAME` … `// snippet.end` is a slice.
    struct Snippet {
        var name: String
        var shown: String
        var slices: [String: String]

        init(name: String, text: String) {
            self.name = name
            var lines = text.components(separatedBy: "\n").drop { $0.hasPrefix("//") }
            if lines.last == "" { lines = lines.dropLast() }
            var shown: [String] = []
            var slices: [String: [String]] = [:]
            var hidden = false
            var open: String?
            for line in lines {
                let marker = line.trimmingCharacters(in: .whitespaces)
                if marker.hasPrefix("// snippet.") {
                    switch marker.dropFirst("// snippet.".count) {
                    case "hide": hidden = true
                    case "show": hidden = false
                    case "end": open = nil
                    case let name: open = String(name); slices[open!] = []
                    }
                    continue
                }
                guard !hidden else { continue }
                shown.append(line)
                if let open { slices[open]!.append(line) }
            }
            self.shown = Self.trimmed(shown)
            self.slices = slices.mapValues(Self.trimmed)
        }

        static func trimmed(_ lines: [String]) -> String {
            lines.drop { $0.isEmpty }.reversed().drop { $0.isEmpty }.reversed().joined(separator: "\n")
        }
    }

    static let folder = CommandLineTests.projectRoot.appendingPathComponent("Snippets")

    static func snippets() throws -> [Snippet] {
        try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".swift") }.sorted().map {
            Snippet(name: String($0.dropLast(".swift".count)), text: try String(contentsOf: folder.appendingPathComponent($0), encoding: .utf8))
        }
    }

    /// The ```` ```swift ```` blocks of a Markdown file, with the line each starts on.
    static func swiftBlocks(in file: URL) throws -> [(line: Int, code: String)] {
        var blocks: [(Int, String)] = []
        var current: (Int, [String])?
        for (index, line) in try String(contentsOf: file, encoding: .utf8).components(separatedBy: "\n").enumerated() {
            if current == nil, line == "```swift" { current = (index + 1, []) }
            else if let open = current, line == "```" { blocks.append((open.0, open.1.joined(separator: "\n"))); current = nil }
            else if current != nil { current!.1.append(line) }
        }
        return blocks
    }

    @Test("every swift block in the README and docs/ is a snippet, or a slice of one, as it stands in Snippets/")
    func guideBlocksAreSnippets() throws {
        let snippets = try Self.snippets()
        let known = Set(snippets.flatMap { [$0.shown] + $0.slices.values })
        let pages = [CommandLineTests.projectRoot.appendingPathComponent("README.md")] + GuideExampleTests.guides
        var found = 0
        for page in pages {
            for block in try Self.swiftBlocks(in: page) {
                found += 1
                #expect(known.contains(block.code), "\(page.lastPathComponent):\(block.line): this swift block is not the text of any file in Snippets/ (nor a slice of one); the guides show code that compiles")
            }
        }
        #expect(found >= 4, "the guides' swift blocks were found")
    }

    @Test("the API documentation's articles show code only through @Snippet, naming snippets and slices that exist")
    func articlesUseSnippets() throws {
        let snippets = Dictionary(uniqueKeysWithValues: try Self.snippets().map { ($0.name, $0) })
        let sources = CommandLineTests.projectRoot.appendingPathComponent("Sources")
        let articles = (FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String } ?? [])
            .filter { $0.contains(".docc/") && $0.hasSuffix(".md") }
        let directive = try Regex(#"@Snippet\(path: "CareGate/Snippets/([A-Za-z]+)"(?:, slice: "([a-z]+)")?\)"#)
        var used = 0
        for article in articles {
            let text = try String(contentsOf: sources.appendingPathComponent(article), encoding: .utf8)
            #expect(!text.contains("```swift"), "\(article): code in an article comes from Snippets/ through @Snippet, so that it compiles")
            for match in text.matches(of: directive) {
                used += 1
                let name = String(match.output[1].substring!)
                let snippet = snippets[name]
                #expect(snippet != nil, "\(article): @Snippet names \(name), which is not in Snippets/")
                if let slice = match.output[2].substring {
                    #expect(snippet?.slices[String(slice)] != nil, "\(article): \(name) has no slice \(slice)")
                }
            }
        }
        #expect(used >= 12, "the articles' @Snippet directives were found")
    }

    @Test("a snippet's shown text leaves out its explanation, hidden lines and markers; slices are what their markers hold")
    func snippetReading() {
        let snippet = Snippet(name: "x", text: "// About.\nimport A\n// snippet.hide\nsecret()\n// snippet.show\n\n// snippet.one\nfirst()\n// snippet.end\nlast()\n")
        #expect(snippet.shown == "import A\n\nfirst()\nlast()")
        #expect(snippet.slices == ["one": "first()"])
    }

    /// Runs a snippet's program, built beside `caregate`, in a folder of its own that holds links
    /// to the samples and the mappings (it may write `caregate.sqlite` there).
    func run(_ name: String, environment: [String: String] = [:]) async throws -> CommandLineTests.Run {
        let folder = URL(fileURLWithPath: cli.temporaryPath("snippet-\(name)-\(UUID().uuidString)"))
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        for linked in ["FHIRSamples", "Mappings"] {
            try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(linked), withDestinationURL: CommandLineTests.projectRoot.appendingPathComponent(linked))
        }
        let program = URL(fileURLWithPath: CommandLineTests.binary).deletingLastPathComponent().appendingPathComponent(name).path
        let result = try await cli.run([program], environment: environment, directory: folder)
        #expect(result.status == 0, "Snippets/\(name).swift failed: \(result.stderr)")
        return result
    }

    @Test("each snippet runs and does what its comments say", arguments: [
        ("CareStoreTour", ["events today: 1", "adherence: 1.0", "history: 1 version"]),
        ("CareStoreTransactions", ["title: Home care, week 2", "record: 3 entities", "scratch: 0 patients"]),
        ("FHIRPathTour", ["codes: 2", "diagnostics: 0", "type: collection of code", "subject resolves: 1"]),
        ("MappingTour", ["patients: 1"]),
        ("GatewayTour", ["1 true", "code: 11 characters"]),
    ])
    func snippetRuns(name: String, lines: [String]) async throws {
        let printed = try await run(name).stdout.components(separatedBy: "\n")
        for line in lines { #expect(printed.contains(line), "Snippets/\(name).swift printed:\n\(printed.joined(separator: "\n"))") }
    }

    @Test("the FHIR tour reads the plan's timed activities, writes 78.40 as it was given, and streams the Bundle and the NDJSON file")
    func fhirTour() async throws {
        let printed = try await run("FHIRTour").stdout
        #expect(printed.hasPrefix("30-minute walk 17:30:00\nBlood pressure 08:00:00\nWeight check 07:30:00\n"), "\(printed)")
        #expect(printed.contains("\"value\": 78.40,"))
        let types = printed.components(separatedBy: "\n").filter { ["Patient", "CarePlan", "Observation"].contains($0) }
        #expect(types.filter { $0 == "Patient" }.count == 2 && types.filter { $0 == "CarePlan" }.count == 2, "\(printed)")
    }

    @Test("the FHIR client tour reads a real FHIR server's capabilities and the patient's care plan")
    func clientTour() async throws {
        guard let ehr = await LocalFHIRServer() else { return }
        let samples = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/json")
        let client = FHIRRESTClient(base: ehr.base)
        _ = try await client.transaction(seedTransaction(["Patient-maria-lopez.json", "CarePlan-maria-lopez-home-care.json"].map { samples.appendingPathComponent($0).path }, base: ehr.base))
        let printed = try await run("FHIRClientTour", environment: ["EHR_BASE": ehr.base]).stdout
        #expect(printed == "4.0.1 1\n", "\(printed)")
    }
}
