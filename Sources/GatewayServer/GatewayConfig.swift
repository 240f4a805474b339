import CareStore
import Diagnostics
import FHIRClient
import Foundation
import Gateway
import Mapping

/// `caregate serve`'s configuration: one YAML file, checked as mapping files are (every finding
/// with its file, line and column; unknown keys are errors).
///
/// ```yaml
/// listen:
///   host: 127.0.0.1
///   port: 8080
///   trusted-proxies: [10.0.0.5]   # whose X-Forwarded-For / Forwarded name the client
/// store: /var/lib/caregate/caregate.sqlite   # or postgres://caregate@db.internal:5432/care
/// store-password-file: secrets/db.password   # PostgreSQL only (else $CAREGATE_STORE_PASSWORD)
/// store-connections: 8                       # PostgreSQL connections this instance opens at most
/// limits:
///   sync-body: 8388608      # bytes
///   page-size: 1000         # versions per pull page
///   wrong-codes: 5          # wrong enrollment codes per address in 15 minutes
///   idle-seconds: 30        # a connection idle this long is closed
///   head-seconds: 10        # a request's headers must arrive within this (slow-loris clients)
///   body-seconds: 60        # and its body within this of its headers
///   max-connections: 4096   # open connections at most (default: the descriptor limit less 256)
///   connections-per-address: 128
///   concurrent-per-device: 2    # sync calls in flight per device token
///   concurrent-per-address: 64  # requests in flight per client address
/// ```
/// With a `dashboard:` section (`admin-token-file: secrets/admin.token` or `admin-token-env:
/// NAME`), operators sign in at `/ui` with that token.
/// Plain HTTP is served on loopback only, unless `allow-plain-http: true` says the network in
/// front (a TLS-terminating proxy) is trusted. With an `ehr:` section the gateway also pushes
/// outcomes and refreshes enrolled patients on its own (see `EHR`).
public struct GatewayConfig: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var allowPlainHTTP = false
    /// The store: an SQLite file (relative to the configuration file's folder), or a
    /// `postgres://user@host:port/database` URL.
    public var store = "caregate.sqlite"
    /// For a PostgreSQL store: the owner-only file holding its password.
    public var storePasswordFile: String?
    /// For a PostgreSQL store: the connections this instance opens at most.
    public var storeConnections = 8
    public var syncBody = 8 << 20
    public var pageSize = 1_000
    public var wrongCodes = 5
    public var idleSeconds = 30
    public var headSeconds = 10
    public var concurrentPerDevice = 2
    public var concurrentPerAddress = 64
    public var bodySeconds = 60
    public var maxConnections = GatewayServer.Limits.connectionsWithinDescriptors()
    public var connectionsPerAddress = 128
    public var trustedProxies = TrustedProxies.none
    /// The EHR the workers push to and refresh from; nil serves devices only.
    public var ehr: EHR?
    /// TLS in the process: the PEM certificate chain and private key (`tls: {certificate, key}`).
    public var tls: (certificate: String, key: String)?
    /// Where the dashboard's admin token is kept; nil serves no dashboard.
    public var adminToken: SecretSource?
    /// How long the audit trail is kept, and where older entries are archived (`audit:`); nil keeps every entry.
    ///
    /// ```yaml
    /// audit:
    ///   keep-days: 400          # entries older than this leave the store, a prefix of the chain at a time
    ///   archive: audit-archive  # as FHIR AuditEvents (NDJSON), written before they are dropped
    /// ```
    public var auditRetention: (keepDays: Int, archive: String)?

    public init() {}

    /// The `ehr:` section. Paths are relative to the configuration file's folder; secrets come
    /// from files or environment variables, never the file itself.
    ///
    /// ```yaml
    /// ehr:
    ///   base: https://ehr.example.org/fhir
    ///   token-file: secrets/ehr.token        # or token-env: NAME, or smart: {client-id, key-file, key-id}
    ///   ca-bundle: /etc/caregate/ehr-ca.pem  # client-cert, client-key for mutual TLS
    ///   mappings: [site-mappings]            # over the built-in ones
    ///   questionnaires: [forms]              # survey forms, looked up before the EHR
    ///   time-zone: America/New_York
    ///   push-seconds: 60
    ///   push-lease-seconds: 600              # a dead instance's claimed outcomes go back to the queue after this
    ///   refresh-seconds: 900
    ///   refresh-lease-seconds: 600           # a dead instance's claimed patient is refreshed by another after this
    ///   audit: true                          # the audit trail's entries go to the EHR as AuditEvents, through the outbox
    ///   notify:
    ///     endpoint: https://gateway.example.org/fhir/notify   # as the EHR reaches it
    ///     token-file: secrets/notify.token
    /// ```
    public struct EHR: Sendable, Equatable {
        public var connection: FHIRServerConnection
        public var mappings: [String] = []
        /// Folders and files of Questionnaires the refresh finds survey activities' forms in
        /// before it asks the EHR (`import --questionnaires`), read once when serving starts.
        public var questionnaires: [String] = []
        public var timeZone = TimeZone.current
        public var pushSeconds = 60
        /// How long a push worker's claim holds (`OutcomePush.lease`): with several instances,
        /// how soon the outcomes a killed instance had claimed are sent by another.
        public var pushLeaseSeconds = Int(OutcomePush.defaultLease)
        public var refreshSeconds = 900
        /// How long a refresh worker's claim on a patient holds: with several instances, how
        /// soon a killed instance's patient is refreshed by another.
        public var refreshLeaseSeconds = 600
        public var batchSize = 50
        /// Where the EHR sends notifications, and where the token they carry is kept.
        public var notifyEndpoint: String?
        public var notifyToken: SecretSource?
        /// Plain HTTP to an EHR that is not on this machine (`allow-plain-http: true`): refused otherwise.
        public var allowPlainHTTP = false
        /// The audit trail's entries are pushed to the EHR as AuditEvents, exactly once, like outcomes (`audit: true`).
        public var audit = false
        /// The profiles what is pushed claims and meets (`profiles: us-core-6.1.0`); nil: R4 alone.
        public var profiles: String?
        /// FHIR packages (`.tgz`, folders, loose conformance files) the profiles come from.
        public var packages: [String] = []
        /// The Organization patients' devices act for in Provenances (`Organization/id`, or a name).
        public var organization: String?

        public init(base: String) {
            connection = FHIRServerConnection(base: base)
            connection.retry = RetryPolicy(maxAttempts: 3, maxTotal: 30)
        }
    }


    /// The server's limits from this configuration.
    public var limits: GatewayServer.Limits {
        var limits = GatewayServer.Limits()
        limits.syncBody = syncBody
        limits.pageSize = pageSize
        limits.wrongCodes = wrongCodes
        limits.idleSeconds = Int64(idleSeconds)
        limits.requestHeadSeconds = Int64(headSeconds)
        limits.concurrentPerDevice = concurrentPerDevice
        limits.concurrentPerAddress = concurrentPerAddress
        limits.requestBodySeconds = Int64(bodySeconds)
        limits.maxConnections = maxConnections
        limits.connectionsPerAddress = connectionsPerAddress
        limits.trustedProxies = trustedProxies
        return limits
    }

    /// Reads and checks a configuration file; every finding is reported, not only the first.
    /// `environment` is where `token-env` and `notify.token-env` are looked up.
    public static func load(path: String, environment: [String: String] = [:]) throws(MappingError) -> GatewayConfig {
        var reader = ConfigReader()
        var config = GatewayConfig()
        if let tree = try YAMLTree.load(path: path) { reader.read(tree, into: &config) }
        if !isLoopback(config.host) && !config.allowPlainHTTP && config.tls == nil {
            reader.error(reader.hostLocation ?? SourceLocation(file: path, line: 1, column: 1),
                         "listen.host \(config.host) is not loopback: serve it with tls (certificate and key), or plain HTTP with allow-plain-http: true (behind a TLS proxy)")
        }
        if config.storePasswordFile != nil && !namesPostgres(config.store) {
            reader.error(reader.passwordFileLocation ?? SourceLocation(file: path, line: 1, column: 1),
                         "store-password-file is for a postgres:// store; the store \(config.store) is an SQLite file, which has no password")
        }
        if namesPostgres(config.store), let at = reader.storeLocation, URLComponents(string: config.store)?.password != nil {
            reader.error(at, "store: the URL holds a password; put it in store-password-file (owner-only), or in $CAREGATE_STORE_PASSWORD")
        }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent()
        config.resolvePaths(against: folder)
        reader.checkSecrets(config.ehr, environment: environment)
        for folder in config.ehr?.questionnaires ?? [] where !FileManager.default.fileExists(atPath: folder) {
            reader.error(reader.ehrLocations["questionnaires"] ?? SourceLocation(file: path, line: 1, column: 1),
                         "ehr.questionnaires: \(folder) does not exist (a folder or file of Questionnaires)")
        }
        for package in config.ehr?.packages ?? [] where !FileManager.default.fileExists(atPath: package) {
            reader.error(reader.ehrLocations["packages"] ?? SourceLocation(file: path, line: 1, column: 1),
                         "ehr.packages: \(package) does not exist (a FHIR package .tgz or folder, or a folder or file of conformance resources)")
        }
        if let ehr = config.ehr, let target = ehr.profiles, target != "base", ehr.packages.isEmpty {
            reader.error(reader.ehrLocations["profiles"] ?? SourceLocation(file: path, line: 1, column: 1),
                         "ehr.profiles: \(target) needs its package: name it in ehr.packages")
        }
        if let admin = config.adminToken {
            reader.checkGuard(admin, "dashboard: admin token", at: reader.dashboardLocation ?? SourceLocation(file: path, line: 1, column: 1),
                              environment: environment)
        }
        if let ehr = config.ehr, ehr.connection.base.hasPrefix("http://"), !ehr.allowPlainHTTP,
           !isLoopback(URL(string: ehr.connection.base)?.host ?? "") {
            reader.error(reader.ehrLocations["base"] ?? SourceLocation(file: path, line: 1, column: 1),
                         "ehr.base \(ehr.connection.base) is plain HTTP to another machine: use https, or allow-plain-http: true in ehr: (a network you trust)")
        }
        if let tls = config.tls {
            do { _ = try GatewayServer.tlsConfiguration(certificate: tls.certificate, key: tls.key) } catch {
                reader.error(reader.tlsLocation ?? SourceLocation(file: path, line: 1, column: 1), "tls: \(error)")
            }
        }
        guard reader.diagnostics.isEmpty else { throw MappingError(reader.diagnostics.sorted { $0.location < $1.location }) }
        return config
    }

    /// Relative paths made absolute against the configuration file's folder.
    mutating func resolvePaths(against folder: URL) {
        func absolute(_ path: String) -> String { path.hasPrefix("/") ? path : folder.appendingPathComponent(path).path }
        if !Self.namesPostgres(store) { store = absolute(store) }
        storePasswordFile = storePasswordFile.map(absolute)
        tls = tls.map { (absolute($0.certificate), absolute($0.key)) }
        if case .file(let file) = adminToken { adminToken = .file(absolute(file)) }
        auditRetention = auditRetention.map { ($0.keepDays, absolute($0.archive)) }
        guard var ehr else { return }
        ehr.mappings = ehr.mappings.map(absolute)
        ehr.questionnaires = ehr.questionnaires.map(absolute)
        ehr.packages = ehr.packages.map(absolute)
        ehr.connection.tls.caBundle = ehr.connection.tls.caBundle.map(absolute)
        ehr.connection.tls.clientCertificate = ehr.connection.tls.clientCertificate.map(absolute)
        ehr.connection.tls.clientKey = ehr.connection.tls.clientKey.map(absolute)
        switch ehr.connection.credentials {
        case .tokenFile(let file): ehr.connection.credentials = .tokenFile(absolute(file))
        case .smart(var smart): smart.keyFile = smart.keyFile.map(absolute); ehr.connection.credentials = .smart(smart)
        default: break
        }
        if case .file(let file) = ehr.notifyToken { ehr.notifyToken = .file(absolute(file)) }
        self.ehr = ehr
    }

    /// Whether a store names a PostgreSQL database (a `postgres://` or `postgresql://` URL).
    public static func namesPostgres(_ store: String) -> Bool { store.hasPrefix("postgres://") || store.hasPrefix("postgresql://") }

    /// Whether a host is this machine: `localhost`, or an address in 127.0.0.0/8 or ::1 (decided
    /// from the address: `127.evil.example` is a name, and no loopback).
    static func isLoopback(_ host: String) -> Bool {
        let host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if host == "localhost" { return true }
        guard let bytes = ClientAddress.bytes(host) else { return false }
        return bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }
}

