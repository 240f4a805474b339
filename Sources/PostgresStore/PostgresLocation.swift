import CareStore
import Foundation

/// Where a store on PostgreSQL lives, read from a `postgres://user@host:port/database` URL
/// (what `store:` and `--store` accept beside a SQLite path). The password never comes from the
/// URL: it is read from a file only its owner can read, or from `CAREGATE_STORE_PASSWORD`, so
/// that it stays out of configuration files, shell histories and process lists.
///
/// TLS: `?sslmode=verify-full` (the default for any host but loopback) checks the server's
/// certificate and name against the system's CAs or `sslrootcert=<CA bundle>`;
/// `?sslmode=disable` sends in the clear and must be asked for by name off loopback.
///
/// ```swift
/// let location = try PostgresLocation(url: "postgres://caregate@db.internal:5432/care?sslrootcert=/etc/caregate/db-ca.pem")
/// ```
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    public enum TLSMode: String, Sendable, Hashable {
        /// No TLS: loopback, or a private network the operator names this for.
        case disable
        /// TLS, the certificate checked against the CAs and the host name against it.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var user: String
    public var database: String
    public var tls: TLSMode
    /// A PEM file of the CAs to trust for the server's certificate (`sslrootcert`); nil: the system's.
    public var caBundle: String?

    /// Whether a `store:` value names PostgreSQL rather than a SQLite file.
    public static func names(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    public init(host: String, port: Int = 5432, user: String, database: String, tls: TLSMode? = nil, caBundle: String? = nil) {
        self.host = host
        self.port = port
        self.user = user
        self.database = database
        self.tls = tls ?? (PostgresLocation.isLoopback(host) ? .disable : .verifyFull)
        self.caBundle = caBundle
    }

    /// Reads a URL, refusing what it cannot honour: a password in it, a missing user or
    /// database, parameters it does not know, TLS modes that do not check the server.
    public init(url text: String) throws(StoreError) {
        func refuse(_ reason: String) -> StoreError { .database(path: PostgresLocation.redacted(text), message: reason) }
        guard PostgresLocation.names(text), let url = URLComponents(string: text), let host = url.host, !host.isEmpty else {
            throw refuse("not a postgres://user@host:port/database URL")
        }
        if url.password != nil {
            throw refuse("the URL holds a password; give it in `store-password-file` (or --store-password-file), or in $\(PostgresLocation.passwordVariable)")
        }
        guard let user = url.user, !user.isEmpty else { throw refuse("the URL names no user (postgres://USER@host/database)") }
        let database = String(url.path.drop { $0 == "/" })
        guard !database.isEmpty, !database.contains("/") else { throw refuse("the URL names no database (postgres://user@host/DATABASE)") }
        var tls: TLSMode?
        var caBundle: String?
        for item in url.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                guard let value = item.value, let mode = TLSMode(rawValue: value) else {
                    throw refuse("sslmode '\(item.value ?? "")' is not one CareGate takes: verify-full (the server's certificate and name checked) or disable")
                }
                tls = mode
            case "sslrootcert":
                guard let value = item.value, !value.isEmpty else { throw refuse("sslrootcert names no file") }
                caBundle = value
            default:
                throw refuse("unknown parameter '\(item.name)' (CareGate takes sslmode and sslrootcert)")
            }
        }
        if tls == .disable, caBundle != nil { throw refuse("sslrootcert is given but sslmode is disable") }
        self.init(host: host, port: url.port ?? 5432, user: user, database: database, tls: tls, caBundle: caBundle)
    }

    /// The URL as it may be shown and logged (it never holds a password).
    public var description: String {
        let host = self.host.contains(":") ? "[\(self.host)]" : self.host
        return "postgres://\(user)@\(host):\(port)/\(database)"
    }

    /// The environment variable a password may come from when no file is named.
    public static let passwordVariable = "CAREGATE_STORE_PASSWORD"

    /// The password: from `file` (owner-only, as the gateway's other secrets), else from
    /// `$CAREGATE_STORE_PASSWORD`, else none (trust or peer authentication).
    public func password(file: String?, environment: [String: String]) throws(StoreError) -> String? {
        guard let file else { return environment[PostgresLocation.passwordVariable].flatMap { $0.isEmpty ? nil : $0 } }
        func refuse(_ reason: String) -> StoreError { .database(path: description, message: "password file \(file): \(reason)") }
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: file),
              let data = FileManager.default.contents(atPath: file) else { throw refuse("cannot be read") }
        if let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 != 0 {
            throw refuse("is readable by others (mode \(String(mode & 0o777, radix: 8))); make it owner-only: chmod 600 \(file)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw refuse("is empty") }
        return text
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") && host.split(separator: ".").count == 4
            && host.split(separator: ".").allSatisfy { UInt8($0) != nil }
    }

    /// A URL as it may be shown: any password in it replaced.
    static func redacted(_ text: String) -> String {
        guard var url = URLComponents(string: text), url.password != nil else { return text }
        url.password = "***"
        return url.string ?? "postgres://…"
    }
}
