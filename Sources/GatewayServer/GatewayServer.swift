import CareStore
import FHIRClient
import Foundation
import Gateway
import JSON
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import NIOSSL
import Logging
import NIOCore
import ServiceLifecycle

/// What each request handler knows: Hummingbird's core context and who the request comes from
/// (wrong codes and requests in flight are counted per client).
public struct GatewayRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The peer's IP address, or "unknown".
    public let peerAddress: String
    /// The key the client's requests are counted under (`ClientAddress.key`): the peer's address,
    /// or behind a trusted proxy the client it names; IPv6 by /64. Set by `ClientAddressMiddleware`.
    public var client: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = CoreRequestContextStorage(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
        client = ClientAddress.bucket(peerAddress)
    }
}

/// The gateway as an HTTP service: health checks, CareKit's sync API and the operator's
/// dashboard, over one store.
/// Handlers are thin: they parse, call a `Gateway` use case, and write JSON.
///
/// ```swift
/// let server = GatewayServer(store: store, limits: .init())
/// try await server.application(host: "127.0.0.1", port: 8080).runService()
/// ```
public struct GatewayServer: Sendable {
    /// What the server needs of its store: care plans, devices, the outbox, the import log, and
    /// the attempts, sessions and refresh schedule every instance over the store shares.
    public typealias Store = any CarePlanStore & DeviceRegistry & Outbox & ImportLog & AccessLedger & RefreshSchedule & AuditTrail
    public let store: Store
    /// Every access to a patient's data, noted as it happens and written to the store's trail
    /// every `auditInterval` (`AuditFlush`). Replace it before `application` to queue entries for the EHR.
    public var audit: AuditRecorder
    /// How often noted entries are written: short, so each write is small and a request never
    /// waits behind a second's worth of hashing (a crash loses at most this much of the trail).
    public var auditInterval: Duration = .milliseconds(250)
    /// How long the trail is kept; nil keeps every entry. Pruned when the server starts and hourly.
    public var auditRetention: AuditRetention?
    public var limits: Limits
    /// The EHR, when the gateway pushes and refreshes on its own; nil serves devices only.
    public let ehr: EHRLink?
    /// What the EHR workers know and the requests that wake them.
    public let activity = EHRActivity()
    /// Wrong secrets (enrollment codes, the admin token, the notify token) per client, one bucket.
    let throttle: AttemptThrottle
    let connections: ConnectionsPerAddress
    let perDevice: InFlightLimit
    /// The same limit across every gateway over the store, for calls that do more than say "up to date".
    let deviceCalls: DeviceCallSlots
    let pullPages = PullPageCache()
    /// Devices' last sync times, written in the background.
    let syncTimes: SyncTimes
    let perAddress: InFlightLimit
    /// Device pushes that arrive together share one commit.
    let pushes: PushCommitGroups
    /// The operator's dashboard at `/ui`, when an admin token is configured.
    public let dashboard: DashboardAccess?
    let sessions: DashboardSessions

    /// Sizes the server accepts.
    public struct Limits: Sendable {
        /// Largest sync POST body (bytes).
        public var syncBody = 8 << 20
        /// Largest enrollment body (bytes).
        public var enrollBody = 4 << 10
        /// Versions per pull page, at most.
        public var pageSize = CareKitSync.defaultPageSize
        /// Wrong enrollment codes per address in `throttleWindow` before it is refused.
        public var wrongCodes = 5
        public var throttleWindow: TimeInterval = 15 * 60
        /// A connection with nothing to read or write for this long is closed (an idle or
        /// stalled client holds no connection for good).
        public var idleSeconds: Int64 = 30
        /// A request's head (request line and headers) must arrive within this many seconds of
        /// the connection opening or the last response: a slow-loris client is cut off.
        public var requestHeadSeconds: Int64 = 10
        /// A request's body must arrive whole within this many seconds of its head (a sync body
        /// of 8 MiB needs 140 KB/s): a client trickling a body a byte at a time is cut off.
        public var requestBodySeconds: Int64 = 60
        /// Open connections at most: past it the server stops accepting until one closes (kept
        /// below the process's descriptor limit, which the store and the EHR client share).
        public var maxConnections = GatewayServer.Limits.connectionsWithinDescriptors()
        /// Open connections per client address (IPv6 per /64; trusted proxies not counted):
        /// past it a new connection is closed as it opens.
        public var connectionsPerAddress = 128
        /// The proxies whose `Forwarded` and `X-Forwarded-For` name the client (`ClientAddress`).
        public var trustedProxies = TrustedProxies.none
        /// Header fields per request, and their total size in bytes; past either the request is refused.
        public var headerCount = 100
        public var headerBytes = 32 << 10
        /// Largest rest-hook notification body (bytes).
        public var notifyBody = 4 << 20
        /// Requests in flight at once per device token (sync calls) and per client address (all
        /// routes); past either the request gets 429 with `Retry-After`.
        public var concurrentPerDevice = 2
        public var concurrentPerAddress = 64