/// Walks the YAML tree, filling a configuration and collecting findings.
struct ConfigReader {
    var diagnostics: [Diagnostic] = []
    var hostLocation: SourceLocation?

    mutating func error(_ at: SourceLocation, _ message: String) {
        diagnostics.append(Diagnostic(.error, at, message))
    }

    var ehrLocations: [String: SourceLocation] = [:]
    var storeLocation: SourceLocation?
    var passwordFileLocation: SourceLocation?
    var tlsLocation: SourceLocation?
    var dashboardLocation: SourceLocation?

    mutating func read(_ tree: YAMLTree, into config: inout GatewayConfig) {
        for (key, keyAt, value) in members(tree, expected: ["listen", "allow-plain-http", "store", "store-password-file", "store-connections",
                                                               "limits", "ehr", "tls", "dashboard", "audit"]) {
            switch key {
            case "listen":
                for (key, _, value) in members(value, expected: ["host", "port", "trusted-proxies"]) {
                    if key == "host", let host = text(value) { config.host = host; hostLocation = value.location }
                    if key == "port", let port = number(value, in: 0...65_535) { config.port = port }
                    if key == "trusted-proxies" {
                        do { config.trustedProxies = try TrustedProxies(list(value)) } catch { self.error(value.location, "listen.\(error)") }
                    }
                }
            case "allow-plain-http": if let flag = boolean(value) { config.allowPlainHTTP = flag }
            case "store": if let store = text(value) { config.store = store; storeLocation = value.location }
            case "store-password-file": if let file = text(value) { config.storePasswordFile = file; passwordFileLocation = value.location }
            case "store-connections": if let n = number(value, in: 1...1_000) { config.storeConnections = n }
            case "limits":
                for (key, _, value) in members(value, expected: ["sync-body", "page-size", "wrong-codes", "idle-seconds", "head-seconds",
                                                                  "body-seconds", "max-connections", "connections-per-address",
                                                                  "concurrent-per-device", "concurrent-per-address"]) {
                    switch key {
                    case "body-seconds": if let n = number(value, in: 1...3_600) { config.bodySeconds = n }
                    case "max-connections": if let n = number(value, in: 16...1_000_000) { config.maxConnections = n }
                    case "connections-per-address": if let n = number(value, in: 1...100_000) { config.connectionsPerAddress = n }
                    case "concurrent-per-device": if let n = number(value, in: 1...64) { config.concurrentPerDevice = n }
                    case "concurrent-per-address": if let n = number(value, in: 1...10_000) { config.concurrentPerAddress = n }
                    case "sync-body": if let n = number(value, in: 1_024...(1 << 30)) { config.syncBody = n }
                    case "page-size": if let n = number(value, in: 1...100_000) { config.pageSize = n }
                    case "idle-seconds": if let n = number(value, in: 1...3_600) { config.idleSeconds = n }
                    case "head-seconds": if let n = number(value, in: 1...600) { config.headSeconds = n }
                    default: if let n = number(value, in: 1...1_000) { config.wrongCodes = n }
                    }
                }
            case "ehr":
                config.ehr = readEHR(value, at: keyAt)
            case "audit":
                var days: Int?, archive: String?
                for (key, _, value) in members(value, expected: ["keep-days", "archive"]) {
                    if key == "keep-days" { days = number(value, in: 1...36_500) } else { archive = text(value) }
                }
                if let days, let archive { config.auditRetention = (days, archive) } else {
                    error(keyAt, "audit: needs keep-days and archive (the folder older entries are written to before they leave the store)")
                }
            case "dashboard":
                dashboardLocation = keyAt
                let ways = members(value, expected: ["admin-token-file", "admin-token-env"])
                for (key, _, value) in ways {
                    config.adminToken = text(value).map { key == "admin-token-file" ? .file($0) : .environment($0) }
                }
                if ways.count != 1 { error(keyAt, "dashboard: needs one of admin-token-file or admin-token-env (the token operators sign in with)") }
            default:
                tlsLocation = keyAt
                var certificate: String?, key: String?
                for (name, _, value) in members(value, expected: ["certificate", "key"]) {
                    if name == "certificate" { certificate = text(value) } else { key = text(value) }
                }
                if let certificate, let key { config.tls = (certificate, key) } else { error(keyAt, "tls: needs certificate and key (PEM files)") }
            }
        }
    }

