import Crypto

/// Secrets that clients present (the admin token, CSRF tokens, the notification token) are
/// compared by their SHA-256 digests, so the time a comparison takes says nothing of how much of
/// the secret matched.
enum SecretDigest {
    static func of(_ secret: String) -> [UInt8] { Array(SHA256.hash(data: Array(secret.utf8))) }

    /// Whether `given` is the secret whose digest is `digest`.
    static func matches(_ given: String, _ digest: [UInt8]) -> Bool { of(given) == digest }

    /// Whether `given` is `secret`.
    static func matches(_ given: String, secret: String) -> Bool { matches(given, of(secret)) }
}