        public init() {}

        /// The descriptor limit less 256 for the store, logs and the EHR client, at most 16,384.
        public static func connectionsWithinDescriptors() -> Int {
            var limit = rlimit()
            #if canImport(Glibc)
            guard Glibc.getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 768 }
            #else
            guard getrlimit(RLIMIT_NOFILE, &limit) == 0 else { return 768 }
            #endif
            return Int(min(max(Int64(limit.rlim_cur) - 256, 32), 16_384))
        }
    }

    public init(store: Store, limits: Limits = Limits(), ehr: EHRLink? = nil, dashboard: DashboardAccess? = nil) {
        self.store = store
        self.limits = limits
        self.ehr = ehr
        self.dashboard = dashboard
        sessions = DashboardSessions(ledger: store, idleTimeout: dashboard?.idleTimeout ?? 0)
        throttle = AttemptThrottle(ledger: store, limit: limits.wrongCodes, window: limits.throttleWindow)
        connections = ConnectionsPerAddress(limit: limits.connectionsPerAddress, trusted: limits.trustedProxies)
        perDevice = InFlightLimit(limits.concurrentPerDevice)
        deviceCalls = DeviceCallSlots(ledger: store, limit: limits.concurrentPerDevice, lease: TimeInterval(limits.requestBodySeconds + 60))
        perAddress = InFlightLimit(limits.concurrentPerAddress)
        pushes = PushCommitGroups(sync: CareKitSync(store: store))
        syncTimes = SyncTimes(store: store)
        audit = AuditRecorder(trail: store)
    }

    /// The routes, for an application or a test.
    public func router() -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        let metrics = GatewayMetrics.shared
        router.add(middleware: MetricsMiddleware())
        // One log line per request with its id, method, route and status (no paths, headers or bodies: no tokens, no PHI).
        router.add(middleware: RouteLogMiddleware())
        router.add(middleware: ClientAddressMiddleware(trusted: limits.trustedProxies))
        router.add(middleware: AddressConcurrencyMiddleware(limit: perAddress))
        router.get("metrics") { [store] _, _ in
            let text = await Blocking.run { metrics.scrape(store) }
            return Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: text)))
        }
        router.get("healthz") { _, _ in JSONBody.response(.ok, "{\"status\":\"ok\"}") }
        router.get("readyz") { _, _ in try await readiness() }
        CareKitSyncRoutes(server: self).register(on: router)
        QuestionnaireRoutes(server: self, sync: CareKitSyncRoutes(server: self)).register(on: router)
        NotificationRoutes(server: self).register(on: router)
        if let dashboard { DashboardRoutes(server: self, access: dashboard, sessions: sessions).register(on: router) }
        return router
    }

    /// The workers to run beside the HTTP server: the devices' sync times, and with an EHR the
    /// outbox push and the patient refresh.
    public func workers(logger: Logger) -> [any Service] {
        let flush = AuditFlush(recorder: audit, retention: auditRetention, logger: logger, interval: auditInterval)
        guard let ehr else { return [syncTimes, flush] }
        var workers: [any Service] = [
            syncTimes, flush, OutboxPushWorker(push: ehr.push, interval: ehr.pushInterval, clock: ehr.clock, activity: activity, audit: audit, logger: logger),
            PatientRefreshWorker(link: ehr, activity: activity, audit: audit, logID: PatientLogID(), logger: logger),
        ]
        if let signals = store as? any StoreSignals { workers.append(OutcomeSignalListener(signals: signals, activity: activity)) }
        return workers
    }

    /// Outcomes were written here: this instance's push worker and, over a shared store,
    /// every other instance's wake up.
    func outcomesWritten() async {
        activity.pushSoon()
        guard let signals = store as? any StoreSignals else { return }
        try? await Blocking.run { try signals.announce(.outcomesWritten) }
    }

    /// An application listening on `host:port` (port 0: any free port, reported to `onRunning`),
    /// with the EHR workers as its services: on graceful shutdown the server stops accepting and
    /// finishes its requests first, then the workers finish the batch in hand.
    public func application(host: String, port: Int, tls: TLSConfiguration? = nil, logger: Logger = Logger(label: "caregate"),
                            onRunning: @escaping @Sendable (Int) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        let (headSeconds, bodySeconds, connections) = (limits.requestHeadSeconds, limits.requestBodySeconds, connections)
        let http = HTTP1Channel.Configuration(
            additionalChannelHandlers: [connections.handler(), RequestDeadlines(head: .seconds(headSeconds), body: .seconds(bodySeconds)),
                                        RequestBodyCeiling(ceiling: 2 * max(limits.syncBody, limits.notifyBody, limits.enrollBody))],
            idleTimeout: .seconds(limits.idleSeconds),
            httpDecoderConfiguration: .init(maxHeaderFieldSize: limits.headerBytes, maxHeaderListSize: limits.headerBytes,
                                            maxHeaderFieldCount: limits.headerCount))
        let server: HTTPServerBuilder = try tls.map { try .tls(.http1(configuration: http), tlsConfiguration: $0) } ?? .http1(configuration: http)
        return Application(router: router(), server: server,
                           configuration: .init(address: .hostname(host, port: port), serverName: "CareGate",
                                                availableConnectionsDelegate: MaximumAvailableConnections(limits.maxConnections, logger: logger)),
                           services: workers(logger: logger), onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) }, logger: logger)
    }

    /// A server TLS configuration from PEM files (TLS 1.2 at least); throws NIOSSL's error for
    /// a file that is missing or not PEM, or a key that does not match.
    public static func tlsConfiguration(certificate: String, key: String) throws -> TLSConfiguration {
        func read(_ path: String) throws -> [UInt8] {
            guard let bytes = SecretSource.file(path).bytes(limit: 1 << 20) else { throw GatewayTLSError(reason: "cannot read \(path) (missing, unreadable or over 1 MB)") }
            return bytes
        }
        let chain: [NIOSSLCertificateSource]
        do { chain = try NIOSSLCertificate.fromPEMBytes(read(certificate)).map { .certificate($0) } } catch let error as GatewayTLSError { throw error } catch {
            throw GatewayTLSError(reason: "\(certificate) is not a PEM certificate chain (\(error))")
        }
        guard !chain.isEmpty else { throw GatewayTLSError(reason: "\(certificate) holds no certificate") }
        let privateKey: NIOSSLPrivateKey
        do { privateKey = try NIOSSLPrivateKey(bytes: read(key), format: .pem) } catch let error as GatewayTLSError { throw error } catch {
            throw GatewayTLSError(reason: "\(key) is not a PEM private key (\(error))")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }

    /// 200 when the store answers and (with an EHR) the push worker's last attempt reached the
    /// EHR, within two intervals; 503 otherwise, saying which.
    func readiness() async throws -> Response {
        do {
            _ = try await Blocking.run { try store.knowledgeVector() }
        } catch {
            return JSONBody.error(.serviceUnavailable, "the store does not answer")
        }
        if let ehr {
            let window = 2 * max(ehr.pushInterval, 1) + 30
            // The last attempt must have reached it, and recently.
            // A plain status: the probe is unauthenticated, and the EHR's address and error text
            // (which may quote a patient) are for the operators' logs and dashboard.
            guard let contact = activity.lastContact, activity.lastError == nil, Date().timeIntervalSince(contact) <= window else {
                return JSONBody.error(.serviceUnavailable, "the EHR has not answered in the last \(Int(window)) seconds")
            }
        }
        return JSONBody.response(.ok, "{\"status\":\"ready\"}")
    }
}

