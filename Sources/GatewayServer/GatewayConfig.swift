import Diagnostics
import Foundation
import Mapping

/// `caregate serve`'s configuration: one YAML file, checked as mapping files are (every finding
/// with its file, line and column; unknown keys are errors).
///
/// ```yaml
/// listen:
///   host: 127.0.0.1
///   port: 8080
/// store: /var/lib/caregate/caregate.sqlite
/// limits:
///   sync-body: 8388608      # bytes
///   page-size: 1000         # versions per pull page
///   wrong-codes: 5          # wrong enrollment codes per address in 15 minutes
///   idle-seconds: 30        # a connection idle this long is closed
///   head-seconds: 10        # a request's headers must arrive within this (slow-loris clients)
/// ```
/// Plain HTTP is served on loopback only, unless `allow-plain-http: true` says the network in
/// front (a TLS-terminating proxy) is trusted.
public struct GatewayConfig: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var allowPlainHTTP = false
    /// The store's SQLite file, relative to the configuration file's folder.
    public var store = "caregate.sqlite"
    public var syncBody = 8 << 20
    public var pageSize = 1_000
    public var wrongCodes = 5
    public var idleSeconds = 30
    public var headSeconds = 10

    public init() {}

    /// The server's limits from this configuration.
    public var limits: GatewayServer.Limits {
        var limits = GatewayServer.Limits()
        limits.syncBody = syncBody
        limits.pageSize = pageSize
        limits.wrongCodes = wrongCodes
        limits.idleSeconds = Int64(idleSeconds)
        limits.requestHeadSeconds = Int64(headSeconds)
        return limits
    }

    /// Reads and checks a configuration file; every finding is reported, not only the first.
    public static func load(path: String) throws(MappingError) -> GatewayConfig {
        var reader = ConfigReader()
        var config = GatewayConfig()
        if let tree = try YAMLTree.load(path: path) { reader.read(tree, into: &config) }
        if !isLoopback(config.host) && !config.allowPlainHTTP {
            reader.error(reader.hostLocation ?? SourceLocation(file: path, line: 1, column: 1),
                         "listen.host \(config.host) is not loopback: plain HTTP is served beyond this machine only with allow-plain-http: true (behind a TLS proxy)")
        }
        guard reader.diagnostics.isEmpty else { throw MappingError(reader.diagnostics.sorted { $0.location < $1.location }) }
        if !config.store.hasPrefix("/") {
            config.store = URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(config.store).path
        }
        return config
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// Walks the YAML tree, filling a configuration and collecting findings.
struct ConfigReader {
    var diagnostics: [Diagnostic] = []
    var hostLocation: SourceLocation?

    mutating func error(_ at: SourceLocation, _ message: String) {
        diagnostics.append(Diagnostic(.error, at, message))
    }

    /// Sections the issue names that this version does not serve yet: an error, not a silent skip.
    static let notYet: [String: String] = [
        "tls": "TLS is not served by this version yet; run behind a TLS-terminating proxy with allow-plain-http: true",
        "ehr": "the EHR connection (refresh and push on their own) is not part of this version yet; use caregate import --from and caregate push",
    ]

    mutating func read(_ tree: YAMLTree, into config: inout GatewayConfig) {
        for (key, keyAt, value) in members(tree, expected: ["listen", "allow-plain-http", "store", "limits"] + Self.notYet.keys.sorted()) {
            switch key {
            case "listen":
                for (key, _, value) in members(value, expected: ["host", "port"]) {
                    if key == "host", let host = text(value) { config.host = host; hostLocation = value.location }
                    if key == "port", let port = number(value, in: 0...65_535) { config.port = port }
                }
            case "allow-plain-http": if let flag = boolean(value) { config.allowPlainHTTP = flag }
            case "store": if let store = text(value) { config.store = store }
            case "limits":
                for (key, _, value) in members(value, expected: ["sync-body", "page-size", "wrong-codes", "idle-seconds", "head-seconds"]) {
                    switch key {
                    case "sync-body": if let n = number(value, in: 1_024...(1 << 30)) { config.syncBody = n }
                    case "page-size": if let n = number(value, in: 1...100_000) { config.pageSize = n }
                    case "idle-seconds": if let n = number(value, in: 1...3_600) { config.idleSeconds = n }
                    case "head-seconds": if let n = number(value, in: 1...600) { config.headSeconds = n }
                    default: if let n = number(value, in: 1...1_000) { config.wrongCodes = n }
                    }
                }
            default:
                error(keyAt, "\(key): \(Self.notYet[key]!)")
            }
        }
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
