import Foundation
@testable import FHIRClient

/// `Fixtures/scripted_server.py` run for one test: answers scripted responses, logs requests.
final class ScriptedServer {
    let process = Process()
    let port: Int
    let logURL: URL
    let rulesURL: URL
    var base: String { "http://127.0.0.1:\(port)/fhir" }

    init(_ rules: [[String: Any]]) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-scripted-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        rulesURL = directory.appendingPathComponent("rules.json")
        logURL = directory.appendingPathComponent("log.jsonl")
        try JSONSerialization.data(withJSONObject: rules).write(to: rulesURL)
        FileManager.default.createFile(atPath: logURL.path, contents: nil)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures/scripted_server.py")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, rulesURL.path, logURL.path]
        let pipe = Pipe()
        process.standardOutput = pipe
        // Not the test runner's own output: a server left running would keep it open.
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let line = pipe.fileHandleForReading.availableData
        port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
    }

    /// New rules (links can name the server now that its port is known).
    func replaceRules(_ rules: [[String: Any]]) throws {
        try JSONSerialization.data(withJSONObject: rules).write(to: rulesURL, options: .atomic)
    }

    /// The requests received, in order.
    var requests: [[String: Any]] {
        let text = (try? String(contentsOf: logURL, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }

    deinit {
        // SIGKILL: the child may have inherited a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

func patient(_ id: String) -> [String: Any] {
    ["resourceType": "Patient", "id": id, "name": [["family": "López", "given": ["María"]]]]
}

func searchBundle(_ ids: [String], next: String?) -> [String: Any] {
    var bundle: [String: Any] = ["resourceType": "Bundle", "type": "searchset", "entry": ids.map { ["fullUrl": "http://x/Patient/\($0)", "resource": patient($0)] }]
    if let next { bundle["link"] = [["relation": "next", "url": next]] }
    return bundle
}
