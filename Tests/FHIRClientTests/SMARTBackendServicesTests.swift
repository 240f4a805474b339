import FHIR
import Foundation
import Testing
@testable import FHIRClient

/// `Fixtures/smart_auth_server.py`: a token endpoint that verifies assertions with openssl, and a
/// FHIR endpoint that wants its tokens.
final class SMARTAuthServer: FixtureProcess {
    var base: String { "http://127.0.0.1:\(port)/fhir" }
    var tokenURL: String { "http://127.0.0.1:\(port)/auth/token" }

    init(clients: [String: (publicKey: String, kid: String)], algorithms: [String] = ["RS384", "ES384"],
         tokenLifetime: Int = 300, usesPerToken: Int? = nil) throws {
        var config: [String: Any] = [
            "clients": clients.mapValues { ["public_key": $0.publicKey, "kid": $0.kid] },
            "algorithms": algorithms, "token_lifetime": tokenLifetime,
        ]
        if let usesPerToken { config["uses_per_token"] = usesPerToken }
        try super.init(script: "smart_auth_server.py") { directory in
            try JSONSerialization.data(withJSONObject: config).write(to: directory.appendingPathComponent("config.json"))
            try Data().write(to: directory.appendingPathComponent("log.jsonl"))
            return [directory.appendingPathComponent("config.json").path, directory.appendingPathComponent("log.jsonl").path]
        }
    }

    var log: [[String: Any]] { loggedLines(directory.appendingPathComponent("log.jsonl")) }
    func entries(_ kind: String) -> [[String: Any]] { log.filter { $0["kind"] as? String == kind } }
}

/// Key pairs made by the openssl command (not by the code under test), once per test run.
struct TestKeys: Sendable {
    let directory: URL
    func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
    func pem(_ name: String) throws -> String { try String(contentsOfFile: path(name), encoding: .utf8) }

    static let shared: TestKeys? = {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-keys-\(ProcessInfo.processInfo.processIdentifier)")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let commands: [[String]] = [
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "rsa.pem"],
            ["pkey", "-in", "rsa.pem", "-pubout", "-out", "rsa.pub.pem"],
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "other.pem"],
            ["pkey", "-in", "other.pem", "-pubout", "-out", "other.pub.pem"],
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384", "-out", "ec.pem"],
            ["pkey", "-in", "ec.pem", "-pubout", "-out", "ec.pub.pem"],
            ["ecparam", "-name", "secp384r1", "-genkey", "-noout", "-out", "ec-sec1.pem"],
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "p256.pem"],
            ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", "rsa1024.pem"],
            ["genrsa", "-traditional", "-out", "rsa-pkcs1.pem", "2048"],
        ]
        guard runOpenSSL(commands, in: directory) else { return nil }
        return TestKeys(directory: directory)
    }()

    static func available() -> TestKeys? {
        if shared == nil { print("SKIPPED: SMART Backend Services tests need the openssl command (apt-get install openssl)") }
        return shared
    }
}

/// A clock the test moves by hand.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var time = Date()
    var now: Date { lock.withLock { time } }
    func advance(_ seconds: TimeInterval) { lock.withLock { time += seconds } }
}

@Suite("SMART Backend Services")
struct SMARTBackendServicesTests {
    func configuration(_ keys: TestKeys, key: String, kid: String = "k1", tokenEndpoint: String? = nil, renewBefore: TimeInterval = 30) throws -> SMARTBackendServices.Configuration {
        SMARTBackendServices.Configuration(clientID: "caregate-test", key: try AssertionKey(file: keys.path(key)), keyID: kid,
                                           scope: "system/Observation.cu system/Patient.rs", tokenEndpoint: tokenEndpoint, renewBefore: renewBefore)
    }

