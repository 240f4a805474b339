import CareStore
import FHIRClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Gateway
@testable import GatewayServer
import HTTPTypes
import Logging
import Testing

/// Whether the server has closed a raw connection: a read sees the end (or a reset) within `seconds`.
func closedByServer(_ connection: RawConnection, within seconds: Int) -> Bool {
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(connection.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let read = recv(connection.fd, &buffer, buffer.count, 0)
        if read == 0 || (read < 0 && errno == ECONNRESET) { return true }
        if read < 0 { return false }  // timed out, still open
    }
}

/// The response a raw connection gets to a GET, or nil when none comes within `seconds`.
func rawGet(_ connection: RawConnection, _ path: String, within seconds: Int) -> String? {
    connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    var timeout = timeval(tv_sec: seconds, tv_usec: 0)
    setsockopt(connection.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var buffer = [UInt8](repeating: 0, count: 4096)
    let read = recv(connection.fd, &buffer, buffer.count, 0)
    return read > 0 ? String(decoding: buffer[..<read], as: UTF8.self) : nil
}

extension GatewayServerSuites {
    @Suite("Hostile connections and guesses over loopback")
    struct HostileConnectionTests {
        @Test("two thousand connections trickling request bodies a byte at a time are cut off at the body deadline, and the server serves others throughout")
        func slowBodies() async throws {
            let (store, _) = try twoPatientStore()
            var limits = GatewayServer.Limits()
            limits.requestBodySeconds = 2
            limits.connectionsPerAddress = 10_000
            limits.wrongCodes = 1_000_000
            let server = try await RunningServer(store: store, limits: limits)
            // The attacker's connections come from 127.0.0.2; the client served meanwhile from 127.0.0.1.
            let connections = try (0..<2_000).map { _ in try RawConnection(port: server.port, source: "127.0.0.2") }
            for connection in connections {
                connection.send("POST /carekit/v1/enroll HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
            }
            let started = Date()
            // A byte each every half second: never idle, never done.
            for _ in 0..<4 {
                try await Task.sleep(for: .milliseconds(500))
                for connection in connections { connection.send(" ") }
                #expect(try await server.send("GET", "/healthz").status == 200)
            }
            let open = connections.filter { !closedByServer($0, within: 2) }.count
            #expect(open == 0, "\(open) trickling connections still open after \(Date().timeIntervalSince(started)) s")
            #expect(try await server.send("GET", "/healthz").status == 200)
            #expect(server.connectionCount() < 50)
            try await server.stop()
        }

        @Test("an address past its connection cap has new connections closed as they open; past the global cap the server stops accepting until one closes")
        func connectionCaps() async throws {
            let (store, _) = try twoPatientStore()
            var limits = GatewayServer.Limits()
            limits.connectionsPerAddress = 10
            let server = try await RunningServer(store: store, limits: limits)
            var held = try (0..<10).map { _ in try RawConnection(port: server.port) }
            #expect(rawGet(held[0], "/healthz", within: 2)?.hasPrefix("HTTP/1.1 200") == true)
            let extra = try RawConnection(port: server.port)
            #expect(closedByServer(extra, within: 2), "the eleventh connection of one address was served")
            held.removeLast()  // closes it
            try await Task.sleep(for: .milliseconds(200))
            #expect(rawGet(try RawConnection(port: server.port), "/healthz", within: 2)?.hasPrefix("HTTP/1.1 200") == true)
            try await server.stop()

            var capped = GatewayServer.Limits()
            capped.maxConnections = 20
            capped.connectionsPerAddress = 1_000
            let full = try await RunningServer(store: store, limits: capped)
            var idle = try (0..<20).map { _ in try RawConnection(port: full.port) }
            // Each one served, so the server has counted all twenty before the next comes (it
            // once raced the twenty-first in under a loaded suite).
            for connection in idle { #expect(rawGet(connection, "/healthz", within: 2)?.hasPrefix("HTTP/1.1 200") == true) }
            let waiting = try RawConnection(port: full.port)  // the kernel's backlog takes it; the server does not
            #expect(rawGet(waiting, "/healthz", within: 1) == nil, "a connection past the cap was served")
            idle.removeLast(5)
            var timeout = timeval(tv_sec: 3, tv_usec: 0)
            setsockopt(waiting.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 4096)
            let read = recv(waiting.fd, &buffer, buffer.count, 0)
            #expect(read > 0 && String(decoding: buffer[..<max(read, 0)], as: UTF8.self).hasPrefix("HTTP/1.1 200"), "not served once connections closed")
            try await full.stop()
        }

        @Test("sixty wrong codes sent at once get five 401s and 429 for the rest, still after a restart; sign-in and notify tokens count in the same bucket", arguments: Backend.allCases)
        func concurrentGuesses(backend: Backend) async throws {
            guard let (store, _) = try twoPatientStore(backend) else { return }
            var limits = GatewayServer.Limits()
            limits.wrongCodes = 5
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-hostile-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            try "notify-secret-123456789".write(toFile: folder.appendingPathComponent("notify.token").path, atomically: true, encoding: .utf8)
            var config = GatewayConfig.EHR(base: "http://127.0.0.1:9/fhir")
            config.notifyToken = .file(folder.appendingPathComponent("notify.token").path)
            config.pushSeconds = 3_600
            config.refreshSeconds = 3_600
            let server = try await RunningServer(store: store, limits: limits, ehr: try config.link(store: store, root: folder.path),
                                                 dashboard: DashboardAccess(adminToken: "admin-token-0123456789abcdef", secureCookie: false))
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<60 {
                    group.addTask { try await server.send("POST", "/carekit/v1/enroll", json: "{\"code\": \"WRONG-\(i)\"}").status }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 401 }.count == 5, "\(statuses.sorted())")
            #expect(statuses.filter { $0 == 429 }.count == 55)
            try await server.stop()
            // The count is the store's: a restart does not hand the guesser a new budget.
            let restarted = try await RunningServer(store: store, limits: limits)
            #expect(try await restarted.send("POST", "/carekit/v1/enroll", json: #"{"code": "WRONG-61"}"#).status == 429)
            try await restarted.stop()

            // One bucket: three wrong codes, a wrong admin token and a wrong notify token use it up.
            guard let (fresh, _) = try twoPatientStore(backend) else { return }
            let shared = try await RunningServer(store: fresh, limits: limits, ehr: try config.link(store: fresh, root: folder.path),
                                                 dashboard: DashboardAccess(adminToken: "admin-token-0123456789abcdef", secureCookie: false))
            for i in 0..<3 { #expect(try await shared.send("POST", "/carekit/v1/enroll", json: "{\"code\": \"WRONG-\(i)\"}").status == 401) }
            let login = try await shared.client.send(HTTPRequest(method: "POST", url: "http://127.0.0.1:\(shared.port)/ui/login",
                                                                 headers: [("Content-Type", "application/x-www-form-urlencoded")], body: Array("token=wrong".utf8)))
            #expect(login.status == 401)
            #expect(try await shared.send("POST", "/fhir/notify", token: "wrong").status == 401)
            #expect(try await shared.send("POST", "/fhir/notify", token: "wrong").status == 429)
            #expect(try await shared.send("POST", "/carekit/v1/enroll", json: "{\"code\": \"WRONG-9\"}").status == 429)
            try await shared.stop()
        }

        @Test("behind a trusted proxy each client the proxy names has its own bucket; from anyone else the forwarding headers change nothing")
        func trustedProxy() async throws {
            let (store, _) = try twoPatientStore()
            var limits = GatewayServer.Limits()
            limits.wrongCodes = 2
            limits.trustedProxies = try TrustedProxies(["127.0.0.0/8"])
            let proxied = try await RunningServer(store: store, limits: limits)
            func guess(_ server: RunningServer, forwardedFor: String, standard: Bool = false) async throws -> Int {
                let header = standard ? ("Forwarded", "for=\"\(forwardedFor)\";proto=https") : ("X-Forwarded-For", "\(forwardedFor), 127.0.0.1")
                let response = try await server.client.send(HTTPRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/carekit/v1/enroll",
                                                                        headers: [("Content-Type", "application/json"), header], body: Array("{\"code\": \"WRONG\"}".utf8)))
                return response.status
            }
            #expect(try await guess(proxied, forwardedFor: "203.0.113.7") == 401)
            #expect(try await guess(proxied, forwardedFor: "203.0.113.7", standard: true) == 401)
            #expect(try await guess(proxied, forwardedFor: "203.0.113.7") == 429)
            #expect(try await guess(proxied, forwardedFor: "203.0.113.8") == 401)
            // IPv6 clients by /64: another address of the same /64 shares the bucket.
            #expect(try await guess(proxied, forwardedFor: "[2001:db8:1:2::10]:4711", standard: true) == 401)
            #expect(try await guess(proxied, forwardedFor: "2001:db8:1:2::99") == 401)
            #expect(try await guess(proxied, forwardedFor: "2001:db8:1:2:ffff::1") == 429)
            #expect(try await guess(proxied, forwardedFor: "2001:db8:1:3::1") == 401)
            try await proxied.stop()

            limits.trustedProxies = .none
            let direct = try await RunningServer(store: store, limits: limits)
            #expect(try await guess(direct, forwardedFor: "203.0.113.1") == 401)
            #expect(try await guess(direct, forwardedFor: "203.0.113.2") == 401)
            #expect(try await guess(direct, forwardedFor: "203.0.113.3") == 429, "a forged X-Forwarded-For made a new bucket")
            try await direct.stop()
        }

        @Test("client keys: IPv4 as itself, IPv6 by its /64, IPv4-mapped IPv6 as IPv4; trusted-proxy prefixes; a bad entry is refused")
        func clientKeys() throws {
            #expect(ClientAddress.bucket("192.0.2.9") == "192.0.2.9")
            #expect(ClientAddress.bucket("2001:db8:0:1::7") == "2001:db8:0:1::/64")
            #expect(ClientAddress.bucket("2001:db8:0:1:aaaa:bbbb:cccc:dddd") == "2001:db8:0:1::/64")
            #expect(ClientAddress.bucket("::ffff:192.0.2.9") == "192.0.2.9")
            let proxies = try TrustedProxies(["10.0.0.0/8", "fd00::/8", "192.0.2.1"])
            #expect(proxies.contains("10.200.3.4") && proxies.contains("fd12::1") && proxies.contains("192.0.2.1"))
            #expect(!proxies.contains("192.0.2.2") && !proxies.contains("11.0.0.1") && !proxies.contains("fe80::1") && !proxies.contains("unknown"))
            #expect(throws: ClientAddressError.notAnAddress("10.0.0.0/33")) { try TrustedProxies(["10.0.0.0/33"]) }
            #expect(throws: ClientAddressError.notAnAddress("proxy.example")) { try TrustedProxies(["proxy.example"]) }
            // The nearest untrusted hop is the client; a client's own forged hops come first and are passed over.
            let headers: HTTPFields = [HTTPField.Name("X-Forwarded-For")!: "198.51.100.1, 203.0.113.5, 10.0.0.2"]
            #expect(ClientAddress.key(peer: "10.0.0.1", headers: headers, trusted: proxies) == "203.0.113.5")
            #expect(ClientAddress.key(peer: "198.51.100.77", headers: headers, trusted: proxies) == "198.51.100.77")
        }
    }
}

/// A server on loopback that answers every request with one fixed HTTP response (an EHR that
/// refuses, quoting a patient), for as long as it lives.
final class FixedAnswerServer: @unchecked Sendable {
    let fd: Int32
    let port: Int

    init(answer: String) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(bound == 0 && listen(listener, 16) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        fd = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let bytes = Array(answer.utf8)
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { return }
                var buffer = [UInt8](repeating: 0, count: 65_536)
                _ = recv(client, &buffer, buffer.count, 0)
                _ = bytes.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                close(client)
            }
        }
    }

    deinit { shutdown(fd, Int32(SHUT_RDWR)); close(fd) }
}

