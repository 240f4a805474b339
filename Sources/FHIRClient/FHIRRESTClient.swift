import FHIR
import Foundation

/// Why a FHIR interaction failed: the HTTP status and the server's OperationOutcome, a network
/// fault, or something the server cannot do. Never carries credentials.
public enum FHIRClientError: Error, Sendable, CustomStringConvertible {
    /// The server answered with an error status; `outcome` is its OperationOutcome's issues.
    case http(status: Int, method: String, url: String, outcome: String?)
    /// The request did not complete (DNS, TLS, timeout, connection reset).
    case transport(TransportError)
    /// The answer was not what FHIR promises (not a resource, not a Bundle).
    case invalidResponse(url: String, reason: String)
    /// The server's CapabilityStatement says it cannot do this.
    case unsupported(String)
    /// Paging went round in a circle (a `next` link seen before).
    case pagingLoop(url: String)
    /// A URL (a `next` link, a location) outside the server's base: not requested, so that the
    /// credentials never leave for another host, port or scheme.
    case outsideServer(url: String, base: String)
    /// Retries used up their count or time.
    case gaveUp(attempts: Int, last: String)
    /// No access token: the key, the token endpoint or its answer (never the secret itself).
    case authorization(String)

    /// What went wrong, without the server's text or any URL (either may name a patient: an
    /// OperationOutcome quoting a name and birth date, an id in a path): what logs say.
    public var kind: String {
        switch self {
        case .http(let status, let method, _, _): "HTTP \(status) to a \(method)"
        case .transport(let error): error.kind
        case .invalidResponse: "an answer that is not the FHIR expected"
        case .unsupported: "a server that cannot do what is needed"
        case .pagingLoop: "paging that loops"
        case .outsideServer: "a link outside the server"
        case .gaveUp(let attempts, _): "gave up after \(attempts) attempts"
        case .authorization: "authorization failed"
        }
    }

    public var description: String {
        switch self {
        case .http(let status, let method, let url, let outcome): "\(method) \(url): HTTP \(status)\(outcome.map { ": \($0)" } ?? "")"
        case .transport(let error): error.description
        case .invalidResponse(let url, let reason): "\(url): \(reason)"
        case .unsupported(let what): "the server cannot \(what)"
        case .pagingLoop(let url): "paging loops back to \(url)"
        case .outsideServer(let url, let base): "\(url) is outside the server \(base) (another scheme, host, port or path); not requested"
        case .gaveUp(let attempts, let last): "gave up after \(attempts) attempts: \(last)"
        case .authorization(let reason): "authorization: \(reason)"
        }
    }

    /// Whether trying again may succeed (408, 429, 5xx, network faults).
    public var isTransient: Bool {
        switch self {
        case .http(let status, _, _, _): status == 408 || status == 429 || (500...599).contains(status) && status != 501
        case .transport(let error): error.isTransient
        default: false
        }
    }
}

/// When and how often to try again: exponential backoff with jitter, honouring `Retry-After`,
/// bounded in count and in total time.
public struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included.
    public var maxAttempts: Int
    /// The first wait, doubled at each attempt.
    public var baseDelay: TimeInterval
    /// The longest wait between attempts.
    public var maxDelay: TimeInterval
    /// No retry starts after this many seconds from the first attempt.
    public var maxTotal: TimeInterval

    /// A policy; waits get jitter and give way to a longer `Retry-After`.
    public init(maxAttempts: Int = 6, baseDelay: TimeInterval = 0.5, maxDelay: TimeInterval = 30, maxTotal: TimeInterval = 120) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxTotal = maxTotal
    }

    /// Six attempts, from half a second, for at most two minutes.
    public static let standard = RetryPolicy()
    /// One attempt: nothing is tried again.
    public static let none = RetryPolicy(maxAttempts: 1)

    /// The wait before attempt `n + 1` (n from 1): the server's `Retry-After` when given, else
    /// base × 2^(n-1) with ±50% jitter, capped.
    public func delay(after attempt: Int, retryAfter: TimeInterval?) -> TimeInterval {
        if let retryAfter { return min(max(0, retryAfter), maxDelay) }
        let exponential = min(maxDelay, baseDelay * pow(2, Double(attempt - 1)))
        return exponential * Double.random(in: 0.5...1.5)
    }
}