    @Test("RS384 and ES384 assertions verify at a token endpoint found by discovery; the token is cached and sent as a bearer token",
          arguments: [("rsa.pem", "rsa.pub.pem", "RS384"), ("ec.pem", "ec.pub.pem", "ES384"), ("ec-sec1.pem", nil, "ES384"), ("rsa-pkcs1.pem", nil, "RS384")])
    func signsAndCaches(key: String, publicKey: String?, algorithm: String) async throws {
        guard let keys = TestKeys.available() else { return }
        var publicKeyPath = publicKey.map(keys.path)
        if publicKeyPath == nil {
            // Derive the public half with openssl for the keys made in other encodings.
            let out = keys.path(key + ".pub")
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["openssl", "pkey", "-in", keys.path(key), "-pubout", "-out", out]
            process.standardError = FileHandle.nullDevice
            try process.run()
            process.waitUntilExit()
            publicKeyPath = out
        }
        let server = try SMARTAuthServer(clients: ["caregate-test": (publicKeyPath!, "k1")])
        let provider = SMARTBackendServices(configuration: try configuration(keys, key: key), fhirBase: server.base)
        let client = FHIRRESTClient(base: server.base, authentication: .provider(provider))
        let before = Date().timeIntervalSince1970
        for id in ["p1", "p2", "p3"] {
            #expect(try await client.read("Patient", id).string("id") == id)
        }
        #expect(await provider.tokenRequests == 1)
        let tokens = server.entries("token")
        try #require(tokens.count == 1)
        #expect(tokens[0]["verdict"] as? String == "ok")
        let header = try #require(tokens[0]["header"] as? [String: Any])
        #expect(header["alg"] as? String == algorithm)
        #expect(header["typ"] as? String == "JWT")
        #expect(header["kid"] as? String == "k1")
        let claims = try #require(tokens[0]["claims"] as? [String: Any])
        #expect(claims["iss"] as? String == "caregate-test")
        #expect(claims["sub"] as? String == "caregate-test")
        #expect(claims["aud"] as? String == server.tokenURL)
        let exp = try #require(claims["exp"] as? Int)
        // Five minutes after the assertion was made, which was between `before` and now (a
        // loaded machine, as under the sanitizers, can take many seconds over it).
        #expect(Double(exp) >= before + 299 && Double(exp) <= Date().timeIntervalSince1970 + 301, "exp \(exp)")
        #expect(tokens[0]["scope"] as? String == "system/Observation.cu system/Patient.rs")
        #expect(server.entries("config").count == 1)
        #expect(server.entries("fhir").map { $0["verdict"] as? String } == ["ok", "ok", "ok"])
    }

    @Test("a token is kept until shortly before it expires, then renewed with a new assertion (new jti)")
    func renewsBeforeExpiry() async throws {
        guard let keys = TestKeys.available() else { return }
        let server = try SMARTAuthServer(clients: ["caregate-test": (keys.path("ec.pub.pem"), "k1")], tokenLifetime: 300)
        let clock = ManualClock()
        let provider = SMARTBackendServices(configuration: try configuration(keys, key: "ec.pem", renewBefore: 30), fhirBase: server.base,
                                            clock: { clock.now })
        let client = FHIRRESTClient(base: server.base, authentication: .provider(provider))
        _ = try await client.read("Patient", "p1")
        clock.advance(269)  // 31 s left: still good
        _ = try await client.read("Patient", "p1")
        #expect(server.entries("token").count == 1)
        clock.advance(2)  // 29 s left: renewed
        _ = try await client.read("Patient", "p1")
        let tokens = server.entries("token")
        #expect(tokens.count == 2)
        let jtis = Set(tokens.compactMap { ($0["claims"] as? [String: Any])?["jti"] as? String })
        #expect(jtis.count == 2)
        #expect(server.entries("fhir").allSatisfy { $0["verdict"] as? String == "ok" })
    }

    @Test("a 401 with a token makes the client get a new one and try once more")
    func renewsAfter401() async throws {
        guard let keys = TestKeys.available() else { return }
        let server = try SMARTAuthServer(clients: ["caregate-test": (keys.path("rsa.pub.pem"), "k1")], usesPerToken: 2)
        let provider = SMARTBackendServices(configuration: try configuration(keys, key: "rsa.pem"), fhirBase: server.base)
        let client = FHIRRESTClient(base: server.base, authentication: .provider(provider), retry: .none)
        for _ in 0..<3 { _ = try await client.read("Patient", "p1") }
        #expect(server.entries("fhir").map { $0["verdict"] as? String } == ["ok", "ok", "401", "ok"])
        #expect(server.entries("token").count == 2)
    }

