import FHIR
import Foundation
import Synchronization
import Testing
@testable import FHIRClient

@Suite("Bulk Data client")
struct BulkDataClientTests {
    let ndjson = #"{"resourceType":"Patient","id":"p1"}"# + "\n" + #"{"resourceType":"Patient","id":"p2"}"# + "\n"

    func manifest(fileURL: String, requiresToken: Bool) -> [String: Any] {
        ["transactionTime": "2026-11-26T03:00:00Z", "request": "x", "requiresAccessToken": requiresToken,
         "output": [["type": "Patient", "url": fileURL, "count": 2]], "error": []]
    }

    @Test("kick-off with Prefer: respond-async; polls as Retry-After says, passing X-Progress on; the manifest; a gzip file written to disk as it came, with the token the manifest asks for; the job deleted")
    func export() async throws {
        let server = try ScriptedServer([])
        try server.replaceRules([
            ["path": "/fhir/$export?_outputFormat=application%2Ffhir%2Bndjson&_type=Patient",
             "responses": [["status": 202, "headers": ["Content-Location": "\(server.base)/status/1"]]]],
            ["path": "/fhir/status/1", "method": "GET", "responses": [
                ["status": 202, "headers": ["Retry-After": "1", "X-Progress": "half done"]],
                ["status": 200, "body": manifest(fileURL: "\(server.base)/files/Patient.ndjson", requiresToken: true)]]],
            ["path": "/fhir/files/Patient.ndjson", "responses": [["status": 200, "body": ndjson, "gzip": true, "headers": ["Content-Type": "application/fhir+ndjson"]]]],
            ["path": "/fhir/status/1", "method": "DELETE", "responses": [["status": 202]]],
        ])
        let bulk = BulkDataClient(client: FHIRRESTClient(base: server.base, authentication: .bearer("bulk-token"), retry: .none))
        let status = try await bulk.kickOff(BulkExportRequest(level: .system, types: ["Patient"]))
        #expect(status == "\(server.base)/status/1")
        let progress = Mutex<[String]>([])
        let started = Date()
        let found = try await bulk.manifest(status) { line in progress.withLock { $0.append(line) } }
        #expect(Date().timeIntervalSince(started) >= 1)
        #expect(progress.withLock { $0 } == ["half done"])
        #expect(found.transactionTime == "2026-11-26T03:00:00Z" && found.requiresAccessToken && found.output.count == 1)
        let path = server.directory.appendingPathComponent("Patient.ndjson").path
        #expect(try await bulk.download(found.output[0], of: found, to: path) == ndjson.utf8.count)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == ndjson)
        try await bulk.delete(status)
        let requests = server.requests
        #expect(requests.map { "\($0["method"]!) \($0["path"]!)" } == [
            "GET /fhir/$export?_outputFormat=application%2Ffhir%2Bndjson&_type=Patient", "GET /fhir/status/1", "GET /fhir/status/1",
            "GET /fhir/files/Patient.ndjson", "DELETE /fhir/status/1",
        ])
        let kickOff = try #require(requests.first?["headers"] as? [String: String])
        #expect(kickOff["Prefer"] == "respond-async")
        let download = try #require(requests[3]["headers"] as? [String: String])
        #expect(download["Authorization"] == "Bearer bulk-token" && download["Accept-Encoding"]?.contains("gzip") == true)
    }

    @Test("a file on another server is refused while the manifest asks for the token, and fetched without it when not; a file over the limit stops there")
    func filesElsewhere() async throws {
        let server = try ScriptedServer([])
        let storage = try ScriptedServer([["path": "/fhir/files/Patient.ndjson", "responses": [["status": 200, "body": ndjson]]]])
        let bulk = BulkDataClient(client: FHIRRESTClient(base: server.base, authentication: .bearer("bulk-token"), retry: .none))
        let elsewhere = try BulkManifest.read(Array(try JSONSerialization.data(withJSONObject: manifest(fileURL: "\(storage.base)/files/Patient.ndjson", requiresToken: true))), url: "status")
        let path = server.directory.appendingPathComponent("Patient.ndjson").path
        await #expect(throws: FHIRClientError.self) { _ = try await bulk.download(elsewhere.output[0], of: elsewhere, to: path) }
        #expect(storage.requests.isEmpty)
        var open = elsewhere
        open.requiresAccessToken = false
        #expect(try await bulk.download(open.output[0], of: open, to: path) == ndjson.utf8.count)
        let headers = try #require(storage.requests.first?["headers"] as? [String: String])
        #expect(headers["Authorization"] == nil)
        var small = bulk
        small.maximumFileSize = 10
        do {
            _ = try await small.download(open.output[0], of: open, to: path)
            Issue.record("downloaded past the limit")
        } catch {
            #expect(error.description.contains("larger than 10 bytes"), "\(error)")
        }
    }
}
