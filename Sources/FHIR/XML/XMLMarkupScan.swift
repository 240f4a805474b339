import JSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A scan of XML bytes before libxml2 parses them, for what CareGate refuses outright: a document
/// type declaration anywhere in the document (so that no entity is ever declared), a UTF-16,
/// UTF-32 or EBCDIC document (FHIR XML is UTF-8; the scan reads markup as ASCII bytes), and an element
/// with more than `maximumAttributes` attributes (libxml2 2.9 checks each attribute against every
/// other, so 40,000 attributes on one element take seconds and 200,000 take minutes).
///
/// Bytes are fed in order, in chunks of any size; the scan keeps its place between chunks, so a
/// file is scanned as libxml2 reads it, never held whole. Tags, text and attribute values are
/// read a word (eight bytes) at a time, long runs with `memchr`, so the scan costs little next to
/// the parse (about 9% of the instructions of reading Synthea's XML, and fewer branches).
/// FHIR XML is UTF-8 (the reader has libxml2 ignore a declared encoding), so markup is ASCII bytes.
struct XMLMarkupScan {
    /// The most attributes (namespace declarations included) one element may have. FHIR elements
    /// have one to three; XHTML narrative elements a handful.
    static let maximumAttributes = 1_000

    /// What the scan refuses, and the byte offset in the document where it is.
    struct Refusal: Equatable {
        enum Reason: Equatable { case doctype, attributes, notUTF8 }
        var reason: Reason
        var offset: Int

        var message: String {
            switch reason {
            case .doctype:
                "document type declarations (DTDs) are not allowed in FHIR XML; CareGate refuses them so that no entity is ever expanded or loaded"
            case .attributes:
                "an element has more than \(XMLMarkupScan.maximumAttributes) attributes; FHIR elements have a few, and reading this many takes time that grows with their square"
            case .notUTF8:
                "the document is UTF-16, UTF-32 or EBCDIC; FHIR XML is UTF-8"
            }
        }
    }

    /// What follows `<!`. The state holds no array, so moving between states costs nothing.
    private enum Declaration {
        case comment, cdata, doctype

        var opening: [UInt8] {
            switch self {
            case .comment: XMLMarkupScan.commentStart
            case .cdata: XMLMarkupScan.cdataStart
            case .doctype: XMLMarkupScan.doctype
            }
        }
    }

    private enum State {
        case text
        /// Just after `<`.
        case open
        /// Just after `<!`.
        case bang
        /// After `<!` and the first `matched` bytes of a comment's, CDATA section's or DOCTYPE's
        /// opening (`--`, `[CDATA[`, `DOCTYPE`).
        case declaration(Declaration, matched: Int)
        case tag
        case quoted(UInt8)
        case comment(dashes: Int)
        case instruction(question: Bool)
        case cdata(brackets: Int)
    }

    private var state = State.text
    private var attributes = 0
    /// Bytes scanned so far.
    private(set) var offset = 0
    /// The first refusal; once set, the scan stops.
    private(set) var refusal: Refusal?