    static let ehrKeys = ["base", "token-file", "token-env", "smart", "ca-bundle", "client-cert", "client-key", "insecure",
                          "mappings", "questionnaires", "time-zone", "push-seconds", "push-lease-seconds", "refresh-seconds", "refresh-lease-seconds", "batch-size", "max-response-size", "notify",
                          "allow-plain-http", "audit", "profiles", "packages", "organization"]

    /// The `ehr:` section; nil (with findings) when it lacks a base or authenticates twice.
    mutating func readEHR(_ tree: YAMLTree, at: SourceLocation) -> GatewayConfig.EHR? {
        var ehr = GatewayConfig.EHR(base: "")
        var ways: [String] = []
        for (key, _, value) in members(tree, expected: Self.ehrKeys) {
            ehrLocations[key] = value.location
            switch key {
            case "base":
                if let base = text(value) {
                    if !(base.hasPrefix("https://") || base.hasPrefix("http://")) || URL(string: base)?.host == nil {
                        error(value.location, "ehr.base: expected an http(s) URL, found '\(base)'")
                    }
                    ehr.connection.base = base.hasSuffix("/") ? String(base.dropLast()) : base
                }
            case "token-file": if let file = text(value) { ehr.connection.credentials = .tokenFile(file); ways.append(key) }
            case "token-env": if let name = text(value) { ehr.connection.credentials = .tokenEnvironment(name); ways.append(key) }
            case "smart": if let smart = readSMART(value) { ehr.connection.credentials = .smart(smart); ways.append(key) }
            case "ca-bundle": ehr.connection.tls.caBundle = text(value)
            case "client-cert": ehr.connection.tls.clientCertificate = text(value)
            case "client-key": ehr.connection.tls.clientKey = text(value)
            case "insecure": if let flag = boolean(value) { ehr.connection.tls.verify = !flag }
            case "mappings": ehr.mappings = list(value)
            case "questionnaires": ehr.questionnaires = list(value)
            case "profiles": ehr.profiles = text(value)
            case "packages": ehr.packages = list(value)
            case "organization":
                if let organization = text(value) {
                    if let problem = PatientSuppliedProvenance.problem(withOrganization: organization) {
                        error(value.location, "ehr.organization: \(problem)")
                    } else {
                        ehr.organization = organization
                    }
                }
            case "time-zone":
                if let name = text(value) {
                    if let zone = TimeZone(identifier: name) { ehr.timeZone = zone } else {
                        error(value.location, "ehr.time-zone: unknown time zone '\(name)' (use an IANA name such as America/New_York)")
                    }
                }
            case "push-seconds": if let n = number(value, in: 1...86_400) { ehr.pushSeconds = n }
            case "push-lease-seconds": if let n = number(value, in: 5...86_400) { ehr.pushLeaseSeconds = n }
            case "refresh-lease-seconds": if let n = number(value, in: 5...86_400) { ehr.refreshLeaseSeconds = n }
            case "refresh-seconds": if let n = number(value, in: 1...604_800) { ehr.refreshSeconds = n }
            case "batch-size": if let n = number(value, in: 1...1_000) { ehr.batchSize = n }
            case "max-response-size": if let n = number(value, in: 1_024...(1 << 31)) { ehr.connection.maximumResponseSize = n }
            case "allow-plain-http": if let flag = boolean(value) { ehr.allowPlainHTTP = flag }
            case "audit": if let flag = boolean(value) { ehr.audit = flag }
            default:
                for (key, _, value) in members(value, expected: ["endpoint", "token-file", "token-env"]) {
                    ehrLocations["notify." + key] = value.location
                    switch key {
                    case "endpoint": ehr.notifyEndpoint = text(value)
                    case "token-file": ehr.notifyToken = text(value).map { .file($0) }
                    default: ehr.notifyToken = text(value).map { .environment($0) }
                    }
                }
                if ehr.notifyToken == nil { error(value.location, "ehr.notify: needs token-file or token-env (the token the EHR sends with each notification)") }
            }
        }
        if ehr.connection.base.isEmpty { error(at, "ehr: needs base (the EHR's FHIR base URL)") }
        if ways.count > 1 { error(at, "ehr: choose one way to authenticate (\(ways.joined(separator: ", ")))") }
        return ehr
    }