extension GatewayServerSuites {
    @Suite("What the EHR says stays out of the logs")
    struct EHRTextInLogsTests {
        @Test("a failed refresh logs its kind and the patient's hash: not the EHR's text (a name and birth date), not its URLs, not the id in any spelling")
        func refreshFailure() async throws {
            let outcome = #"{"resourceType":"OperationOutcome","issue":[{"severity":"error","code":"not-found","diagnostics":"María López, born 1961-03-14, Patient/maria lopez/x"}]}"#
            let ehr = try FixedAnswerServer(answer: "HTTP/1.1 404 Not Found\r\nContent-Type: application/fhir+json\r\nContent-Length: \(outcome.utf8.count)\r\nConnection: close\r\n\r\n\(outcome)")
            let (store, _) = try twoPatientStore()
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-logs-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: folder) }
            var config = GatewayConfig.EHR(base: "http://127.0.0.1:\(ehr.port)/fhir")
            config.connection.retry = RetryPolicy(maxAttempts: 1, baseDelay: 0.01, maxDelay: 0.01, maxTotal: 1)
            let link = try config.link(store: store, root: folder.path)
            let log = CapturedLog()
            let audit = AuditRecorder(trail: store)
            let worker = PatientRefreshWorker(link: link, activity: EHRActivity(), audit: audit, logID: PatientLogID(),
                                              logger: Logger(label: "caregate-test", factory: log.handler))
            let patient = EnrolledPatient(storeID: "Patient/maria lopez/x", ehrID: "maria lopez/x")
            #expect(await worker.refreshOne(patient, since: nil) == false)
            // The trail (kept in the store, for auditors) names the patient and the failure's kind.
            try audit.flush()
            let entries = try store.auditEntries(AuditQuery()).map(\.entry)
            #expect(entries.map { "\($0.actor.kind) \($0.event) \($0.patientID ?? "-") \($0.outcome)" } == ["worker ehr.refresh Patient/maria lopez/x failed"])
            #expect(entries.first?.detail == "HTTP 404 to a GET")
            let text = log.text
            #expect(text.contains("refresh failed") && text.contains("error=HTTP 404 to a GET"), "\(text)")
            for secret in ["María", "L%C3%B3pez", "López", "1961", "maria", "Patient%2F", "127.0.0.1:\(ehr.port)", "/fhir"] {
                #expect(!text.contains(secret), "\(secret) is in the log: \(text)")
            }
            // The whole cause is still there for whoever handles the error (the operator's view).
            do {
                _ = try await link.refresh.refresh(patient, since: nil)
                Issue.record("the refresh did not fail")
            } catch {
                #expect(error.cause.contains("María López, born 1961-03-14") && error.kind == "HTTP 404 to a GET")
            }
        }
    }
}
