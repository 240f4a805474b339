import Foundation

/// Bytes written as text for tokens, hashes and query parameters: lowercase hexadecimal and
/// base64url (RFC 4648 §5). One implementation for the device tokens, the log ids, the sync
/// API's vectors and FHIRPath's `encode()`/`decode()`.
public enum TextEncoding {
    /// Lowercase hexadecimal, two digits a byte.
    public static func hexadecimal(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(JSONEscaping.hex(byte >> 4))
            out.append(JSONEscaping.hex(byte & 0xF))
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Base64url: `-` and `_` for `+` and `/`; without `=` padding unless `padded`.
    public static func base64URL(_ bytes: some Sequence<UInt8>, padded: Bool = false) -> String {
        let base64 = Data(bytes).base64EncodedData()
        var out: [UInt8] = []
        out.reserveCapacity(base64.count)
        for byte in base64 {
            switch byte {
            case UInt8(ascii: "+"): out.append(UInt8(ascii: "-"))
            case UInt8(ascii: "/"): out.append(UInt8(ascii: "_"))
            case UInt8(ascii: "=") where !padded: continue
            default: out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base64url text, padded or not (plain base64 is read too); nil when it is
    /// neither.
    public static func bytes(base64URL text: String) -> [UInt8]? {
        var base64: [UInt8] = []
        base64.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            default: base64.append(byte)
            }
        }
        while base64.count % 4 != 0 { base64.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(base64)).map { Array($0) }
    }
}