    mutating func readSMART(_ tree: YAMLTree) -> FHIRServerConnection.SMART? {
        var smart = FHIRServerConnection.SMART(clientID: "")
        for (key, _, value) in members(tree, expected: ["client-id", "key-file", "key-env", "key-id", "scope", "token-endpoint"]) {
            switch key {
            case "client-id": smart.clientID = text(value) ?? ""
            case "key-file": smart.keyFile = text(value)
            case "key-env": smart.keyEnvironment = text(value)
            case "key-id": smart.keyID = text(value)
            case "scope": smart.scope = text(value)
            default: smart.tokenEndpoint = text(value)
            }
        }
        guard !smart.clientID.isEmpty, (smart.keyFile == nil) != (smart.keyEnvironment == nil) else {
            error(tree.location, "ehr.smart: needs client-id and one of key-file or key-env")
            return nil
        }
        return smart
    }

    /// Secret files that cannot be read, and variables that are not set, as findings at their keys.
    mutating func checkSecrets(_ ehr: GatewayConfig.EHR?, environment: [String: String]) {
        guard let ehr else { return }
        var secrets: [(String, SecretSource)] = []
        switch ehr.connection.credentials {
        case .tokenFile(let file): secrets.append(("token-file", .file(file)))
        case .tokenEnvironment(let name): secrets.append(("token-env", .environment(name)))
        default: break
        }
        if let notify = ehr.notifyToken {
            if case .file = notify { secrets.append(("notify.token-file", notify)) } else { secrets.append(("notify.token-env", notify)) }
        }
        for (key, secret) in secrets {
            let at = ehrLocations[key] ?? SourceLocation(file: "", line: 1, column: 1)
            if key.hasPrefix("notify.") {
                checkGuard(secret, "ehr.\(key): notification token", at: at, environment: environment)
            } else if secret.read(environment: environment) == nil {
                error(at, "ehr.\(key): no token in \(secret.name) (missing, unreadable, empty, or not one word)")
            }
        }
    }

