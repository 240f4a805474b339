import FHIRClient
import FHIR
import Foundation

/// The sample files as one transaction of PUTs, so the server keeps their ids.
func seedTransaction(_ paths: [String], base: String) throws -> Element {
    try seedTransaction(resources: paths.map { try FHIRDocument.read(contentsOf: $0).resource }, base: base)
}

/// A client of `server`, once the server holds `FHIRSamples/json` (María's EHR record, under the
/// samples' ids), as the end-to-end tests start from.
func seededWithSamples(_ server: LocalFHIRServer) async throws -> FHIRRESTClient {
    let client = FHIRRESTClient(base: server.base, timeout: 20)
    let samples = try FileManager.default.contentsOfDirectory(atPath: "FHIRSamples/json").sorted().map { "FHIRSamples/json/\($0)" }
    _ = try await client.transaction(try seedTransaction(samples, base: server.base))
    return client
}

/// A transaction that puts each resource at `Type/id`.
func seedTransaction(resources: some Sequence<Element>, base: String) -> Element {
    var bundle = Element(resourceType: "Bundle")
    bundle.append(Element(name: "type", type: "code", value: "transaction"))
    for resource in resources {
        let key = "\(resource.resourceType!)/\(resource.string("id")!)"
        var entry = Element(name: "entry", type: "Bundle.entry")
        entry.append(Element(name: "fullUrl", type: "uri", value: "\(base)/\(key)"))
        var inner = resource
        inner.name = "resource"
        entry.append(inner)
        var request = Element(name: "request", type: "Bundle.entry.request")
        request.append(Element(name: "method", type: "code", value: "PUT"))
        request.append(Element(name: "url", type: "uri", value: key))
        entry.append(request)
        bundle.append(entry)
    }
    return bundle
}

/// A child process killed (SIGKILL: the child may inherit a mask that blocks SIGTERM) when released.
final class ChildProcess {
    let process = Process()
    let output = Pipe()

    init(_ arguments: [String], environment: [String: String]? = nil) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
    }

    /// The first line the child printed.
    func firstLine() -> String {
        String(decoding: output.fileHandleForReading.availableData, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// Runs a shell command, returning its status.
@discardableResult
func run(_ arguments: [String]) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
}

/// A real FHIR R4 server on 127.0.0.1 for the tests: sekmet-fhir from PyPI, installed once into a
/// virtual environment, bound to 127.0.0.1 with its workflow simulator off. Nil (with a visible
/// notice) when it cannot be installed here.
final class LocalFHIRServer {
    let child: ChildProcess
    let port: Int
    var base: String { "http://127.0.0.1:\(port)/fhir" }

    /// Kept between runs in `CAREGATE_TEST_CACHE` (scripts/test.sh sets it), else the temporary directory.
    static let venv = (ProcessInfo.processInfo.environment["CAREGATE_TEST_CACHE"].map { URL(fileURLWithPath: $0) } ?? FileManager.default.temporaryDirectory)
        .appendingPathComponent("caregate-sekmet-venv-0.1.1")
    /// The sekmet executable, installed once (when missing) on a thread of its own: pip takes
    /// a while, and tests waiting for it must not hold the few threads async tests share.
    private static let installation = Task<String?, Never> {
        await withCheckedContinuation { (done: CheckedContinuation<String?, Never>) in
            Thread {
                let sekmet = venv.appendingPathComponent("bin/sekmet").path
                if FileManager.default.isExecutableFile(atPath: sekmet) { return done.resume(returning: sekmet) }
                guard run(["python3", "-m", "venv", venv.path]) == 0,
                      run([venv.appendingPathComponent("bin/pip").path, "install", "-q", "sekmet-fhir==0.1.1"]) == 0 else {
                    return done.resume(returning: nil)
                }
                done.resume(returning: FileManager.default.isExecutableFile(atPath: sekmet) ? sekmet : nil)
            }.start()
        }
    }

    static func executable() async -> String? { await installation.value }

    init?() async {
        guard let sekmet = await LocalFHIRServer.executable() else {
            print("SKIPPED the tests against a real FHIR server: sekmet-fhir could not be installed from PyPI here")
            return nil
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-sekmet-\(UUID().uuidString)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        for attempt in 0..<5 {
            let port = Int.random(in: 20_000...50_000)
            let settings = """
                base_url: http://127.0.0.1:\(port)/fhir
                host: 127.0.0.1
                port: \(port)
                data_dir: \(directory.path)/data-\(attempt)
                simulator:
                  enabled: false
                log_inbound: false
                """
            let path = directory.appendingPathComponent("settings-\(attempt).yaml").path
            try? settings.write(toFile: path, atomically: true, encoding: .utf8)
            guard let child = try? ChildProcess([sekmet, "serve", "--config", path], environment: ["SEKMET_CONFIG": path]) else { continue }
            let client = FHIRRESTClient(base: "http://127.0.0.1:\(port)/fhir", retry: .none, timeout: 2)
            for _ in 0..<60 {
                if (try? await client.capabilities()) != nil {
                    self.child = child
                    self.port = port
                    return
                }
                try? await Task.sleep(nanoseconds: 250_000_000)
            }
        }
        print("SKIPPED the tests against a real FHIR server: sekmet-fhir did not start")
        return nil
    }
}

/// `Fixtures/fault_proxy.py` in front of a server.
final class FaultProxy {
    let child: ChildProcess
    let port: Int
    let configURL: URL
    let countsURL: URL
    var base: String { "http://127.0.0.1:\(port)/fhir" }

    init(upstream: Int) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-proxy-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        configURL = directory.appendingPathComponent("config.json")
        countsURL = directory.appendingPathComponent("counts.json")
        try "{}".write(to: configURL, atomically: true, encoding: .utf8)
        // This file is linked into other test targets: its fixtures are beside the real file.
        let script = URL(fileURLWithPath: #filePath).resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("Fixtures/fault_proxy.py")
        child = try ChildProcess(["python3", script.path, String(upstream), configURL.path, countsURL.path])
        port = Int(child.firstLine()) ?? 0
    }

    func configure(_ config: [String: Any]) throws {
        try JSONSerialization.data(withJSONObject: config).write(to: configURL, options: .atomic)
    }

    var counts: [String: Int] {
        ((try? JSONSerialization.jsonObject(with: Data(FileBytes.read(countsURL.path)))) as? [String: Int]) ?? [:]
    }
}
