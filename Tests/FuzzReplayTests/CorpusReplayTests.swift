import FHIR
import Foundation
import Testing

/// Every fuzz harness over its committed corpus (`Fuzz/Corpus/<harness>`) and the crashers found
/// and fixed (`Tests/FuzzRegressions/<harness>`), without mutation: a regression in a parser
/// shows here in seconds, as a crash or a property failure naming the input file.
@Suite("fuzz corpus replay")
struct CorpusReplayTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let names = FuzzHarnesses.all.map { $0.name }

    /// The inputs kept for a harness, by path.
    static func inputs(_ harness: String) -> [URL] {
        ["Fuzz/Corpus", "Tests/FuzzRegressions"].flatMap { folder -> [URL] in
            let directory = root.appendingPathComponent(folder).appendingPathComponent(harness)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
            return names.filter { !$0.hasPrefix(".") }.sorted().map { directory.appendingPathComponent($0) }
        }
    }

    @Test("each harness holds on every kept input", arguments: names)
    func replay(_ name: String) throws {
        let harness = try #require(FuzzHarnesses.all.first { $0.name == name })
        let inputs = Self.inputs(name)
        #expect(!inputs.isEmpty, "no corpus for \(name) in Fuzz/Corpus/\(name)")
        for input in inputs {
            let bytes = try FileBytes.read(input.path)
            do {
                try harness.run(bytes)
            } catch {
                Issue.record("\(input.path): \(error)")
            }
        }
    }

    @Test("every harness has a fuzz executable, and fuzz.sh knows it")
    func executables() throws {
        let script = try String(contentsOf: Self.root.appendingPathComponent("scripts/fuzz.sh"), encoding: .utf8)
        let manifest = try String(contentsOf: Self.root.appendingPathComponent("Fuzz/Package.swift"), encoding: .utf8)
        for name in Self.names {
            #expect(script.contains(" \(name)"), "scripts/fuzz.sh does not list \(name)")
            #expect(manifest.contains("\"\(name)\""), "Fuzz/Package.swift builds no fuzz-\(name)")
            #expect(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("Fuzz/Entries/\(name)/main.swift").path))
        }
    }
}