/// Requests in flight per key (a device, an address), with a ceiling.
final class InFlightLimit: Sendable {
    let limit: Int
    private let counts = Locked<[String: Int]>([:])

    init(_ limit: Int) {
        self.limit = limit
    }

    /// Counts a request in, unless `key` has `limit` in flight already.
    func enter(_ key: String) -> Bool {
        counts.withLock { counts in
            guard counts[key, default: 0] < limit else { return false }
            counts[key, default: 0] += 1
            return true
        }
    }

    func leave(_ key: String) {
        counts.withLock { counts in
            let left = counts[key, default: 1] - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    /// Runs `body` counted in, or answers 429 when `key` is at its ceiling (calling `refused` first).
    func run(_ key: String, what: String, refused: () -> Void = {}, _ body: () async throws -> Response) async throws -> Response {
        guard enter(key) else {
            refused()
            return JSONBody.error(.tooManyRequests, "too many requests in flight from this \(what) (at most \(limit) at once); try again shortly",
                                  headers: [.retryAfter: "1"])
        }
        defer { leave(key) }
        return try await body()
    }
}

/// Devices' last sync times, noted by each sync call and written to the store in the background:
/// all the times noted in an interval in one transaction, on the worker's own task. A sync call
/// never waits for a write (bookkeeping written inline made reads queue behind the store's one
/// writer); what is still noted at graceful shutdown is written then.
/// Wakes this instance's push worker when any gateway over the store announces outcomes.
struct OutcomeSignalListener: Service {
    let signals: any StoreSignals
    let activity: EHRActivity

    func run() async throws {
        let activity = self.activity
        await cancelWhenGracefulShutdown {
            await signals.listen(.outcomesWritten) { activity.pushSoon() }
        }
    }
}

/// Writes the audit entries noted since the last write, every `interval` and when the server
/// stops (after the HTTP server has finished its requests); a failed write is tried again with
/// the next, its entries kept.
struct AuditFlush: Service {
    let recorder: AuditRecorder
    let retention: AuditRetention?
    let logger: Logger
    var interval: Duration = .milliseconds(250)
    /// How often the trail is pruned (`retention`).
    var pruneEvery: Duration = .seconds(3_600)

    /// Archives and drops the entries past the retention; a failure is logged and tried again at the next prune.
    func prune() async {
        guard let retention else { return }
        do {
            let pruned = try await Blocking.run { try retention.prune() }
            if pruned.dropped > 0 { logger.info("audit entries archived and dropped", metadata: ["dropped": "\(pruned.dropped)", "file": "\(pruned.file ?? "")"]) }
        } catch {
            logger.error("the audit trail could not be pruned; every entry is kept", metadata: ["error": "\(error)"])
        }
    }

    /// Writes what is noted; `closing` (the server stops) writes every repeat window's count too.
    func write(closing: Bool = false) async {
        do { _ = try await Blocking.run { [recorder] in try recorder.flush(closing: closing) } } catch {
            logger.error("the audit trail could not be written; its entries are kept for the next try", metadata: ["error": "\(error)", "pending": "\(recorder.pendingCount)"])
        }
    }

    func run() async throws {
        await prune()
        let clock = ContinuousClock()
        var nextPrune = clock.now + pruneEvery
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            await write()
            if clock.now >= nextPrune { await prune(); nextPrune = clock.now + pruneEvery }
        }
        await write(closing: true)
    }
}

final class SyncTimes: Service, Sendable {
    let store: any DeviceRegistry & Sendable
    let interval: Duration
    private let noted = Locked<[String: Date]>([:])