    /// Tokens that guard the gateway (the admin token, the EHR's notify token): there, one word,
    /// 16 characters at least, and in a file only its owner can read.
    mutating func checkGuard(_ secret: SecretSource, _ what: String, at: SourceLocation, environment: [String: String]) {
        guard let token = secret.read(environment: environment) else {
            return error(at, "\(what): none in \(secret.name) (missing, unreadable, empty, or not one word)")
        }
        if token.count < Self.guardLength {
            error(at, "\(what) in \(secret.name) is \(token.count) characters; one that guards the gateway has at least \(Self.guardLength) (openssl rand -hex 32)")
        }
        if case .file(let path) = secret, let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
            error(at, "\(what) in \(path) can be read by other users (mode \(String(mode, radix: 8))): chmod 600 it")
        }
    }

    static let guardLength = 16

    /// A list of texts, or one text as a list of one.
    mutating func list(_ tree: YAMLTree) -> [String] {
        if case .sequence(let items, _) = tree { return items.compactMap { text($0) } }
        return text(tree).map { [$0] } ?? []
    }

    /// A mapping's members whose keys are expected; the others are errors with a suggestion.
    mutating func members(_ tree: YAMLTree, expected: [String]) -> [(String, SourceLocation, YAMLTree)] {
        guard case .mapping(let pairs, _) = tree else {
            error(tree.location, "expected a mapping of keys (\(expected.joined(separator: ", "))), found \(tree.kindName)")
            return []
        }
        var known: [(String, SourceLocation, YAMLTree)] = []
        for pair in pairs {
            if expected.contains(pair.key) {
                known.append((pair.key, pair.keyAt, pair.value))
            } else {
                let hint = Suggestion.closest(to: pair.key, among: expected).map { "; did you mean '\($0)'?" } ?? " (expected: \(expected.joined(separator: ", ")))"
                error(pair.keyAt, "unknown key '\(pair.key)'\(hint)")
            }
        }
        return known
    }

    mutating func text(_ tree: YAMLTree) -> String? {
        guard let value = tree.scalar, !value.isEmpty else { error(tree.location, "expected text, found \(tree.kindName)"); return nil }
        return value
    }

    mutating func number(_ tree: YAMLTree, in range: ClosedRange<Int>) -> Int? {
        guard let value = tree.scalar.flatMap({ Int($0) }), range.contains(value) else {
            error(tree.location, "expected a whole number from \(range.lowerBound) to \(range.upperBound), found \(tree.scalar.map { "'\($0)'" } ?? tree.kindName)")
            return nil
        }
        return value
    }

    mutating func boolean(_ tree: YAMLTree) -> Bool? {
        switch tree.scalar {
        case "true": return true
        case "false": return false
        default: error(tree.location, "expected true or false, found \(tree.scalar.map { "'\($0)'" } ?? tree.kindName)"); return nil
        }
    }
}

