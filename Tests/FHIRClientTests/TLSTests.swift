import FHIR
import Foundation
import Testing
@testable import FHIRClient

/// A CA, a server certificate for 127.0.0.1 and a client certificate, made by the openssl command.
struct TestCertificates: Sendable {
    let directory: URL
    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    static let shared: TestCertificates? = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-certs-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try? "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n".write(to: directory.appendingPathComponent("server.ext"), atomically: true, encoding: .utf8)
        try? "extendedKeyUsage=clientAuth\n".write(to: directory.appendingPathComponent("client.ext"), atomically: true, encoding: .utf8)
        let commands: [[String]] = [
            ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=CareGate Test CA"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"],
            ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "server.ext"],
            ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=caregate-client"],
            ["x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-out", "client.pem", "-days", "2", "-extfile", "client.ext"],
        ]
        guard runOpenSSL(commands, in: directory) else { return nil }
        return TestCertificates(directory: directory)
    }()

    static func available() -> TestCertificates? {
        if shared == nil { print("SKIPPED: TLS tests need the openssl command (apt-get install openssl)") }
        return shared
    }
}

/// `Fixtures/tls_server.py`: HTTPS on 127.0.0.1, optionally wanting a client certificate.
final class TLSServer: FixtureProcess {
    var base: String { "https://127.0.0.1:\(port)/fhir" }

    init(_ certificates: TestCertificates, requireClientCertificate: Bool) throws {
        var arguments = [certificates.path("server.pem"), certificates.path("server.key")]
        if requireClientCertificate { arguments.append(certificates.path("ca.pem")) }
        try super.init(script: "tls_server.py") { _ in arguments }
    }
}

@Suite("TLS")
struct TLSTests {
    @Test("verification is on by default: a server whose CA is not trusted is refused at once, without retries; --ca-bundle trusts it")
    func verification() async throws {
        guard let certificates = TestCertificates.available() else { return }
        let server = try TLSServer(certificates, requireClientCertificate: false)
        let untrusted = FHIRRESTClient(base: server.base, transport: CurlTransport())
        let error = await #expect(throws: FHIRClientError.self) { _ = try await untrusted.read("Patient", "p1") }
        // The transport's error itself, not .gaveUp(attempts:): a certificate problem is not retried.
        guard case .transport(let transport) = error, case .network(let code, let message, _) = transport else {
            Issue.record("expected a TLS error, got \(String(describing: error))")
            return
        }
        #expect(code == 60, "\(message)")
        #expect(message.contains("SSL certificate problem"), "\(message)")
        let trusted = FHIRRESTClient(base: server.base, transport: CurlTransport(tls: TLSOptions(caBundle: certificates.path("ca.pem"))))
        #expect(try await trusted.read("Patient", "p1").string("id") == "p1")
        // --insecure, for testing only, skips verification.
        let insecure = FHIRRESTClient(base: server.base, transport: CurlTransport(tls: TLSOptions(verify: false)))
        #expect(try await insecure.read("Patient", "p2").string("id") == "p2")
    }

    @Test("a server that wants a client certificate gets it from --client-cert and --client-key; without one the handshake fails")
    func mutualTLS() async throws {
        guard let certificates = TestCertificates.available() else { return }
        let server = try TLSServer(certificates, requireClientCertificate: true)
        let withCertificate = FHIRRESTClient(base: server.base, transport: CurlTransport(tls: TLSOptions(
            caBundle: certificates.path("ca.pem"), clientCertificate: certificates.path("client.pem"), clientKey: certificates.path("client.key"))))
        let patient = try await withCertificate.read("Patient", "p1")
        // The server saw who we are.
        #expect(patient.first("name.text")?.value == "caregate-client")
        let without = FHIRRESTClient(base: server.base, transport: CurlTransport(tls: TLSOptions(caBundle: certificates.path("ca.pem"))),
                                     retry: RetryPolicy(maxAttempts: 2, baseDelay: 0.01))
        await #expect(throws: FHIRClientError.self) { _ = try await without.read("Patient", "p1") }
        // A client key file that does not exist is named, and not retried.
        let missing = FHIRRESTClient(base: server.base, transport: CurlTransport(tls: TLSOptions(
            caBundle: certificates.path("ca.pem"), clientCertificate: certificates.path("missing.pem"), clientKey: certificates.path("client.key"))))
        let error = await #expect(throws: FHIRClientError.self) { _ = try await missing.read("Patient", "p1") }
        #expect(error?.isTransient == false, "\(String(describing: error))")
    }
}