    @Test("concurrent requests share one token request")
    func sharesTokenRequest() async throws {
        guard let keys = TestKeys.available() else { return }
        let server = try SMARTAuthServer(clients: ["caregate-test": (keys.path("ec.pub.pem"), "k1")])
        let provider = SMARTBackendServices(configuration: try configuration(keys, key: "ec.pem"), fhirBase: server.base)
        let client = FHIRRESTClient(base: server.base, authentication: .provider(provider))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<8 { group.addTask { _ = try await client.read("Patient", "p\(i)") } }
            try await group.waitForAll()
        }
        #expect(server.entries("token").count == 1)
        #expect(server.entries("fhir").count == 8)
    }

    @Test("a key the server did not register is refused with the OAuth error; no secret appears in the error")
    func wrongKeyRefused() async throws {
        guard let keys = TestKeys.available() else { return }
        let server = try SMARTAuthServer(clients: ["caregate-test": (keys.path("other.pub.pem"), "k1")])
        let provider = SMARTBackendServices(configuration: try configuration(keys, key: "rsa.pem"), fhirBase: server.base)
        let client = FHIRRESTClient(base: server.base, authentication: .provider(provider))
        let error = await #expect(throws: FHIRClientError.self) { _ = try await client.read("Patient", "p1") }
        let text = error?.description ?? ""
        #expect(text.contains("refused the client caregate-test"))
        #expect(text.contains("invalid_client: the signature does not verify"))
        #expect(!text.contains("eyJ"), "the assertion (a JWT starts eyJ) must not be in the error")
        let keyBody = try keys.pem("rsa.pem").split(separator: "\n")[1]
        #expect(!text.contains(keyBody))
        #expect(server.entries("token").first?["verdict"] as? String == "the signature does not verify")
        #expect(server.entries("fhir").isEmpty)
    }

    @Test("a wrong kid, a token endpoint that is not the aud, and an algorithm the server does not take are each refused")
    func refusals() async throws {
        guard let keys = TestKeys.available() else { return }
        let server = try SMARTAuthServer(clients: ["caregate-test": (keys.path("rsa.pub.pem"), "k1")], algorithms: ["ES384"])
        // Discovery says ES384 only: refused before any assertion is signed or sent.
        let rsa = SMARTBackendServices(configuration: try configuration(keys, key: "rsa.pem"), fhirBase: server.base)
        let error = await #expect(throws: FHIRClientError.self) { _ = try await rsa.accessToken() }
        #expect(error?.description.contains("does not accept RS384 assertions (it accepts ES384)") == true)
        #expect(server.entries("token").isEmpty)

        let open = try SMARTAuthServer(clients: ["caregate-test": (keys.path("rsa.pub.pem"), "k1")])
        let wrongKid = SMARTBackendServices(configuration: try configuration(keys, key: "rsa.pem", kid: "k2"), fhirBase: open.base)
        let kidError = await #expect(throws: FHIRClientError.self) { _ = try await wrongKid.accessToken() }
        #expect(kidError?.description.contains("invalid_client: unknown kid") == true)
        // An endpoint named by hand that differs from the URL the server knows itself by.
        let alias = open.tokenURL.replacingOccurrences(of: "127.0.0.1", with: "localhost")
        let wrongAud = SMARTBackendServices(configuration: try configuration(keys, key: "rsa.pem", tokenEndpoint: alias), fhirBase: open.base)
        let audError = await #expect(throws: FHIRClientError.self) { _ = try await wrongAud.accessToken() }
        #expect(audError?.description.contains("aud must be the token endpoint's URL") == true)
    }

    @Test("keys are read from PEM files; errors name the file and the problem, never the contents")
    func keyFiles() throws {
        guard let keys = TestKeys.available() else { return }
        #expect(try AssertionKey(file: keys.path("rsa.pem")).algorithm == "RS384")
        #expect(try AssertionKey(file: keys.path("rsa-pkcs1.pem")).algorithm == "RS384")
        #expect(try AssertionKey(file: keys.path("ec.pem")).algorithm == "ES384")
        #expect(try AssertionKey(file: keys.path("ec-sec1.pem")).algorithm == "ES384")
        func failure(_ name: String) -> String {
            do { _ = try AssertionKey(file: keys.path(name)); return "no error" } catch { return error.description }
        }
        #expect(failure("p256.pem") == "authorization: \(keys.path("p256.pem")): an EC key on a curve other than P-384; ES384 needs P-384")
        #expect(failure("rsa1024.pem") == "authorization: \(keys.path("rsa1024.pem")): an RSA key of 1024 bits is too short for RS384 (at least 2048)")
        #expect(failure("rsa.pub.pem") == "authorization: \(keys.path("rsa.pub.pem")): not a PEM RSA or P-384 private key")
        #expect(failure("missing.pem") == "authorization: cannot read the private key file \(keys.path("missing.pem"))")
    }

    @Test("the assertion's header and claims are exactly SMART's, in base64url without padding")
    func assertionShape() throws {
        guard let keys = TestKeys.available() else { return }
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let jwt = try ClientAssertion(clientID: "c1", tokenEndpoint: "https://auth.example.org/token", keyID: "k9",
                                      jwksURL: "https://app.example.org/jwks.json", lifetime: 900)
            .signed(with: AssertionKey(file: keys.path("ec.pem")), now: now, jti: "j-1")
        let parts = jwt.split(separator: ".")
        try #require(parts.count == 3)
        #expect(!jwt.contains("=") && !jwt.contains("+") && !jwt.contains("/"))
        #expect(String(decoding: Base64URL.decode(parts[0])!, as: UTF8.self) == #"{"alg":"ES384","typ":"JWT","kid":"k9","jku":"https://app.example.org/jwks.json"}"#)
        // The lifetime asked for (900 s) is capped at SMART's 300.
        #expect(String(decoding: Base64URL.decode(parts[1])!, as: UTF8.self) == #"{"iss":"c1","sub":"c1","aud":"https://auth.example.org/token","exp":1800000300,"jti":"j-1"}"#)
        #expect(Base64URL.decode(parts[2])?.count == 96)
    }
}