    init(store: any DeviceRegistry & Sendable, interval: Duration = .seconds(5)) {
        self.store = store
        self.interval = interval
    }

    /// Notes a device's sync (the newest time wins).
    func note(_ deviceID: String, at date: Date = Date()) {
        noted.withLock { $0[deviceID] = date }
    }

    /// Writes what is noted (and keeps it noted when the write fails: it is tried again).
    func write() async {
        let times = noted.withLock { noted in defer { noted = [:] }; return noted }
        guard !times.isEmpty else { return }
        do {
            try await Blocking.run { [store] in try store.recordSyncs(times) }
        } catch {
            noted.withLock { noted in noted.merge(times) { newer, _ in newer } }
        }
    }

    func run() async throws {
        while !Task.isShuttingDownGracefully && !Task.isCancelled {
            try? await cancelWhenGracefulShutdown { [interval] in try await Task.sleep(for: interval) }
            await write()
        }
        await write()
    }
}

/// At most `limit` requests in flight per client address, whatever the route.
struct AddressConcurrencyMiddleware: RouterMiddleware {
    let limit: InFlightLimit

    func handle(_ request: Request, context: GatewayRequestContext, next: (Request, GatewayRequestContext) async throws -> Response) async throws -> Response {
        try await limit.run(context.client, what: "address") { try await next(request, context) }
    }
}

/// Sets who a request comes from (`GatewayRequestContext.client`) from the peer's address and,
/// when the peer is a trusted proxy, the headers it adds.
struct ClientAddressMiddleware: RouterMiddleware {
    let trusted: TrustedProxies

