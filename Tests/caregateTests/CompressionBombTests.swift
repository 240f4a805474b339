import Foundation
import Testing

/// An EHR that answers every request with a gzip bomb: 300 MiB of zeros sent as 300 kB.
@Suite("A compression bomb from an EHR")
struct CompressionBombTests {
    let cli = CommandLineTests()

    /// The server (Python's http.server; the bomb made with its gzip module) and the port it listens on.
    static let server = """
        import gzip, http.server, sys
        bomb = gzip.compress(bytes(300 << 20), compresslevel=9)
        class Bomb(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/fhir+json")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(bomb)))
                self.end_headers()
                try: self.wfile.write(bomb)
                except (BrokenPipeError, ConnectionResetError): pass
            def log_message(self, *args): pass
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bomb)
        with open(sys.argv[1] + ".tmp", "w") as f: f.write(str(server.server_address[1]))
        import os; os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        server.serve_forever()
        """

    /// Runs a command and prints its exit status and its peak resident memory in kB (the
    /// children's rusage of a process that has no other child).
    static let measure = """
        import resource, subprocess, sys
        run = subprocess.run(sys.argv[1:], capture_output=True, text=True)
        sys.stderr.write(run.stderr)
        print(run.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
        """

    @Test("is refused as a bomb long before the size limit, naming the URL, with the process's peak under 150 MB, and nothing is stored")
    func refusedInLittleMemory() async throws {
        let folder = try outsideFolder("bomb")
        defer { try? FileManager.default.removeItem(at: folder) }
        try Self.server.write(to: folder.appendingPathComponent("server.py"), atomically: true, encoding: .utf8)
        try Self.measure.write(to: folder.appendingPathComponent("measure.py"), atomically: true, encoding: .utf8)
        let portFile = folder.appendingPathComponent("port")
        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        server.arguments = ["python3", folder.appendingPathComponent("server.py").path, portFile.path]
        // Its output goes nowhere (an inherited pipe would keep the test runner waiting), and it
        // is killed with SIGKILL (the test process's children may inherit SIGTERM blocked).
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { kill(server.processIdentifier, SIGKILL); server.waitUntilExit() }
        var port: Int?
        for _ in 0..<300 where port == nil {
            port = (try? String(contentsOf: portFile, encoding: .utf8)).flatMap { Int($0) }
            if port == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let listening = try #require(port, "the bomb server never said its port")
        let run = try await cli.run(["/usr/bin/env", "python3", folder.appendingPathComponent("measure.py").path, CommandLineTests.binary,
                                     "import", "--from", "http://127.0.0.1:\(listening)/fhir", "--patient", "p1", "--store", "care.sqlite",
                                     "--retry-attempts", "1"], directory: folder)
        let parts = run.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(parts.count == 2, "\(run.stdout) \(run.stderr)")
        #expect(parts[0] == 1, "\(run.stderr)")
        #expect(run.stderr.contains("http://127.0.0.1:\(listening)/fhir/metadata") && run.stderr.contains("(a compression bomb); not read further"), "\(run.stderr)")
        #expect(parts[1] < 150 * 1024, "peak resident memory \(parts[1] / 1024) MB")
        // Nothing was imported.
        let store = FileManager.default.fileExists(atPath: folder.appendingPathComponent("care.sqlite").path)
        if store {
            let exported = try await cli.caregate(["store", "export", "--carekit", "--store", "care.sqlite"], directory: folder)
            #expect(exported.status == 0 && !exported.stdout.contains("\"patient\""), "\(exported.stdout)")
        }
    }
}
