import Crypto
import CryptoExtras
import FHIR
import Foundation

/// The private key a backend client signs its assertions with: RSA (RS384) or P-384 (ES384),
/// the two algorithms SMART Backend Services requires clients to support.
public enum AssertionKey: Sendable {
    /// An RSA key, signing RS384 (at least 2048 bits).
    case rs384(_RSA.Signing.PrivateKey)
    /// A P-384 key, signing ES384.
    case es384(P384.Signing.PrivateKey)

    /// The JOSE `alg` name.
    public var algorithm: String {
        switch self {
        case .rs384: "RS384"
        case .es384: "ES384"
        }
    }

    /// Reads a PEM private key (PKCS#1, PKCS#8 or SEC 1). The algorithm follows from the key;
    /// errors name the file but never quote its contents.
    public init(pem: String, source: String) throws(FHIRClientError) {
        if let key = try? P384.Signing.PrivateKey(pemRepresentation: pem) {
            self = .es384(key)
        } else if let key = try? _RSA.Signing.PrivateKey(pemRepresentation: pem) {
            self = .rs384(key)
        } else if let key = try? _RSA.Signing.PrivateKey(unsafePEMRepresentation: pem) {
            // Readable only without swift-crypto's 2048-bit floor: refuse it, saying why.
            throw .authorization("\(source): an RSA key of \(key.keySizeInBits) bits is too short for RS384 (at least 2048)")
        } else if pem.contains("EC PRIVATE KEY") || (try? P256.Signing.PrivateKey(pemRepresentation: pem)) != nil
                    || (try? P521.Signing.PrivateKey(pemRepresentation: pem)) != nil {
            throw .authorization("\(source): an EC key on a curve other than P-384; ES384 needs P-384")
        } else {
            throw .authorization("\(source): not a PEM RSA or P-384 private key")
        }
    }

    /// Reads the key from a file.
    public init(file path: String) throws(FHIRClientError) {
        guard let bytes = try? FileBytes.read(path, limit: 1 << 20), let pem = String(validating: bytes, as: UTF8.self) else {
            throw .authorization("cannot read the private key file \(path)")
        }
        try self.init(pem: pem, source: path)
    }

    /// The JWS signature of `input` in the algorithm's JWT form (PKCS#1 v1.5 for RS384; the raw
    /// 96-byte r‖s for ES384, not DER).
    func sign(_ input: [UInt8]) throws(FHIRClientError) -> [UInt8] {
        do {
            switch self {
            case .rs384(let key):
                return Array(try key.signature(for: SHA384.hash(data: input), padding: .insecurePKCS1v1_5).rawRepresentation)
            case .es384(let key):
                return Array(try key.signature(for: input).rawRepresentation)
            }
        } catch {
            throw .authorization("signing the client assertion failed (\(algorithm))")
        }
    }
}

/// A signed JWT that authenticates a backend client at a token endpoint (`private_key_jwt`):
/// `iss` = `sub` = client id, `aud` = the token endpoint's URL exactly, a short `exp` and a
/// unique `jti`, so that a captured assertion cannot be replayed.
public struct ClientAssertion: Sendable {
    /// The client's id at the authorization server (`iss` and `sub`).
    public var clientID: String
    /// The token endpoint's URL, exactly (`aud`).
    public var tokenEndpoint: String
    /// The registered key's id (`kid`).
    public var keyID: String?
    /// The JWK Set URL, when the client registered one (sent as `jku`).
    public var jwksURL: String?
    /// Seconds from now to `exp`; SMART allows at most 300.
    public var lifetime: TimeInterval

    /// An assertion that lives `lifetime` seconds (at most 5 minutes, as SMART asks).
    public init(clientID: String, tokenEndpoint: String, keyID: String? = nil, jwksURL: String? = nil, lifetime: TimeInterval = 300) {
        self.clientID = clientID
        self.tokenEndpoint = tokenEndpoint
        self.keyID = keyID
        self.jwksURL = jwksURL
        self.lifetime = min(lifetime, 300)
    }

    /// The compact JWS: base64url(header).base64url(claims).base64url(signature).
    public func signed(with key: AssertionKey, now: Date = Date(), jti: String = UUID().uuidString) throws(FHIRClientError) -> String {
        var header: [(String, Any)] = [("alg", key.algorithm), ("typ", "JWT")]
        if let keyID { header.append(("kid", keyID)) }
        if let jwksURL { header.append(("jku", jwksURL)) }
        let claims: [(String, Any)] = [
            ("iss", clientID), ("sub", clientID), ("aud", tokenEndpoint),
            ("exp", Int(now.timeIntervalSince1970 + lifetime)), ("jti", jti),
        ]
        let input = Base64URL.encode(Self.json(header)) + "." + Base64URL.encode(Self.json(claims))
        return input + "." + Base64URL.encode(try key.sign(Array(input.utf8)))
    }

    /// A flat JSON object with keys in the given order (strings and integers only).
    static func json(_ members: [(String, Any)]) -> [UInt8] {
        var out = "{"
        for (index, (name, value)) in members.enumerated() {
            if index > 0 { out += "," }
            out += quoted(name) + ":"
            if let number = value as? Int { out += String(number) } else { out += quoted("\(value)") }
        }
        return Array((out + "}").utf8)
    }

    static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

/// Base64url without padding (RFC 7515 §2).
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ s: some StringProtocol) -> [UInt8]? {
        var text = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        return Data(base64Encoded: text).map(Array.init)
    }
}