extension GatewayConfig.EHR {
    /// The workers' link to this EHR over `store`: the mappings loaded (`root`: where they may
    /// read), the client made, the notification token read. Throws the mapping files' findings
    /// or the client's error.
    public func link(store: any CarePlanStore & DeviceRegistry & Outbox & ImportLog & RefreshSchedule, root: String, environment: [String: String] = [:],
                     warn: (String) -> Void = { _ in }) throws -> EHRLink {
        let mappings = try MappingSet.load(site: self.mappings, root: root)
        let client = try connection.client(defaultScope: SMARTScopes.serve, environment: environment, warn: warn)
        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: mappings, timeZone: timeZone))
        export.profiles = try profileTarget()
        export.organization = organization
        var push = OutcomePush(outbox: store, export: export, client: client)
        push.batchSize = batchSize
        push.lease = TimeInterval(pushLeaseSeconds)
        var importer = FHIRImporter(mappings: mappings, store: store, timeZone: timeZone)
        let forms = importer.files.questionnaires(questionnaires)
        if let unreadable = forms.problems.first(where: { $0.kind == .error }) { throw EHRSettingError.questionnaires(unreadable.description) }
        for problem in forms.problems { warn(problem.description) }
        importer.questionnaires = forms.catalog
        var refresh = PatientRefresh(client: client, importer: importer, devices: store)
        refresh.log = store
        return EHRLink(push: push, refresh: refresh, schedule: store, pushInterval: TimeInterval(pushSeconds),
                       refreshInterval: TimeInterval(refreshSeconds), refreshLease: TimeInterval(refreshLeaseSeconds),
                       notifyToken: notifyToken?.read(environment: environment))
    }
}

extension GatewayConfig.EHR {
    /// The profiles pushes claim and meet, over the packages named; nil for R4 alone.
    func profileTarget() throws(EHRSettingError) -> ProfileTarget? {
        do { return try ProfileTarget.named(profiles, packages: packages) } catch {
            switch error {
            case .packages(let why): throw .packages(why)
            case .profiles(let why): throw .profiles(why)
            }
        }
    }
}

/// A setting of the `ehr:` section that cannot be used when serving starts.
public enum EHRSettingError: Error, Sendable, CustomStringConvertible {
    /// A `questionnaires:` folder or file that cannot be read: what and why.
    case questionnaires(String)
    /// A package of `packages:` that cannot be read.
    case packages(String)
    /// The `profiles:` target cannot be made from the packages.
    case profiles(String)

    public var description: String {
        switch self {
        case .questionnaires(let problem): "ehr.questionnaires: \(problem)"
        case .packages(let problem): "ehr.packages: \(problem)"
        case .profiles(let problem): "ehr.profiles: \(problem)"
        }
    }
}
