import FHIR
import Foundation

/// How CareGate reaches one FHIR server: its base URL, TLS, how it authenticates, and its limits
/// and retries. The command line's server options and `caregate serve`'s `ehr:` section both
/// describe one, and both get their client from `client(defaultScope:)`. Secrets are named
/// (a file, an environment variable), never held inline.
public struct FHIRServerConnection: Sendable, Equatable {
    /// Where the credentials come from.
    public enum Credentials: Sendable, Equatable {
        /// No credentials.
        case none
        /// A bearer token: the first line of a file.
        case tokenFile(String)
        /// A bearer token in an environment variable.
        case tokenEnvironment(String)
        /// SMART Backend Services (a signed client assertion for an access token).
        case smart(SMART)
    }

    /// SMART Backend Services: the client's id and private key at the EHR's authorization server.
    public struct SMART: Sendable, Equatable {
        /// The client's id.
        public var clientID: String
        /// The PEM private key: a file, or else an environment variable holding it.
        public var keyFile: String?
        /// An environment variable holding the PEM key, when there is no file.
        public var keyEnvironment: String?
        /// The registered key's id (`kid`).
        public var keyID: String?
        /// The scopes to ask for; the caller's default when nil.
        public var scope: String?
        /// The token endpoint; from the server's `.well-known/smart-configuration` when nil.
        public var tokenEndpoint: String?

        /// A registration; the key from a file or an environment variable.
        public init(clientID: String, keyFile: String? = nil, keyEnvironment: String? = nil, keyID: String? = nil,
                    scope: String? = nil, tokenEndpoint: String? = nil) {
            self.clientID = clientID
            self.keyFile = keyFile
            self.keyEnvironment = keyEnvironment
            self.keyID = keyID
            self.scope = scope
            self.tokenEndpoint = tokenEndpoint
        }
    }

    /// The server's base URL.
    public var base: String
    /// Certificates to trust and to present.
    public var tls = TLSOptions()
    /// How the client authenticates.
    public var credentials = Credentials.none
    /// The largest answer read, in bytes once decompressed.
    public var maximumResponseSize = CurlTransport.defaultMaximumResponseSize
    /// When failed requests are tried again.
    public var retry = RetryPolicy.standard

    /// A connection to `base`: no credentials, default TLS, limits and retries.
    public init(base: String) {
        self.base = base
    }

    /// A client for this server. `defaultScope` is what SMART asks for when no scope is set;
    /// `warn` hears of secret files other users can read (they still work: the file is the site's).
    public func client(defaultScope: String, environment: [String: String] = ProcessInfo.processInfo.environment,
                       warn: (String) -> Void = { _ in }) throws(FHIRClientError) -> FHIRRESTClient {
        let transport = CurlTransport(tls: tls, maximumResponseSize: maximumResponseSize)
        return FHIRRESTClient(base: base, transport: transport,
                              authentication: try authentication(defaultScope, transport, environment, warn), retry: retry)
    }

    func authentication(_ defaultScope: String, _ transport: CurlTransport, _ environment: [String: String],
                        _ warn: (String) -> Void) throws(FHIRClientError) -> Authentication {
        switch credentials {
        case .none:
            return .none
        case .tokenFile(let path):
            Self.warnIfShared(path, warn)
            guard let bytes = try? FileBytes.read(path, limit: 1 << 20), let text = String(validating: bytes, as: UTF8.self) else {
                throw .authorization("cannot read a token from \(path)")
            }
            return try .bearer(secret: text, source: path)
        case .tokenEnvironment(let name):
            guard let text = environment[name], !text.isEmpty else { throw .authorization("the environment variable \(name) is not set") }
            return try .bearer(secret: text, source: "$\(name)")
        case .smart(let smart):
            let key: AssertionKey
            if let file = smart.keyFile {
                Self.warnIfShared(file, warn)
                key = try AssertionKey(file: file)
            } else {
                let name = smart.keyEnvironment ?? ""
                guard let pem = environment[name], !pem.isEmpty else { throw .authorization("the environment variable \(name) is not set") }
                key = try AssertionKey(pem: pem, source: "$\(name)")
            }
            let configuration = SMARTBackendServices.Configuration(clientID: smart.clientID, key: key, keyID: smart.keyID,
                                                                   scope: smart.scope ?? defaultScope, tokenEndpoint: smart.tokenEndpoint)
            return .provider(SMARTBackendServices(configuration: configuration, fhirBase: base, transport: transport, retry: retry))
        }
    }

    /// A secret file others can read is worth a warning.
    static func warnIfShared(_ path: String, _ warn: (String) -> Void) {
        guard let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int, mode & 0o077 != 0 else { return }
        warn("\(path) can be read by other users (mode \(String(mode, radix: 8))); a secret belongs in a file only its owner reads (chmod 600)")
    }
}

/// A secret's place: a file (first line) or an environment variable.
public enum SecretSource: Sendable, Equatable {
    /// A file, whose first line is the secret.
    case file(String)
    /// An environment variable.
    case environment(String)

    /// The secret's bytes as they are (a PEM file, say), at most `limit` of them; nil when
    /// missing, unreadable or larger (a configuration naming /dev/zero is not read for ever).
    public func bytes(limit: Int, environment: [String: String] = ProcessInfo.processInfo.environment) -> [UInt8]? {
        switch self {
        case .file(let path): try? FileBytes.read(path, limit: limit)
        case .environment(let name): environment[name].map { Array($0.utf8) }.flatMap { $0.count <= limit ? $0 : nil }
        }
    }

    /// The bearer token the secret holds, by the rule every token source follows
    /// (`Authentication.bearer(secret:source:)`: the first line, trimmed, one word); nil when
    /// missing, unreadable, empty or not one word.
    public func read(environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        let text: String?
        switch self {
        case .file(let path): text = (try? FileBytes.read(path, limit: 1 << 16)).flatMap { String(validating: $0, as: UTF8.self) }
        case .environment(let name): text = environment[name]
        }
        guard let text, case .bearer(let token)? = try? Authentication.bearer(secret: text, source: name) else { return nil }
        return token
    }

    /// How errors name the secret: the file's path, or `$NAME`; never its value.
    public var name: String {
        switch self {
        case .file(let path): path
        case .environment(let name): "$\(name)"
        }
    }
}