/// Answers every request with one discovery document, as an https EHR would (the logic under
/// test is the client's check of what it names).
struct DiscoveryAnswer: HTTPTransport {
    let tokenEndpoint: String
    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let body = #"{"token_endpoint": "\#(tokenEndpoint)", "token_endpoint_auth_methods_supported": ["private_key_jwt"]}"#
        return HTTPResponse(status: 200, headers: ["content-type": "application/json"], body: Array(body.utf8))
    }
}

@Suite("SMART discovery")
struct SMARTDiscoveryTests {
    @Test("an https server's discovery naming an http token endpoint, or one on another origin, is refused; the server's own https origin is taken, and an operator's explicit endpoint anywhere")
    func httpsAndSameOrigin() async throws {
        guard let keys = TestKeys.available() else { return }
        let key = try AssertionKey(file: keys.path("ec.pem"))
        let configuration = SMARTBackendServices.Configuration(clientID: "c", key: key, keyID: "k", scope: "system/Patient.rs")
        func discovered(_ endpoint: String) async throws(FHIRClientError) -> String {
            try await SMARTBackendServices(configuration: configuration, fhirBase: "https://ehr.example.org/fhir",
                                           transport: DiscoveryAnswer(tokenEndpoint: endpoint)).tokenEndpoint()
        }
        for (endpoint, refusal) in [("http://ehr.example.org/token", "not https; refused"),
                                    ("https://auth.example.org/token", "not on the FHIR server's origin (https://ehr.example.org)"),
                                    ("https://ehr.example.org:8443/token", "not on the FHIR server's origin"),
                                    ("file:///etc/passwd", "not https; refused")] {
            do {
                _ = try await discovered(endpoint)
                Issue.record("\(endpoint) was taken")
            } catch {
                #expect(error.description.contains(refusal), "\(endpoint): \(error)")
            }
        }
        #expect(try await discovered("https://ehr.example.org/oauth2/token") == "https://ehr.example.org/oauth2/token")
        #expect(try await discovered("https://EHR.example.org:443/token") == "https://EHR.example.org:443/token")
        var explicit = configuration
        explicit.tokenEndpoint = "https://auth.example.org/token"
        let named = SMARTBackendServices(configuration: explicit, fhirBase: "https://ehr.example.org/fhir",
                                         transport: DiscoveryAnswer(tokenEndpoint: "https://elsewhere.example.org/token"))
        #expect(try await named.tokenEndpoint() == "https://auth.example.org/token")
    }
}

@Suite("Token responses")
struct TokenResponseTests {
    func read(_ status: Int, _ body: String) throws(FHIRClientError) -> TokenResponse {
        try TokenResponse(status: status, body: Array(body.utf8), endpoint: "https://ehr.example.org/token", clientID: "c1")
    }

    @Test("a token is one bearer word: CR, LF, spaces and quotes in it are refused, and the token is never in the error")
    func tokenSyntax() throws {
        let granted = try read(200, #"{"access_token": "abc.DEF-1_~+/=", "token_type": "Bearer", "expires_in": 600, "scope": "system/Patient.rs"}"#)
        #expect(granted.accessToken == "abc.DEF-1_~+/=" && granted.lifetime == 600 && granted.scope == "system/Patient.rs")
        for token in [#"abc\r\nX-Injected: 1"#, "abc def", #"abc\"def"#, #"ab\u0000c"#] {
            do {
                _ = try read(200, #"{"access_token": "\#(token)", "token_type": "bearer"}"#)
                Issue.record("\(token) was taken")
            } catch {
                #expect(error.description.contains("characters a bearer token cannot have"))
                #expect(!error.description.contains("abc"))
            }
        }
    }

    @Test("expires_in is kept within 0 to a day; absent, 300 s")
    func lifetimeBounds() throws {
        #expect(try read(200, #"{"access_token": "t", "expires_in": -5}"#).lifetime == 0)
        #expect(try read(200, #"{"access_token": "t", "expires_in": 1e300}"#).lifetime == TokenResponse.longestLifetime)
        #expect(try read(200, #"{"access_token": "t"}"#).lifetime == 300)
    }

    @Test("a refusal gives the status and the server's reason, control characters dropped; other token types are refused")
    func refusals() throws {
        #expect(throws: FHIRClientError.self) { try read(200, #"{"access_token": "t", "token_type": "mac"}"#) }
        do {
            _ = try read(401, #"{"error": "invalid_client", "error_description": "bad\u001b[31m key"}"#)
        } catch {
            #expect(error.description == "authorization: https://ehr.example.org/token refused the client c1: HTTP 401, invalid_client: bad[31m key")
        }
        #expect(throws: FHIRClientError.self) { try read(200, "not json") }
    }
}
