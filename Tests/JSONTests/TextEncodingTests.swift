import Testing
import JSON

@Suite("Text encodings")
struct TextEncodingTests {
    @Test("hexadecimal: two lowercase digits a byte")
    func hexadecimal() {
        #expect(TextEncoding.hexadecimal([0x00, 0x0f, 0xa0, 0xff, 0x1a]) == "000fa0ff1a")
        #expect(TextEncoding.hexadecimal([]) == "")
    }

    @Test("base64url: RFC 4648's vectors, - and _ for + and /, padding only when asked, read back either way")
    func base64URL() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (text, encoded) in vectors {
            #expect(TextEncoding.base64URL(Array(text.utf8)) == encoded)
            #expect(TextEncoding.bytes(base64URL: encoded) == Array(text.utf8))
        }
        #expect(TextEncoding.base64URL(Array("fo".utf8), padded: true) == "Zm8=")
        #expect(TextEncoding.bytes(base64URL: "Zm8=") == Array("fo".utf8))
        let awkward: [UInt8] = [0xfb, 0xff, 0xbf]  // "+/+/" in plain base64
        #expect(TextEncoding.base64URL(awkward) == "-_-_")
        #expect(TextEncoding.bytes(base64URL: "-_-_") == awkward)
        #expect(TextEncoding.bytes(base64URL: "not base64!") == nil)
        #expect(TextEncoding.bytes(base64URL: "Zm9vY") == nil, "a length no encoding has")
    }
}