    func handle(_ request: Request, context: GatewayRequestContext, next: (Request, GatewayRequestContext) async throws -> Response) async throws -> Response {
        var context = context
        context.client = ClientAddress.key(peer: context.peerAddress, headers: request.headers, trusted: trusted)
        return try await next(request, context)
    }
}

/// A TLS file that holds nothing usable.
public struct GatewayTLSError: Error, CustomStringConvertible {
    public var reason: String
    public var description: String { reason }
}

/// Wrong secrets per client in a sliding window: enrollment codes, the dashboard's admin token
/// and the EHR's notify token share one bucket (a guess is a guess). An attempt is reserved
/// before its body is read and given back only when it succeeds, so guesses sent at once are
/// held to the limit as guesses sent one after another. The count is the store's
/// (`AccessLedger`): every gateway over one store shares it.
struct AttemptThrottle: Sendable {
    let ledger: any AccessLedger
    let limit: Int
    let window: TimeInterval

    /// Takes an attempt for the client: nil when it may try (the attempt counts until
    /// `succeeded` gives it back), else the seconds until it may.
    func reserve(_ client: String, now: Date = Date()) async throws -> Int? {
        let (ledger, limit, window) = (ledger, limit, window)
        return try await Blocking.run { try ledger.reserveAttempt(client: client, limit: limit, window: window, now: now) }
    }

    /// Gives back an attempt that turned out right.
    func succeeded(_ client: String) async throws {
        let ledger = ledger
        try await Blocking.run { try ledger.releaseAttempt(client: client) }
    }
}

/// A device's sync calls in flight across every gateway over the store: each call that reads a
/// body or works out a pull holds one of the device's `limit` slots in the store
/// (`AccessLedger.enterCall`) for at most `lease` (a request's body deadline and a minute), so N
/// instances do not give one device N times the calls. An up-to-date pull, answered by the
/// token's own read, holds none.
struct DeviceCallSlots: Sendable {
    let ledger: any AccessLedger
    let limit: Int
    let lease: TimeInterval

    /// A slot for the device's call, or nil when it has `limit` in flight (blocks: the store).
    func enter(_ device: Device) throws(StoreError) -> CallSlot? {
        try ledger.enterCall(key: "device:\(device.id)", limit: limit, lease: lease, now: Date())
    }

    /// Frees the slot; a store that fails here lets the lease free it.
    func leave(_ slot: CallSlot) {
        try? ledger.leaveCall(slot)
    }

    var busy: Response {
        JSONBody.error(.tooManyRequests, "too many sync calls in flight from this device (at most \(limit) at once, on every gateway); try again shortly",
                       headers: [.retryAfter: "1"])
    }
}

/// JSON responses, errors included: `{"error": {"status": 400, "message": "…"}}`.
enum JSONBody {
    static func response(_ status: HTTPResponse.Status, _ json: String, headers: HTTPFields = [:]) -> Response {
        response(status, Array(json.utf8), headers: headers)
    }

    static func response(_ status: HTTPResponse.Status, _ bytes: [UInt8], headers: HTTPFields = [:]) -> Response {
        var fields = headers
        fields[.contentType] = "application/json"
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static func error(_ status: HTTPResponse.Status, _ message: String, extra: [(String, String)] = [], headers: HTTPFields = [:]) -> Response {
        var members = "\"status\":\(status.code),\"message\":\(quoted(message))"
        for (key, rawJSON) in extra { members += ",\(quoted(key)):\(rawJSON)" }
        return response(status, "{\"error\":{\(members)}}", headers: headers)
    }

    static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        JSONEscaping.appendQuoted(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