/// How the client proves who it is.
public enum Authentication: Sendable {
    /// No credentials.
    case none
    /// A static bearer token (from a file or environment variable, not the command line).
    case bearer(String)
    /// A token source (SMART Backend Services): asked for a token before each request, told
    /// when the server refuses it with 401 (the request is then tried once more with a new one).
    case provider(any AccessTokenProvider)

    /// A bearer token from a secret's text (a token file, an environment variable): its first
    /// line, trimmed. A token with control characters is refused: sent as it is, a CR or LF
    /// would let the rest of the file become request headers. The token is never in the error.
    public static func bearer(secret text: String, source: String) throws(FHIRClientError) -> Authentication {
        let firstLine = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
        let token = firstLine.trimmingCharacters(in: .whitespaces)
        guard !token.isEmpty else { throw .authorization("\(source) holds no token") }
        guard !token.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0.properties.isWhitespace }) else {
            throw .authorization("the token in \(source) has control or space characters; a bearer token is one word")
        }
        return .bearer(token)
    }
}

/// FHIR REST against one server: reads, searches with paging, conditional creates and updates,
/// transactions, with retries for transient failures. Resources go and come as FHIR JSON.
public struct FHIRRESTClient: Sendable {
    /// The service base URL (`https://ehr.example.org/fhir`), without a trailing slash.
    public let base: String
    /// How requests are sent (libcurl, or a test's own).
    public let transport: any HTTPTransport
    /// How requests authenticate.
    public var authentication: Authentication
    /// When and how often failed requests are tried again.
    public var retry: RetryPolicy
    /// Seconds a request may take.
    public var timeout: TimeInterval
    /// The most pages a search follows.
    public var maxPages = 1000
    /// The most resources a search gathers: what it holds stays bounded, whatever the server pages.
    public var maxResources = 100_000

