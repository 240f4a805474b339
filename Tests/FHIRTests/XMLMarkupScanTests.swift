import Testing
@testable import FHIR

/// The markup scan and the whitespace test read eight bytes at a time; these tests put the bytes
/// they look for at every offset within a word and across chunk ends.
@Suite("XML markup scan, a word at a time")
struct XMLMarkupScanTests {
    /// A seeded generator, so that a failure repeats.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// An element with `count` attributes of random name and value lengths, values holding the
    /// other quote, `=` and `>`; returns the document and the offset of each attribute's `=`.
    static func element(attributes count: Int, _ random: inout Seeded) -> (bytes: [UInt8], equals: [Int]) {
        var bytes = Array("<Patient xmlns:x=\"http://hl7.org/fhir\">".utf8)
        let text = Int.random(in: 0...40, using: &random)
        bytes += Array(repeating: UInt8(ascii: " "), count: text) + Array("<active".utf8)
        var equals: [Int] = []
        for i in 0..<count {
            let quote = i % 2 == 0 ? UInt8(ascii: "\"") : UInt8(ascii: "'")
            let other = i % 2 == 0 ? UInt8(ascii: "'") : UInt8(ascii: "\"")
            bytes += Array(repeating: UInt8(ascii: " "), count: Int.random(in: 1...3, using: &random))
            bytes += Array("a\(i)".utf8) + Array(repeating: UInt8(ascii: "b"), count: Int.random(in: 0...17, using: &random))
            equals.append(bytes.count)
            bytes += [UInt8(ascii: "="), quote]
            for _ in 0..<Int.random(in: 0...20, using: &random) {
                bytes.append([UInt8(ascii: "="), UInt8(ascii: ">"), other, UInt8(ascii: "v")].randomElement(using: &random)!)
            }
            bytes.append(quote)
        }
        bytes += Array("/></Patient>".utf8)
        return (bytes, equals)
    }

    /// The scan of `bytes` fed in chunks of random sizes.
    static func scanInChunks(_ bytes: [UInt8], _ random: inout Seeded) -> XMLMarkupScan.Refusal? {
        var scan = XMLMarkupScan()
        var start = 0
        while start < bytes.count {
            let end = min(bytes.count, start + Int.random(in: 1...64, using: &random))
            let refusal = bytes[start..<end].withUnsafeBytes { scan.scan($0) }
            if let refusal { return refusal }
            start = end
        }
        return nil
    }

    @Test("an element's attributes are counted wherever their `=` falls in a word or a chunk; quoted `=`, `>` and quotes are not")
    func attributesCounted() {
        var random = Seeded(state: 39)
        let limit = XMLMarkupScan.maximumAttributes
        for round in 0..<60 {
            // The root's namespace declaration is one attribute of its own element, not of <active>.
            let (bytes, equals) = Self.element(attributes: limit + round % 2, &random)
            let refusal = Self.scanInChunks(bytes, &random)
            if round % 2 == 0 {
                #expect(refusal == nil, "round \(round): \(String(describing: refusal))")
            } else {
                #expect(refusal == XMLMarkupScan.Refusal(reason: .attributes, offset: equals[limit]), "round \(round)")
            }
        }
    }

    @Test("text between tags of any length, and a tag cut at any byte, scan the same as whole")
    func textAndTagsAtEveryOffset() {
        var random = Seeded(state: 7)
        for length in 0..<40 {
            let text = String((0..<length).map { _ in "ab =>\"'\n".randomElement(using: &random)! })
            let xml = "<Patient xmlns=\"http://hl7.org/fhir\"><a>\(text)</a><!DOCTYPE x></Patient>"
            let bytes = Array(xml.utf8)
            let doctype = bytes.count - "<!DOCTYPE x></Patient>".utf8.count
            for _ in 0..<5 {
                #expect(Self.scanInChunks(bytes, &random) == XMLMarkupScan.Refusal(reason: .doctype, offset: doctype), "text of \(length)")
            }
        }
    }

    @Test("whitespace is recognised byte-exactly at every position of a word")
    func allWhitespace() {
        let spaces: [UInt8] = [0x20, 0x0A, 0x09, 0x0D]
        let others: [UInt8] = [0x00, 0x08, 0x0B, 0x0C, 0x1F, 0x21, 0x3C, 0x41, 0x80, 0x89, 0x8A, 0xA0, 0xAD, 0xFF]
        for length in 0...24 {
            var bytes = (0..<length).map { spaces[$0 % spaces.count] }
            #expect(bytes.withUnsafeBufferPointer { Lexical.isAllWhitespace($0) }, "\(length) whitespace bytes")
            for position in 0..<length {
                let kept = bytes[position]
                for other in others {
                    bytes[position] = other
                    #expect(!bytes.withUnsafeBufferPointer { Lexical.isAllWhitespace($0) }, "0x\(String(other, radix: 16)) at \(position) of \(length)")
                }
                bytes[position] = kept
            }
        }
    }
}
