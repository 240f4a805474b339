import Foundation
import Testing
@testable import Mapping

/// Mappings/README.md teaches by example; these tests keep its examples and key tables true.
@Suite("Mappings/README.md")
struct ReadmeExampleTests {
    static let readme = mappingsDirectory.appendingPathComponent("README.md")

    /// Every ```yaml block, with the README line of its first line.
    static func yamlExamples() throws -> [(line: Int, text: String)] {
        let lines = try String(contentsOf: readme, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        var examples: [(Int, String)] = []
        var start: Int?
        var body: [Substring] = []
        for (n, line) in lines.enumerated() {
            if start == nil, line.hasPrefix("```yaml") {
                start = n + 2
                body = []
            } else if let first = start, line.hasPrefix("```") {
                examples.append((first, body.joined(separator: "\n") + "\n"))
                start = nil
            } else if start != nil {
                body.append(line)
            }
        }
        return examples
    }

    /// The example as a whole file: fragments (tables only, tests only) get what a file around
    /// them needs, and the number of lines added before them.
    static func asFile(_ example: String) -> (text: String, added: Int) {
        let keys = Set(example.split(separator: "\n").filter { !$0.hasPrefix(" ") && !$0.hasPrefix("#") && $0.contains(":") }.map { String($0.split(separator: ":")[0]) })
        if keys.contains("resource") { return (example, 0) }
        if keys == ["tests"] { return ("caregate-mapping: 1\nresource: CarePlan\nextends: builtin:careplan.yaml\n" + example, 3) }
        if keys.contains("caregate-mapping") { return (example, 0) }
        return ("caregate-mapping: 1\n" + example, 1)
    }

    @Test("every YAML example loads and validates without an error, beside the built-in files it names")
    func examplesValidate() throws {
        let examples = try Self.yamlExamples()
        #expect(examples.count >= 8, "the README's examples were found")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-readme-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        _ = try BuiltInMappings.dump(to: folder.path)
        for (i, example) in examples.enumerated() {
            let (text, added) = Self.asFile(example.text)
            let path = folder.appendingPathComponent("readme-example-\(i).yaml").path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            for d in MappingValidator().check(path: path).diagnostics where d.severity == .error {
                let line = d.location.file == path ? "README.md:\(example.line + d.location.line - 1 - added)" : d.location.description
                Issue.record("\(line): \(d.message)")
            }
        }
    }

    /// The keys in backticks in the first column of the table that follows `heading`.
    func tableKeys(after heading: String) throws -> Set<String> {
        let text = try String(contentsOf: Self.readme, encoding: .utf8)
        let rest = try #require(text.range(of: heading)).upperBound
        var keys: Set<String> = []
        for line in text[rest...].split(separator: "\n", omittingEmptySubsequences: false).dropFirst() {
            if line.isEmpty && !keys.isEmpty { break }
            guard line.hasPrefix("| `") else { continue }
            let firstColumn = line.split(separator: "|", omittingEmptySubsequences: true).first ?? ""
            let parts = firstColumn.split(separator: "`", omittingEmptySubsequences: false)
            keys.formUnion(stride(from: 1, to: parts.count, by: 2).map { String(parts[$0]) })
        }
        return keys
    }

    @Test("the key tables list exactly the keys the loader takes")
    func keyTables() throws {
        let topLevel = try tableKeys(after: "Top level:")
        #expect(topLevel == Set(MappingSchema.topLevel), "missing \(Set(MappingSchema.topLevel).subtracting(topLevel).sorted()), extra \(topLevel.subtracting(MappingSchema.topLevel).sorted())")
        let taskKeys = Set(MappingSchema.task.keys).union(MappingSchema.ruleKeys).union(MappingSchema.taskLists.keys)
            .union(MappingSchema.taskLookups.keys)
        let task = try tableKeys(after: "A task rule:")
        #expect(task == taskKeys, "missing \(taskKeys.subtracting(task).sorted()), extra \(task.subtracting(taskKeys).sorted())")
    }
}