    /// A client of the server at `base`.
    public init(base: String, transport: any HTTPTransport = CurlTransport(), authentication: Authentication = .none,
                retry: RetryPolicy = .standard, timeout: TimeInterval = 60) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.transport = transport
        self.authentication = authentication
        self.retry = retry
        self.timeout = timeout
    }

    /// A server answer: the status, headers, and the resource in the body (if any).
    public struct Answer: Sendable {
        /// The HTTP status.
        public var status: Int
        /// The headers, names in lower case.
        public var headers: [String: String]
        /// The resource in the body, if any.
        public var resource: Element?
        /// The body as it came (for answers that are not resources: a Bulk Data manifest).
        public var body: [UInt8] = []
        /// `Location`, for creates.
        public var location: String? { headers["location"] ?? headers["content-location"] }
    }

    // MARK: Interactions

    /// The server's CapabilityStatement (`GET [base]/metadata`).
    public func capabilities() async throws(FHIRClientError) -> Element {
        let answer = try await execute("GET", url("metadata"))
        guard let resource = answer.resource, resource.resourceType == "CapabilityStatement" else {
            throw .invalidResponse(url: url("metadata"), reason: "the metadata answer is not a CapabilityStatement")
        }
        return resource
    }

    /// Reads `type/id`.
    public func read(_ type: String, _ id: String) async throws(FHIRClientError) -> Element {
        // The id may come from another server's data: one path segment, percent-encoded.
        let path = "\(encode(type))/\(encode(id))"
        let answer = try await execute("GET", url(path))
        guard let resource = answer.resource, resource.resourceType == type else {
            throw .invalidResponse(url: url(path), reason: "the answer is not a \(type)")
        }
        return resource
    }

    /// Every resource a search finds, following `next` links exactly as given (with a guard
    /// against loops and a page limit). `parameters` are name/value pairs (`_count`, `_include`).
    public func search(_ type: String, _ parameters: [(String, String)] = []) async throws(FHIRClientError) -> [Element] {
        var next: String? = searchURL(type, parameters)
        var seen: Set<String> = []
        var found: [Element] = []
        var pages = 0
        while let page = next {
            guard seen.insert(page).inserted else { throw .pagingLoop(url: page) }
            pages += 1
            if pages > maxPages { throw .invalidResponse(url: page, reason: "more than \(maxPages) pages") }
            let bundle = try await searchPage(page)
            found += Self.matches(bundle)
            if found.count > maxResources { throw .invalidResponse(url: page, reason: "the search gives more than \(maxResources) resources; narrow it") }
            next = try bundle.children(named: "link").first { $0.string("relation") == "next" }?.string("url").map { link throws(FHIRClientError) in
                try onServer(link, relativeTo: page)
            }
        }
        return found
    }

    /// The resources on a search's first page only: enough to learn whether anything matches
    /// (with `_count=1`, say) without reading every page.
    public func firstPage(_ type: String, _ parameters: [(String, String)]) async throws(FHIRClientError) -> [Element] {
        Self.matches(try await searchPage(searchURL(type, parameters)))
    }

    /// A search page's resources, without the OperationOutcomes a server adds to say how it took
    /// the search (`search.mode` "outcome": a parameter it ignored, say), which match nothing.
    static func matches(_ bundle: Element) -> [Element] {
        bundle.children(named: "entry").filter { $0.first("search.mode")?.value != "outcome" }.compactMap { $0["resource"] }
    }

    func searchURL(_ type: String, _ parameters: [(String, String)]) -> String {
        url(type) + (parameters.isEmpty ? "" : "?" + parameters.map { "\(encode($0.0))=\(encode($0.1))" }.joined(separator: "&"))
    }

    func searchPage(_ page: String) async throws(FHIRClientError) -> Element {
        let answer = try await execute("GET", page)
        guard let bundle = answer.resource, bundle.resourceType == "Bundle" else {
            throw .invalidResponse(url: page, reason: "a search answer must be a Bundle")
        }
        return bundle
    }

    /// A value set's expansion by the server (`GET [base]/ValueSet/$expand?url=…`): what a set
    /// defined by filters or other sets holds, listed.
    public func expand(valueSet url: String, version: String? = nil) async throws(FHIRClientError) -> Element {
        let page = searchURL("ValueSet/$expand", [("url", url)] + (version.map { [("valueSetVersion", $0)] } ?? []))
        let answer = try await execute("GET", page)
        guard let resource = answer.resource, resource.resourceType == "ValueSet" else {
            throw .invalidResponse(url: page, reason: "the answer is not a ValueSet")
        }
        return resource
    }

    /// Creates a resource; with `ifNoneExist` (a search query), only when nothing matches it.
    public func create(_ resource: Element, ifNoneExist: String? = nil) async throws(FHIRClientError) -> Answer {
        var headers: [(String, String)] = []
        if let ifNoneExist { headers.append(("If-None-Exist", ifNoneExist)) }
        return try await execute("POST", url(resource.resourceType ?? resource.name), body: resource, headers: headers)
    }

    /// Updates a resource by id, or by a conditional search (`Observation?identifier=s|v`); with
    /// `ifMatch` (a version), only when the server's version is still that one.
    public func update(_ resource: Element, at path: String, ifMatch version: String? = nil) async throws(FHIRClientError) -> Answer {
        var headers: [(String, String)] = []
        if let version { headers.append(("If-Match", "W/\"\(version)\"")) }
        return try await execute("PUT", url(path), body: resource, headers: headers)
    }

    /// Posts a transaction or batch Bundle; returns the response Bundle (one entry per request).
    public func transaction(_ bundle: Element) async throws(FHIRClientError) -> Element {
        let answer = try await execute("POST", base, body: bundle)
        guard let response = answer.resource, response.resourceType == "Bundle" else {
            throw .invalidResponse(url: base, reason: "a transaction answer must be a Bundle")
        }
        return response
    }

    /// What the server did with one entry of a batch or transaction.
    public struct EntryOutcome: Sendable {
        /// The HTTP status of `response.status` (`201 Created` gives 201).
        public var status: Int
        /// Where the server keeps what it created or updated (`Type/id/_history/n`).
        public var location: String?
        /// The entry's OperationOutcome, summarised.
        public var outcome: String?
        /// Whether the entry's status is 2xx.
        public var succeeded: Bool { (200...299).contains(status) }
        /// 408, 429 and 5xx: worth trying again.
        public var isTransient: Bool { status == 408 || status == 429 || (500...599).contains(status) && status != 501 }
    }

    /// Posts a batch Bundle: each entry succeeds or fails on its own; the answer has one outcome
    /// per entry, in order.
    public func batch(_ bundle: Element) async throws(FHIRClientError) -> [EntryOutcome] {
        let sent = bundle.children(named: "entry").count
        let response = try await transaction(bundle)
        let outcomes = Self.entryOutcomes(response)
        guard outcomes.count == sent else {
            throw .invalidResponse(url: base, reason: "the batch answer has \(outcomes.count) entries for \(sent) requests")
        }
        return outcomes
    }

    /// The per-entry outcomes of a batch-response or transaction-response Bundle.
    public static func entryOutcomes(_ response: Element) -> [EntryOutcome] {
        response.children(named: "entry").map { entry in
            let answer = entry["response"]
            let statusText = answer?.string("status") ?? ""
            let status = Int(statusText.prefix { $0.isNumber }) ?? 0
            let outcome = (answer?["outcome"]).flatMap(outcomeSummary) ?? entry["resource"].flatMap(outcomeSummary)
            return EntryOutcome(status: status, location: answer?.string("location"), outcome: outcome)
        }
    }

    // MARK: Plumbing

    /// The URL of `path` on this server; an absolute URL is kept as it is.
    public func url(_ path: String) -> String {
        path.hasPrefix("http://") || path.hasPrefix("https://") ? path : "\(base)/\(path)"
    }

    /// `link` (absolute, or relative to `page`) when it is on this server: the base's scheme,
    /// host and port, and a path under the base's. Anything else would carry the credentials
    /// elsewhere (another host or port, http for an https base, file:, gopher:).
    func onServer(_ link: String, relativeTo page: String) throws(FHIRClientError) -> String {
        guard let resolved = URL(string: link, relativeTo: URL(string: page))?.absoluteURL, FHIRRESTClient.isUnder(resolved, base) else {
            throw .outsideServer(url: link, base: base)
        }
        return resolved.absoluteString
    }

    /// Whether `url` has the origin of `base` and a path under it.
    static func isUnder(_ url: URL, _ base: String) -> Bool {
        guard let root = URL(string: base), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme),
              scheme == root.scheme?.lowercased(), url.host?.lowercased() == root.host?.lowercased(),
              effectivePort(url) == effectivePort(root), url.user == nil, url.password == nil else { return false }
        let basePath = root.path.hasSuffix("/") ? String(root.path.dropLast()) : root.path
        let path = url.path
        return basePath.isEmpty || path == basePath || path.hasPrefix(basePath + "/") || path.hasPrefix(basePath + "?")
    }

    static func effectivePort(_ url: URL) -> Int? { url.port ?? (url.scheme?.lowercased() == "https" ? 443 : url.scheme?.lowercased() == "http" ? 80 : nil) }

    func encode(_ s: String) -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        allowed.insert(charactersIn: "-._~:,")
        return s.addingPercentEncoding(withAllowedCharacters: allowed) ?? s
    }

    /// One interaction with retries; the answer's body read as a resource when it is one.
    public func execute(_ method: String, _ url: String, body: Element? = nil, headers extra: [(String, String)] = []) async throws(FHIRClientError) -> Answer {
        var headers: [(String, String)] = [("Accept", "application/fhir+json")]
        var bytes: [UInt8]?
        if let body {
            headers.append(("Content-Type", "application/fhir+json"))
            bytes = FHIRJSONWriter(pretty: false).write(body)
        }
        return try await exchange(method, url, headers: headers + extra, body: bytes) { [transport] request throws(TransportError) in
            try await transport.send(request)
        }
    }

    /// Downloads `url` into the file at `path` as it arrives (at most `limit` bytes), with retries
    /// (each starts the file again). Credentials go only with `authenticated` and only to this
    /// server; without them, any http or https URL may be fetched (a Bulk Data file on storage
    /// elsewhere whose manifest says it needs no token).
    public func download(_ url: String, to path: String, limit: Int, authenticated: Bool, headers: [(String, String)] = []) async throws(FHIRClientError) -> Answer {
        var client = self
        if !authenticated {
            guard let target = URL(string: url), let scheme = target.scheme?.lowercased(), ["http", "https"].contains(scheme), target.user == nil else {
                throw .outsideServer(url: url, base: base)
            }
            client.authentication = .none
        }
        return try await client.exchange("GET", url, headers: headers, body: nil, anywhere: !authenticated) { [transport] request throws(TransportError) in
            try await transport.download(request, to: path, limit: limit)
        }
    }

    /// One exchange with retries and authentication, through `send`.
    func exchange(_ method: String, _ url: String, headers: [(String, String)], body bytes: [UInt8]?, anywhere: Bool = false,
                  send: (HTTPRequest) async throws(TransportError) -> HTTPResponse) async throws(FHIRClientError) -> Answer {
        // Requests (and so credentials) go to this server only.
        guard let target = URL(string: url), anywhere || FHIRRESTClient.isUnder(target, base) else { throw .outsideServer(url: url, base: base) }
        let started = Date()
        var attempt = 0
        var lastError: FHIRClientError?
        var renewedAfter401 = false
        while true {
            attempt += 1
            var request = HTTPRequest(method: method, url: url, headers: headers, body: bytes, timeout: timeout)
            var token: String?
            switch authentication {
            case .none: break
            case .bearer(let value): token = value
            case .provider(let provider): token = try await provider.accessToken()
            }
            if let token { request.headers.append(("Authorization", "Bearer \(token)")) }
            var retryAfter: TimeInterval?
            do {
                let response = try await send(request)
                if response.status == 401, case .provider(let provider) = authentication, let token, !renewedAfter401 {
                    // The token expired early or was revoked: one more try with a new one.
                    await provider.invalidate(token)
                    renewedAfter401 = true
                    attempt -= 1
                    continue
                }
                let resource = response.body.isEmpty ? nil : try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(response.body).resource
                if (200...299).contains(response.status) || response.status == 304 {
                    return Answer(status: response.status, headers: response.headers, resource: resource, body: response.body)
                }
                let error = FHIRClientError.http(status: response.status, method: method, url: url, outcome: resource.flatMap(FHIRRESTClient.outcomeSummary))
                guard error.isTransient else { throw error }
                lastError = error
                retryAfter = response.headers["retry-after"].flatMap { FHIRRESTClient.retryAfterSeconds($0) }
            } catch let error as FHIRClientError {
                throw error
            } catch let error as TransportError {
                guard error.isTransient else { throw FHIRClientError.transport(error) }
                lastError = .transport(error)
            } catch {
                lastError = .invalidResponse(url: url, reason: "\(error)")
            }
            let wait = retry.delay(after: attempt, retryAfter: retryAfter)
            if attempt >= retry.maxAttempts || Date().timeIntervalSince(started) + wait > retry.maxTotal {
                if retry.maxAttempts == 1, let lastError { throw lastError }
                throw .gaveUp(attempts: attempt, last: lastError?.description ?? "no answer")
            }
            try? await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000))
        }
    }

    /// An OperationOutcome's issues in a line: `error (invalid): Observation.status is required`.
    public static func outcomeSummary(_ resource: Element) -> String? {
        guard resource.resourceType == "OperationOutcome" else { return nil }
        let issues = resource.children(named: "issue").map { issue -> String in
            let text = issue.string("diagnostics") ?? issue.first("details.text")?.value ?? ""
            return "\(issue.string("severity") ?? "error") (\(issue.string("code") ?? "?")): \(text)"
        }
        return issues.isEmpty ? nil : issues.joined(separator: "; ")
    }

    /// `Retry-After` as seconds: a number, or an HTTP date (`Wed, 21 Oct 2026 07:28:00 GMT`,
    /// RFC 9110's IMF-fixdate); never negative, nil unless finite (`nan`, `inf` from a server
    /// are not waits). Read by hand: Foundation's DateFormatter leaks on Linux at each call.
    public static func retryAfterSeconds(_ value: String, now: Date = Date()) -> TimeInterval? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = TimeInterval(text) { return seconds.isFinite ? max(0, seconds) : nil }
        return httpDate(text).map { max(0, $0.timeIntervalSince(now)) }
    }

    /// An IMF-fixdate: `Day, DD Mon YYYY HH:MM:SS GMT`.
    static func httpDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard parts.count == 6, parts[0].hasSuffix(","), parts[5] == "GMT",
              let day = Int(parts[1]), (1...31).contains(day), let month = months.firstIndex(of: String(parts[2])),
              let year = Int(parts[3]), (1970...9999).contains(year) else { return nil }
        let clock = parts[4].split(separator: ":").compactMap { Int($0) }
        guard clock.count == 3, (0...23).contains(clock[0]), (0...59).contains(clock[1]), (0...60).contains(clock[2]) else { return nil }
        // Days from 1970-01-01 to the civil date (proleptic Gregorian).
        let y = month < 2 ? year - 1 : year
        let era = y / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * ((month + 10) % 12) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + clock[0] * 3600 + clock[1] * 60 + clock[2]))
    }
}
