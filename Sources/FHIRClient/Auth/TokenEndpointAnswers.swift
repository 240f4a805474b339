import Foundation
import JSON

/// A FHIR server's `.well-known/smart-configuration`, as far as Backend Services needs it, read
/// without trusting it: the signed assertion goes to the token endpoint it names, so that
/// endpoint is checked before it is used.
public struct SMARTConfiguration: Sendable, Equatable {
    /// `token_endpoint`: where assertions are exchanged for access tokens (checked before use).
    public var tokenEndpoint: String
    /// `token_endpoint_auth_methods_supported`, when the document says.
    public var authMethods: [String]?
    /// `token_endpoint_auth_signing_alg_values_supported`, when the document says.
    public var signingAlgorithms: [String]?

    /// Reads the document fetched from `url`; an answer that is not a JSON object naming a
    /// token endpoint is an error naming `url`.
    public init(status: Int, document: [UInt8], url: String) throws(FHIRClientError) {
        guard status == 200, let object = try? JSONValue.parse(document), case .object = object else {
            throw .authorization("\(url): HTTP \(status), no SMART configuration; give the token endpoint explicitly")
        }
        guard let endpoint = object["token_endpoint"]?.stringValue, !endpoint.isEmpty else {
            throw .authorization("\(url) names no token_endpoint")
        }
        tokenEndpoint = endpoint
        authMethods = object["token_endpoint_auth_methods_supported"]?.arrayValue?.compactMap(\.stringValue)
        signingAlgorithms = object["token_endpoint_auth_signing_alg_values_supported"]?.arrayValue?.compactMap(\.stringValue)
    }

    /// Checks that the token endpoint is on the FHIR server's own origin (scheme, host and port,
    /// so never plain http from an https server) and accepts `private_key_jwt` with `algorithm`.
    /// A token endpoint elsewhere (a separate authorization server) is taken only when the
    /// operator names it (`Configuration.tokenEndpoint`): a discovery document alone cannot send
    /// the client's signed assertion to another host.
    public func check(fhirBase: String, algorithm: String) throws(FHIRClientError) {
        guard let endpoint = URL(string: tokenEndpoint), let base = URL(string: fhirBase) else {
            throw .authorization("the token endpoint \(tokenEndpoint) is not a URL; refused")
        }
        let scheme = endpoint.scheme?.lowercased()
        guard scheme == "https" || (scheme == "http" && base.scheme?.lowercased() == "http") else {
            throw .authorization("discovery names the token endpoint \(tokenEndpoint), which is not https; refused")
        }
        guard FHIRRESTClient.isUnder(endpoint, Self.origin(of: base)) else {
            throw .authorization("discovery names the token endpoint \(tokenEndpoint), which is not on the FHIR server's origin (\(Self.origin(of: base))); "
                + "refused: give it explicitly (--token-endpoint) to trust it")
        }
        if let methods = authMethods, !methods.contains("private_key_jwt") {
            throw .authorization("\(tokenEndpoint) does not accept private_key_jwt (it offers \(methods.joined(separator: ", ")))")
        }
        if let algorithms = signingAlgorithms, !algorithms.contains(algorithm) {
            throw .authorization("\(tokenEndpoint) does not accept \(algorithm) assertions (it accepts \(algorithms.joined(separator: ", ")))")
        }
    }

    /// `scheme://host[:port]` of a URL.
    static func origin(of url: URL) -> String {
        let port = url.port.map { ":\($0)" } ?? ""
        return "\(url.scheme ?? "")://\(url.host ?? "")\(port)"
    }
}

/// A token endpoint's answer (OAuth 2.0, RFC 6749 §5.1 and §5.2), read without trusting it.
/// The token goes into a request header, so it must be a bearer token's one word (RFC 6750's
/// `b64token`): a CR or LF in it would add headers. Neither the token nor the request is ever
/// in an error.
public struct TokenResponse: Sendable, Equatable {
    /// The access token.
    public var accessToken: String
    /// Seconds the token may be used: `expires_in`, or 300 when absent; kept within 0 to a day,
    /// so that a server's mistake neither pins a token for ever nor goes negative.
    public var lifetime: TimeInterval
    /// The scopes granted, which may differ from those asked for.
    public var scope: String?

    /// The longest a token is kept, whatever the server says.
    public static let longestLifetime: TimeInterval = 86_400

    /// Reads the answer of `endpoint` to `clientID`'s token request.
    public init(status: Int, body: [UInt8], endpoint: String, clientID: String) throws(FHIRClientError) {
        let object = try? JSONValue.parse(body)
        guard status == 200 else {
            let reason = [object?["error"]?.stringValue, object?["error_description"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
            throw .authorization("\(endpoint) refused the client \(clientID): HTTP \(status)\(reason.isEmpty ? "" : ", \(Self.printable(reason))")")
        }
        guard let token = object?["access_token"]?.stringValue, !token.isEmpty else {
            throw .authorization("\(endpoint) answered without an access_token")
        }
        guard token.utf8.allSatisfy(Self.isBearerTokenByte) else {
            throw .authorization("\(endpoint) issued an access_token with characters a bearer token cannot have; refused")
        }
        if let type = object?["token_type"]?.stringValue, type.lowercased() != "bearer" {
            throw .authorization("\(endpoint) issued a \(Self.printable(type)) token; only bearer tokens are supported")
        }
        accessToken = token
        let expiresIn = object?["expires_in"]?.numberValue ?? 300
        lifetime = min(max(0, expiresIn), Self.longestLifetime)
        scope = object?["scope"]?.stringValue
    }

    /// RFC 6750's `b64token` characters: letters, digits and `-._~+/=`.
    static func isBearerTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="): true
        default: false
        }
    }

    /// A server's words for an error message: at most 200 characters, control characters dropped.
    static func printable(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(200)))
    }
}
