import Foundation

/// Where a client gets the access token it sends as `Authorization: Bearer`. The client asks
/// before each request and calls `invalidate` when the server answers 401 with that token.
public protocol AccessTokenProvider: Sendable {
    /// A token to send, from the cache while it is fresh.
    func accessToken() async throws(FHIRClientError) -> String
    /// Forgets `token` (the server refused it with 401); the next request gets a new one.
    func invalidate(_ token: String) async
}

/// SMART Backend Services (client credentials with a signed JWT assertion): finds the token
/// endpoint in `.well-known/smart-configuration`, asks it for a token with a fresh assertion,
/// keeps the token until shortly before it expires, and asks again then or after a 401.
/// Concurrent callers share one token request. Neither the key, the assertion nor the token
/// ever appears in an error or a description.
public actor SMARTBackendServices: AccessTokenProvider {
    /// The client's registration at the EHR's authorization server.
    public struct Configuration: Sendable {
        /// The client's id.
        public var clientID: String
        /// The private key that signs the assertions.
        public var key: AssertionKey
        /// The `kid` of the registered public key.
        public var keyID: String?
        /// Space-separated scopes, e.g. `system/Observation.cu system/CarePlan.rs`.
        public var scope: String
        /// The token endpoint; when nil it is discovered from the FHIR base.
        public var tokenEndpoint: String?
        /// The JWK Set URL, when the client registered one.
        public var jwksURL: String?
        /// A token is renewed this many seconds before it expires.
        public var renewBefore: TimeInterval

        /// A registration; without `tokenEndpoint` it is read from the server's
        /// `.well-known/smart-configuration`.
        public init(clientID: String, key: AssertionKey, keyID: String? = nil, scope: String, tokenEndpoint: String? = nil,
                    jwksURL: String? = nil, renewBefore: TimeInterval = 30) {
            self.clientID = clientID
            self.key = key
            self.keyID = keyID
            self.scope = scope
            self.tokenEndpoint = tokenEndpoint
            self.jwksURL = jwksURL
            self.renewBefore = renewBefore
        }
    }

    /// What the token endpoint granted.
    public struct Grant: Sendable {
        /// The access token.
        public var accessToken: String
        /// When it stops working (renewed 30 seconds before).
        public var expires: Date
        /// The scopes granted, which may differ from those asked for.
        public var scope: String?
    }

    /// The client's registration.
    public let configuration: Configuration
    /// The FHIR server's base URL, whose configuration names the token endpoint.
    public let fhirBase: String
    let transport: any HTTPTransport
    let retry: RetryPolicy
    /// The time tokens are kept against (tests move it); assertions always use the real time.
    let clock: @Sendable () -> Date
    private var grant: Grant?
    private var pending: Task<Grant, any Error>?
    private var discoveredEndpoint: String?
    /// How many token requests were made (for status output and tests).
    public private(set) var tokenRequests = 0

    /// A token source for `configuration` at the server `fhirBase`.
    public init(configuration: Configuration, fhirBase: String, transport: any HTTPTransport = CurlTransport(), retry: RetryPolicy = .standard,
                clock: @escaping @Sendable () -> Date = { Date() }) {
        self.clock = clock
        self.configuration = configuration
        self.fhirBase = fhirBase.hasSuffix("/") ? String(fhirBase.dropLast()) : fhirBase
        self.transport = transport
        self.retry = retry
    }

    /// A token to send: the cached one while fresh, else a new one (one request at a time, whoever
    /// asks).
    public func accessToken() async throws(FHIRClientError) -> String {
        if let grant, grant.expires.timeIntervalSince(clock()) > configuration.renewBefore { return grant.accessToken }
        if pending == nil {
            pending = Task { try await self.requestGrant() }
        }
        let task = pending!
        do {
            let fresh = try await task.value
            grant = fresh
            pending = nil
            return fresh.accessToken
        } catch {
            pending = nil
            throw error as? FHIRClientError ?? .authorization("\(error)")
        }
    }

    /// Forgets `token` when it is the cached one (the server refused it with 401).
    public func invalidate(_ token: String) async {
        if grant?.accessToken == token { grant = nil }
    }

    /// The token endpoint: configured, or `token_endpoint` of `[base]/.well-known/smart-configuration`,
    /// checked to be on the FHIR server's origin and to accept `private_key_jwt` with this key's
    /// algorithm (see `SMARTConfiguration.check`).
    public func tokenEndpoint() async throws(FHIRClientError) -> String {
        if let endpoint = configuration.tokenEndpoint ?? discoveredEndpoint { return endpoint }
        let url = fhirBase + "/.well-known/smart-configuration"
        let response = try await send(HTTPRequest(method: "GET", url: url, headers: [("Accept", "application/json")]))
        let discovered = try SMARTConfiguration(status: response.status, document: response.body, url: url)
        try discovered.check(fhirBase: fhirBase, algorithm: configuration.key.algorithm)
        discoveredEndpoint = discovered.tokenEndpoint
        return discovered.tokenEndpoint
    }

    private func requestGrant() async throws(FHIRClientError) -> Grant {
        let endpoint = try await tokenEndpoint()
        let assertion = try ClientAssertion(clientID: configuration.clientID, tokenEndpoint: endpoint, keyID: configuration.keyID,
                                            jwksURL: configuration.jwksURL).signed(with: configuration.key)
        let form = [
            ("grant_type", "client_credentials"),
            ("scope", configuration.scope),
            ("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"),
            ("client_assertion", assertion),
        ].map { "\($0)=\(Self.formEncode($1))" }.joined(separator: "&")
        tokenRequests += 1
        let requested = clock()
        let response = try await send(HTTPRequest(method: "POST", url: endpoint,
                                                  headers: [("Content-Type", "application/x-www-form-urlencoded"), ("Accept", "application/json")],
                                                  body: Array(form.utf8)))
        let answer = try TokenResponse(status: response.status, body: response.body, endpoint: endpoint, clientID: configuration.clientID)
        return Grant(accessToken: answer.accessToken, expires: requested.addingTimeInterval(answer.lifetime), scope: answer.scope)
    }

    /// One request to the authorization server, retried like FHIR requests on network faults, 429 and 5xx.
    private func send(_ request: HTTPRequest) async throws(FHIRClientError) -> HTTPResponse {
        let started = Date()
        var attempt = 0
        while true {
            attempt += 1
            var retryAfter: TimeInterval?
            var last: String
            do {
                let response = try await transport.send(request)
                guard response.status == 429 || (500...599).contains(response.status) else { return response }
                last = "\(request.url): HTTP \(response.status)"
                retryAfter = response.headers["retry-after"].flatMap { FHIRRESTClient.retryAfterSeconds($0) }
            } catch {
                guard error.isTransient else { throw .authorization("no token from \(request.url): \(error)") }
                last = error.description
            }
            let wait = retry.delay(after: attempt, retryAfter: retryAfter)
            if attempt >= retry.maxAttempts || Date().timeIntervalSince(started) + wait > retry.maxTotal {
                throw .authorization("no token from \(request.url) after \(attempt) attempt(s): \(last)")
            }
            try? await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000))
        }
    }

    static func formEncode(_ s: String) -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        allowed.insert(charactersIn: "-._*")
        return (s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s).replacingOccurrences(of: "%20", with: "+")
    }
}
