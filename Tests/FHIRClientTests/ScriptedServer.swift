import FHIR
import Foundation
@testable import FHIRClient

/// A Python fixture from `Fixtures/` run as a child process for one test, in its own temporary
/// directory (removed with it). It prints its port on its first line.
class FixtureProcess {
    let process = Process()
    let port: Int
    let directory: URL

    init(script: String, arguments: (URL) throws -> [String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-fixture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/\(script)")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", path.path] + (try arguments(directory))
        let pipe = Pipe()
        process.standardOutput = pipe
        // Not the test runner's own output: a server left running would keep it open.
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let line = pipe.fileHandleForReading.availableData
        port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// JSON lines the fixture logged, in order.
    func loggedLines(_ url: URL) -> [[String: Any]] {
        let text = (try? FileBytes.read(url.path)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    deinit {
        // SIGKILL: the child may have inherited a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// `Fixtures/scripted_server.py`: answers scripted responses, logs requests.
final class ScriptedServer: FixtureProcess {
    var base: String { "http://127.0.0.1:\(port)/fhir" }
    var rulesURL: URL { directory.appendingPathComponent("rules.json") }
    var logURL: URL { directory.appendingPathComponent("log.jsonl") }

    init(_ rules: [[String: Any]]) throws {
        try super.init(script: "scripted_server.py") { directory in
            let rules = try JSONSerialization.data(withJSONObject: rules)
            try rules.write(to: directory.appendingPathComponent("rules.json"))
            try Data().write(to: directory.appendingPathComponent("log.jsonl"))
            return [directory.appendingPathComponent("rules.json").path, directory.appendingPathComponent("log.jsonl").path]
        }
    }

    /// New rules (links can name the server now that its port is known).
    func replaceRules(_ rules: [[String: Any]]) throws {
        try JSONSerialization.data(withJSONObject: rules).write(to: rulesURL, options: .atomic)
    }

    /// The requests received, in order.
    var requests: [[String: Any]] { loggedLines(logURL) }
}

func patient(_ id: String) -> [String: Any] {
    ["resourceType": "Patient", "id": id, "name": [["family": "López", "given": ["María"]]]]
}

func searchBundle(_ ids: [String], next: String?) -> [String: Any] {
    var bundle: [String: Any] = ["resourceType": "Bundle", "type": "searchset", "entry": ids.map { ["fullUrl": "http://x/Patient/\($0)", "resource": patient($0)] }]
    if let next { bundle["link"] = [["relation": "next", "url": next]] }
    return bundle
}

/// Runs the openssl command once per argument list in `directory`; false when any fails or
/// openssl is missing. Keys and certificates for the tests come from it, not from the code under test.
func runOpenSSL(_ commands: [[String]], in directory: URL) -> Bool {
    for arguments in commands {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        process.currentDirectoryURL = directory
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return false }
    }
    return true
}
