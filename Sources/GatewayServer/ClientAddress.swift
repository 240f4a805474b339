import CareStore
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The proxies whose `X-Forwarded-For` and `Forwarded` headers the gateway believes (the README's
/// TLS proxy): addresses or prefixes (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`). Behind a proxy every
/// client arrives from the proxy's address, so without this list all of them would share one
/// bucket of wrong-code attempts: five wrong codes would lock out every enrollment.
public struct TrustedProxies: Sendable, Hashable {
    struct Prefix: Sendable, Hashable {
        let bytes: [UInt8]
        let bits: Int
    }
    let prefixes: [Prefix]

    public static let none = TrustedProxies(prefixes: [])

    init(prefixes: [Prefix]) {
        self.prefixes = prefixes
    }

    /// Parses the list; throws the entry that is no address or prefix.
    public init(_ entries: [String]) throws(ClientAddressError) {
        prefixes = try entries.map { entry throws(ClientAddressError) in
            let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
            guard let bytes = ClientAddress.bytes(parts.first ?? "") else { throw .notAnAddress(entry) }
            let bits = parts.count == 2 ? Int(parts[1]) : bytes.count * 8
            guard let bits, (0...(bytes.count * 8)).contains(bits) else { throw .notAnAddress(entry) }
            return Prefix(bytes: bytes, bits: bits)
        }
    }

    /// Whether `address` is one of the proxies.
    public func contains(_ address: String) -> Bool {
        guard let bytes = ClientAddress.bytes(address) else { return false }
        return prefixes.contains { $0.bytes.count == bytes.count && ClientAddress.samePrefix($0.bytes, bytes, bits: $0.bits) }
    }
}

/// A trusted-proxy entry that is not an address.
public enum ClientAddressError: Error, Sendable, Equatable, CustomStringConvertible {
    case notAnAddress(String)

    public var description: String {
        switch self {
        case .notAnAddress(let entry): "trusted proxy \"\(entry)\" is not an IP address or prefix (10.0.0.5, 10.0.0.0/8, fd00::/8)"
        }
    }
}

/// Who a request comes from, as limits count it: the peer's address, or behind a trusted proxy
/// the client the proxy names; an IPv6 client by its /64 (one subscriber's network, which hands
/// out as many /128s as it likes).
public enum ClientAddress {
    /// The key a client's requests are counted under.
    public static func key(peer: String, headers: HTTPFields, trusted: TrustedProxies) -> String {
        bucket(client(peer: peer, headers: headers, trusted: trusted))
    }

    /// The client: the peer, unless it is a trusted proxy, then the nearest address the proxies
    /// name that is not itself a trusted proxy (headers a client sends itself come first, so they
    /// are read last).
    static func client(peer: String, headers: HTTPFields, trusted: TrustedProxies) -> String {
        guard trusted.contains(peer) else { return peer }
        let hops = forwarded(headers)
        return hops.last { !trusted.contains($0) } ?? hops.first ?? peer
    }

    /// The addresses of `Forwarded` (`for=`), else of `X-Forwarded-For`, nearest last.
    static func forwarded(_ headers: HTTPFields) -> [String] {
        let standard = headers[values: HTTPField.Name("Forwarded")!].flatMap { $0.split(separator: ",") }.compactMap { element in
            element.split(separator: ";").lazy.map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.lowercased().hasPrefix("for=") }.map { unquoted(String($0.dropFirst(4))) }
        }
        if !standard.isEmpty { return standard.filter { bytes($0) != nil } }
        return headers[values: HTTPField.Name("X-Forwarded-For")!].flatMap { $0.split(separator: ",") }
            .map { unquoted($0.trimmingCharacters(in: .whitespaces)) }.filter { bytes($0) != nil }
    }

    /// `"[2001:db8::1]:4711"` → `2001:db8::1`; `192.0.2.60:80` → `192.0.2.60`.
    static func unquoted(_ text: String) -> String {
        var value = text.trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        if value.hasPrefix("["), let close = value.firstIndex(of: "]") {
            value = String(value[value.index(after: value.startIndex)..<close])
        } else if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") {
            value = String(value[..<colon])
        }
        return value
    }

    /// An IPv4 address as itself; an IPv6 address by its /64 (an IPv4-mapped one as its IPv4).
    public static func bucket(_ address: String) -> String {
        guard let bytes = bytes(address) else { return address }
        if bytes.count == 4 { return bytes.map(String.init).joined(separator: ".") }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// The address's bytes (4 or 16), or nil when it is none.
    static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func samePrefix(_ a: [UInt8], _ b: [UInt8], bits: Int) -> Bool {
        for i in 0..<(bits / 8) where a[i] != b[i] { return false }
        let rest = bits % 8
        guard rest > 0 else { return true }
        let mask = UInt8(0xFF) << (8 - rest)
        return a[bits / 8] & mask == b[bits / 8] & mask
    }
}

/// Open connections per client address (by `ClientAddress.bucket`), with a ceiling: a connection
/// past it is closed as it opens, so one address cannot hold every descriptor the process has.
/// Trusted proxies are not counted (their clients are counted by request).
final class ConnectionsPerAddress: Sendable {
    let limit: Int
    let trusted: TrustedProxies
    private let open = Locked<[String: Int]>([:])

    init(limit: Int, trusted: TrustedProxies) {
        self.limit = limit
        self.trusted = trusted
    }

    /// Counts a connection in; false when its address has `limit` open already.
    func enter(_ address: String) -> Bool {
        guard !trusted.contains(address) else { return true }
        let key = ClientAddress.bucket(address)
        return open.withLock { open in
            guard open[key, default: 0] < limit else { return false }
            open[key, default: 0] += 1
            return true
        }
    }

    func leave(_ address: String) {
        guard !trusted.contains(address) else { return }
        let key = ClientAddress.bucket(address)
        open.withLock { open in
            let left = open[key, default: 1] - 1
            open[key] = left > 0 ? left : nil
        }
    }

    /// How many connections are counted in all.
    var count: Int { open.withLock { $0.values.reduce(0, +) } }

    /// The handler each connection gets.
    func handler() -> ConnectionCount { ConnectionCount(limit: self) }
}

/// One connection's place in `ConnectionsPerAddress`: taken when it is added, given back when it closes.
final class ConnectionCount: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    let limit: ConnectionsPerAddress
    private var address: String?

    init(limit: ConnectionsPerAddress) {
        self.limit = limit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let peer = context.channel.remoteAddress?.ipAddress ?? "unknown"
        if limit.enter(peer) {
            address = peer
        } else {
            context.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { release() }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    private func release() {
        if let address { limit.leave(address) }
        address = nil
    }
}