    /// Scans the next chunk; returns the refusal once there is one.
    mutating func scan(_ chunk: UnsafeRawBufferPointer) -> Refusal? {
        guard refusal == nil, let base = chunk.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return refusal }
        let count = chunk.count
        // A UTF-16 or UTF-32 document starts with a byte-order mark or a zero byte around its
        // `<`; an EBCDIC one with `<?xm` in EBCDIC.
        if offset == 0, count >= 4, base[0] == 0 || base[1] == 0 || (base[0] == 0xFF && base[1] == 0xFE) || (base[0] == 0xFE && base[1] == 0xFF)
            || (base[0] == 0x4C && base[1] == 0x6F && base[2] == 0xA7 && base[3] == 0x94) {
            refusal = Refusal(reason: .notUTF8, offset: 0)
            return refusal
        }
        var i = 0
        while i < count, refusal == nil {
            switch state {
            case .text:
                i = skip(to: 0x3C, base, i, count)
                if i < count { state = .open; i += 1 }
            case .quoted(let quote):
                i = skip(to: quote, base, i, count)
                if i < count { state = .tag; i += 1 }
            case .tag:
                i = scanTag(base, i, count)
            default:
                scanRare(base[i], at: offset + i)
                i += 1
            }
        }
        offset += count
        return refusal
    }

    /// The index of the next `byte` from `i`, or `count` when the chunk holds none. The first
    /// words are tested here (most runs between markup are short), the rest with `memchr`.
    private func skip(to byte: UInt8, _ base: UnsafePointer<UInt8>, _ i: Int, _ count: Int) -> Int {
        var i = i
        let words = min(count, i + 32)
        while i + 8 <= words {
            let found = Self.matches(JSONEscaping.word(base + i), byte)
            if found != 0 { return i + found.trailingZeroBitCount / 8 }
            i += 8
        }
        guard let found = memchr(base + i, Int32(byte), count - i) else { return count }
        return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
    }

    /// Inside a tag: counts `=` (one per attribute) until a quote or the tag's end.
    private mutating func scanTag(_ base: UnsafePointer<UInt8>, _ start: Int, _ count: Int) -> Int {
        var i = start
        while true {
            i = Self.tagStop(base, i, count)
            guard i < count else { return count }
            switch base[i] {
            case 0x22, 0x27: state = .quoted(base[i]); return i + 1
            case 0x3E: state = .text; return i + 1
            default: // `=`
                attributes += 1
                if attributes > Self.maximumAttributes {
                    refusal = Refusal(reason: .attributes, offset: offset + i)
                    return i + 1
                }
                i += 1
            }
        }
    }

    /// The index of the first quote, `=` or `>` from `i` (or `count`), a word at a time.
    private static func tagStop(_ base: UnsafePointer<UInt8>, _ start: Int, _ count: Int) -> Int {
        var i = start
        while i + 8 <= count {
            let word = JSONEscaping.word(base + i)
            let found = matches(word, 0x22) | matches(word, 0x27) | matches(word, 0x3D) | matches(word, 0x3E)
            if found != 0 { return i + found.trailingZeroBitCount / 8 }
            i += 8
        }
        while i < count {
            switch base[i] {
            case 0x22, 0x27, 0x3D, 0x3E: return i
            default: i += 1
            }
        }
        return count
    }

    /// The high bit of each byte of `word` equal to `byte`. A borrow can set it falsely only above
    /// a byte that matched, so the lowest bit set is always a match.
    @inline(__always)
    private static func matches(_ word: UInt64, _ byte: UInt8) -> UInt64 {
        let x = word ^ (0x0101_0101_0101_0101 &* UInt64(byte))
        return (x &- 0x0101_0101_0101_0101) & ~x & 0x8080_8080_8080_8080
    }

    /// One byte in the states that are rare in FHIR XML: after `<`, after `<!`, in comments,
    /// processing instructions and CDATA sections.
    private mutating func scanRare(_ byte: UInt8, at position: Int) {
        switch state {
        case .open:
            switch byte {
            case 0x21: state = .bang
            case 0x3F: state = .instruction(question: false)
            default: attributes = 0; state = byte == 0x3E ? .text : .tag
            }
        case .bang:
            switch Self.upper(byte) {
            case 0x2D: declare(.comment, matched: 1, at: position)
            case 0x5B: declare(.cdata, matched: 1, at: position)
            case 0x44: declare(.doctype, matched: 1, at: position)
            default: attributes = 0; state = .tag // another `<!` declaration: libxml2 refuses it outside a DTD
            }
        case .declaration(let kind, let matched):
            let opening = kind.opening
            if (kind == .doctype ? Self.upper(byte) : byte) == opening[matched] {
                declare(kind, matched: matched + 1, at: position)
            } else {
                attributes = 0
                state = .tag
            }
        case .comment(let dashes):
            state = byte == 0x3E && dashes >= 2 ? .text : .comment(dashes: byte == 0x2D ? dashes + 1 : 0)
        case .instruction(let question):
            state = byte == 0x3E && question ? .text : .instruction(question: byte == 0x3F)
        case .cdata(let brackets):
            state = byte == 0x3E && brackets >= 2 ? .text : .cdata(brackets: byte == 0x5D ? brackets + 1 : 0)
        default:
            break
        }
    }

    /// `matched` bytes of a declaration's opening read; once it is whole, what it opens begins.
    private mutating func declare(_ kind: Declaration, matched: Int, at position: Int) {
        guard matched == kind.opening.count else {
            state = .declaration(kind, matched: matched)
            return
        }
        switch kind {
        case .comment: state = .comment(dashes: 0)
        case .cdata: state = .cdata(brackets: 0)
        case .doctype: refusal = Refusal(reason: .doctype, offset: position - matched - 1)
        }
    }

    fileprivate static let commentStart = Array("--".utf8)
    fileprivate static let cdataStart = Array("[CDATA[".utf8)
    fileprivate static let doctype = Array("DOCTYPE".utf8)

    private static func upper(_ byte: UInt8) -> UInt8 { byte >= 0x61 && byte <= 0x7A ? byte - 0x20 : byte }

    /// The 1-based line of `offset` in `bytes`.
    static func line(of offset: Int, in bytes: UnsafeRawBufferPointer) -> Int {
        1 + bytes.prefix(offset).reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) }
    }
}
