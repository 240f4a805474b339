import Diagnostics
import JSON
/// Reads FHIR R4 JSON into `Element` trees, checking it against the R4 definitions as it goes.
///
/// The reader works on the raw UTF-8 bytes and types every property from the definitions, so
/// choice names (`valueQuantity`), primitive extensions (`_given` with `null` padding), contained
/// resources and unknown properties all land in one lossless tree. Malformed JSON stops the read
/// with the line, column and element path; invalid content (bad lexical forms, codes outside a
/// required value set, arrays where one value belongs) is collected and reported together.
public struct FHIRJSONReader: Sendable {
    /// Limits, leniency and the source name for locations.
    public var options: ParseOptions

    /// A reader with these options.
    public init(options: ParseOptions = ParseOptions()) {
        self.options = options
    }

    /// Reads one resource (a Bundle included) from JSON bytes.
    public func read(_ bytes: [UInt8]) throws(FHIRFormatError) -> ParsedResource {
        try bytes.withUnsafeBufferPointer { buffer throws(FHIRFormatError) in
            try read(buffer)
        }
    }

    /// Reads one resource from a JSON string.
    public func read(_ text: String) throws(FHIRFormatError) -> ParsedResource {
        try read(Array(text.utf8))
    }

    /// Reads one resource from a JSON file.
    public func read(contentsOf path: String) throws(FHIRFormatError) -> ParsedResource {
        var options = self.options
        if options.sourceName == nil { options.sourceName = path }
        let bytes = try FileBytes.read(path, limit: options.maximumDocumentSize)
        return try FHIRJSONReader(options: options).read(bytes)
    }

    /// Reads one resource from a buffer of JSON bytes. `lineOffset` is added to reported line
    /// numbers (for lines of an NDJSON file).
    public func read(_ buffer: UnsafeBufferPointer<UInt8>, lineOffset: Int = 0) throws(FHIRFormatError) -> ParsedResource {
        try read(buffer, lineOffset: lineOffset, keepingEntryRanges: false).parsed
    }

    /// Reads as `read(_:lineOffset:)` does and, when asked, gives where each root Bundle entry's
    /// `resource` is in `buffer`, in order (only those read: a resource of an unknown type has none).
    func read(_ buffer: UnsafeBufferPointer<UInt8>, lineOffset: Int = 0,
              keepingEntryRanges: Bool) throws(FHIRFormatError) -> (parsed: ParsedResource, entryRanges: [Range<Int>]) {
        guard buffer.count <= options.maximumDocumentSize else {
            throw .limitExceeded(ParseIssue(.error, .limit,
                "document is \(buffer.count) bytes, larger than the limit of \(options.maximumDocumentSize)",
                at: SourceLocation(file: options.sourceName)))
        }
        var parser = JSONParser(input: buffer, options: options, lineOffset: lineOffset)
        parser.keepsEntryRanges = keepingEntryRanges
        let root = try parser.parseDocument()
        let errors = parser.issues.filter { $0.severity == .error }
        if !errors.isEmpty {
            throw .invalid(parser.issues)
        }
        return (ParsedResource(resource: root, warnings: parser.issues), parser.entryRanges)
    }
}

/// The recursive-descent parser behind `FHIRJSONReader`. Not copyable: it owns the stack its
/// objects' children are gathered on.
struct JSONParser: ~Copyable {
    let input: UnsafeBufferPointer<UInt8>
    let options: ParseOptions
    let model = ModelInfo.r4
    var pos = 0
    var depth = 0
    var issues: [ParseIssue] = []
    /// How many `null` placeholders have been read; they must be filled by `_name` parts.
    var nullPlaceholders = 0
    /// The element path being read, for locations.
    var path: [PathStep] = []
    /// The children of every object being read.
    var childStack = ChildStack()
    /// Whether to note where each root Bundle entry's resource is (`entryRanges`): a reader that
    /// keeps their text learns it from the one read, instead of walking the text again.
    var keepsEntryRanges = false
    var entryRanges: [Range<Int>] = []
    private var lineCache: (offset: Int, line: Int, lineStart: Int) = (0, 1, 0)
    private let lineOffset: Int

    /// One step of the path: a property name as written in the input (a byte range, so that no
    /// String is made for it unless a location is asked for), or a fixed name.
    struct PathStep {
        var key: Range<Int>
        var fixed: String?
        var index: Int

        init(name: String, index: Int) {
            key = 0..<0
            fixed = name
            self.index = index
        }

        init(key: Range<Int>, index: Int) {
            self.key = key
            fixed = nil
            self.index = index
        }
    }

    /// An `_name` property waiting to be merged with its values; `key` is its name in the input,
    /// the `_` included.
    struct PendingExtensions {
        var slot: Int16
        var typeIndex: Int32
        var key: Range<Int>
        var parts: [Element?]
        var offset: Int
    }

    init(input: UnsafeBufferPointer<UInt8>, options: ParseOptions, lineOffset: Int = 0) {
        self.input = input
        self.options = options
        self.lineOffset = lineOffset
    }

    // MARK: Locations and issues

    mutating func location(at offset: Int) -> SourceLocation {
        var (scanned, line, lineStart) = lineCache
        if offset < scanned { (scanned, line, lineStart) = (0, 1, 0) }
        var i = scanned
        let end = min(offset, input.count)
        while i < end {
            if input[i] == 0x0A { line += 1; lineStart = i + 1 }
            i += 1
        }
        lineCache = (end, line, lineStart)
        // Columns count characters, not bytes: skip UTF-8 continuation bytes.
        var column = 1
        var k = lineStart
        while k < end { if input[k] & 0xC0 != 0x80 { column += 1 }; k += 1 }
        return SourceLocation(file: options.sourceName, line: line + lineOffset, column: column, path: pathString())
    }

    func pathString() -> String {
        var out = ""
        for (i, step) in path.enumerated() {
            if i > 0 { out += "." }
            out += step.fixed ?? text(step.key)
            if step.index >= 0 { out += "[\(step.index)]" }
        }
        return out
    }

    /// The input's bytes in `range` as text (a property name, for messages and locations).
    func text(_ range: Range<Int>) -> String {
        String(decoding: UnsafeBufferPointer(rebasing: input[range]), as: UTF8.self)
    }

    mutating func report(_ code: ParseIssue.Code, _ message: String, at offset: Int, severity: ParseIssue.Severity = .error) {
        let demoted = severity == .error && options.lenient && code != .syntax
        issues.append(ParseIssue(demoted ? .warning : severity, code, message, at: location(at: offset)))
    }

    mutating func syntaxError(_ message: String, at offset: Int? = nil) -> FHIRFormatError {
        .malformed(ParseIssue(.error, .syntax, message, at: location(at: offset ?? pos)))
    }

    // MARK: Lexing

    @inline(__always)
    mutating func skipWhitespace() {
        while pos < input.count {
            let b = input[pos]
            guard b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 else { return }
            pos += 1
            // Indentation: runs of spaces, passed eight bytes at a time.
            while pos + 8 <= input.count {
                let other = word(at: pos) ^ 0x2020_2020_2020_2020
                if other != 0 { pos += other.trailingZeroBitCount >> 3; break }
                pos += 8
            }
        }
    }

    /// The eight input bytes at `offset`, the first in the lowest byte.
    @inline(__always)
    func word(at offset: Int) -> UInt64 {
        JSONEscaping.word(input.baseAddress! + offset)
    }

    /// Throws at the end of the input where a value must follow (`{"active":` and nothing more).
    @inline(__always)
    mutating func expectValue() throws(FHIRFormatError) {
        if pos >= input.count { throw syntaxError("expected a value, found the end of input") }
    }

    @inline(__always)
    mutating func peek() -> UInt8? {
        skipWhitespace()
        return pos < input.count ? input[pos] : nil
    }

    @inline(__always)
    mutating func expect(_ byte: UInt8, _ what: StaticString) throws(FHIRFormatError) {
        guard peek() == byte else { throw unexpected(what) }
        pos += 1
    }

    mutating func unexpected(_ what: StaticString) -> FHIRFormatError {
        syntaxError("expected \(what), found \(describeNext())")
    }

    func describeNext() -> String {
        guard pos < input.count else { return "end of input" }
        let b = input[pos]
        switch b {
        case 0x7B: return "'{'"
        case 0x5B: return "'['"
        case 0x22: return "a string"
        case 0x74, 0x66: return "a boolean"
        case 0x6E: return "null"
        case 0x2D, 0x30...0x39: return "a number"
        default:
            let end = min(pos + 12, input.count)
            return "'" + String(decoding: UnsafeBufferPointer(rebasing: input[pos..<end]), as: UTF8.self) + "'"
        }
    }

    mutating func enter() throws(FHIRFormatError) {
        depth += 1
        if depth > options.maximumDepth {
            throw .limitExceeded(ParseIssue(.error, .limit,
                "nesting deeper than the limit of \(options.maximumDepth)", at: location(at: pos)))
        }
    }

    /// Reads a string at `pos` (which is at the opening quote) and returns the byte range of its
    /// raw contents and whether it has escapes.
    @inline(__always)
    mutating func scanString() throws(FHIRFormatError) -> (start: Int, end: Int, escaped: Bool, nonASCII: Bool) {
        pos += 1
        let start = pos
        var escaped = false
        var high: UInt8 = 0
        var highBits: UInt64 = 0
        while pos < input.count {
            // Eight bytes at a time while none is a quote, a backslash or a control character.
            while pos + 8 <= input.count {
                let w = word(at: pos)
                let stops = JSONEscaping.stopBytes(w)
                if stops == 0 {
                    highBits |= w
                    pos += 8
                    continue
                }
                // The bytes before the first stop are plain text.
                let plain = stops.trailingZeroBitCount >> 3
                if plain > 0 { highBits |= w & ((1 << UInt64(plain * 8)) &- 1) }
                pos += plain
                break
            }
            guard pos < input.count else { break }
            let b = input[pos]
            high |= b
            if b == 0x22 {
                let end = pos
                pos += 1
                return (start, end, escaped, high >= 0x80 || highBits & 0x8080_8080_8080_8080 != 0)
            }
            if b == 0x5C {
                escaped = true
                pos += 2
                continue
            }
            if b < 0x20 {
                throw syntaxError("control character U+\(String(b, radix: 16, uppercase: true)) in a string (escape it)")
            }
            pos += 1
        }
        throw syntaxError("unterminated string", at: start - 1)
    }

    /// Decodes a scanned string to a Swift String, resolving escapes (`JSONEscaping`).
    mutating func decodeString(_ s: (start: Int, end: Int, escaped: Bool, nonASCII: Bool)) throws(FHIRFormatError) -> String {
        let raw = UnsafeBufferPointer(rebasing: input[s.start..<s.end])
        // Invalid UTF-8 would become U+FFFD without a word: an error (a warning when lenient).
        if s.nonASCII, let bad = JSONParser.firstInvalidUTF8(raw) {
            report(.invalidValue, "invalid UTF-8 (byte 0x\(String(raw[bad], radix: 16, uppercase: true))); the text keeps U+FFFD in its place", at: s.start + bad)
        }
        if !s.escaped { return String(decoding: raw, as: UTF8.self) }
        let text: String
        do { text = try JSONEscaping.unescape(raw) } catch { throw syntaxError(error.message, at: s.start + error.offset) }
        // FHIR strings allow no character below U+0020 but tab, CR and LF, escaped or not: XML
        // cannot carry them at all. An error (a warning when lenient); the text keeps U+FFFD.
        guard let bad = Self.firstControlEscape(raw) else { return text }
        report(.invalidValue, "control character \(bad.name) in a string (FHIR allows only tab, CR and LF below U+0020); the text keeps U+FFFD in its place", at: s.start + bad.offset)
        return Lexical.replacingControlCharacters(text)
    }

    /// The first escape in a JSON string's raw contents that stands for a control character
    /// FHIR refuses (`\b`, `\f`, `\u0000`–`\u001F` but tab, CR and LF), with its offset.
    static func firstControlEscape(_ raw: UnsafeBufferPointer<UInt8>) -> (offset: Int, name: String)? {
        var i = 0
        while i + 1 < raw.count {
            guard raw[i] == 0x5C else { i += 1; continue }
            switch raw[i + 1] {
            case 0x62: return (i, "U+0008 (\\b)")
            case 0x66: return (i, "U+000C (\\f)")
            case 0x75 where i + 5 < raw.count:
                let hex = String(decoding: UnsafeBufferPointer(rebasing: raw[(i + 2)..<(i + 6)]), as: UTF8.self)
                if let code = UInt32(hex, radix: 16), Lexical.isForbiddenControl(code) {
                    return (i, "U+" + hex.uppercased())
                }
                i += 6
            default: i += 2
            }
        }
        return nil
    }

    /// The offset of the first byte that is not part of valid UTF-8, or nil.
    static func firstInvalidUTF8(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        var offset = 0
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }

    /// Scans a JSON number at `pos` and returns its byte range.
    @inline(__always)
    mutating func scanNumber() throws(FHIRFormatError) -> Range<Int> {
        let start = pos
        while pos < input.count {
            let b = input[pos]
            if (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2B || b == 0x2E || b == 0x65 || b == 0x45 { pos += 1 } else { break }
        }
        let range = start..<pos
        guard Lexical.isDecimal(UnsafeBufferPointer(rebasing: input[range])) else {
            throw syntaxError("malformed number", at: start)
        }
        return range
    }

    mutating func scanLiteral(_ literal: StaticString) throws(FHIRFormatError) {
        let n = literal.utf8CodeUnitCount
        guard pos + n <= input.count else { throw syntaxError("expected a value, found \(describeNext())") }
        let matches = literal.withUTF8Buffer { lit in
            UnsafeBufferPointer(rebasing: input[pos..<(pos + n)]).elementsEqual(lit)
        }
        guard matches else { throw syntaxError("expected a value, found \(describeNext())") }
        pos += n
    }

    /// Skips one JSON value of any kind, checking its syntax.
    mutating func skipValue() throws(FHIRFormatError) {
        guard let b = peek() else { throw syntaxError("expected a value, found end of input") }
        switch b {
        case 0x22: _ = try scanString()
        case 0x7B:
            try enter()
            pos += 1
            if peek() == 0x7D { pos += 1; depth -= 1; return }
            while true {
                guard peek() == 0x22 else { throw syntaxError("expected a property name, found \(describeNext())") }
                _ = try scanString()
                try expect(0x3A, "':'")
                try skipValue()
                guard let next = peek() else { throw syntaxError("unterminated object") }
                pos += 1
                if next == 0x7D { break }
                guard next == 0x2C else { throw syntaxError("expected ',' or '}', found \(describeNext())", at: pos - 1) }
            }
            depth -= 1
        case 0x5B:
            try enter()
            pos += 1
            if peek() == 0x5D { pos += 1; depth -= 1; return }
            while true {
                try skipValue()
                guard let next = peek() else { throw syntaxError("unterminated array") }
                pos += 1
                if next == 0x5D { break }
                guard next == 0x2C else { throw syntaxError("expected ',' or ']', found \(describeNext())", at: pos - 1) }
            }
            depth -= 1
        case 0x74: try scanLiteral("true")
        case 0x66: try scanLiteral("false")
        case 0x6E: try scanLiteral("null")
        default: _ = try scanNumber()
        }
    }

    // MARK: Documents and resources

    mutating func parseDocument() throws(FHIRFormatError) -> Element {
        // A UTF-8 byte order mark is tolerated.
        if input.count >= 3 && input[0] == 0xEF && input[1] == 0xBB && input[2] == 0xBF { pos = 3 }
        guard peek() == 0x7B else {
            throw syntaxError("expected a FHIR resource (a JSON object), found \(describeNext())")
        }
        guard let root = try parseResource(name: nil, slot: Int16.max, skimmable: true) else {
            throw .invalid(issues)
        }
        skipWhitespace()
        if pos < input.count {
            throw syntaxError("unexpected content after the resource: \(describeNext())")
        }
        return root
    }

    /// Finds the `resourceType` of the object at `pos` without consuming it.
    mutating func findResourceType() throws(FHIRFormatError) -> (name: String, offset: Int)? {
        let start = pos
        defer { pos = start }
        pos += 1
        if peek() == 0x7D { return nil }
        while true {
            guard peek() == 0x22 else { throw syntaxError("expected a property name, found \(describeNext())") }
            let key = try scanString()
            try expect(0x3A, "':'")
            let isResourceType = !key.escaped && UnsafeBufferPointer(rebasing: input[key.start..<key.end]).elementsEqual("resourceType".utf8)
            if isResourceType {
                guard peek() == 0x22 else { throw syntaxError("resourceType must be a string, found \(describeNext())") }
                let valueOffset = pos
                let value = try scanString()
                return (try decodeString(value), valueOffset)
            }
            try skipValue()
            guard let next = peek() else { throw syntaxError("unterminated object") }
            pos += 1
            if next == 0x7D { return nil }
            guard next == 0x2C else { throw syntaxError("expected ',' or '}', found \(describeNext())", at: pos - 1) }
        }
    }

    /// Parses the resource object at `pos`. Returns nil (with an issue) for an unknown resource type.
    /// A `skimmable` one (the root, a Bundle entry's) is skimmed when `options.skim` says so.
    mutating func parseResource(name: String?, slot: Int16, skimmable: Bool) throws(FHIRFormatError) -> Element? {
        let objectStart = pos
        guard let (typeName, offset) = try findResourceType() else {
            report(.structure, "a resource needs a resourceType", at: objectStart)
            try skipValue()
            return nil
        }
        guard let type = model.resourceType(named: typeName) else {
            report(.unknownResourceType, "'\(typeName)' is not an R4 resource type", at: offset)
            try skipValue()
            return nil
        }
        if path.isEmpty { path.append(PathStep(name: typeName, index: -1)) }
        var element = Element(name: name ?? typeName, typeIndex: type.index, slot: slot)
        if skimmable, let skim = options.skim, skim.skims(typeName, isRoot: name == nil) {
            try parseObject(type: type, into: &element, isResource: true, keeping: skim.keptElements)
        } else {
            try parseObject(type: type, into: &element, isResource: true)
        }
        return element
    }

    // MARK: Objects

    /// Parses the object at `pos` as an instance of `type`, appending its properties to `node`.
    /// With `keeping` (a skimmed resource), only `id` and the elements it names are read; every
    /// other property, known or not, is checked as JSON and skipped without a word.
    mutating func parseObject(type: TypeDefinition, into node: inout Element, isResource: Bool, keeping: Set<String>? = nil) throws(FHIRFormatError) {
        let objectStart = pos
        try enter()
        pos += 1
        let firstChild = childStack.count
        var pending: [PendingExtensions] = []
        var seen = SlotSet()
        var seenExtensions = SlotSet()
        var sorted = true
        var lastSlot: Int16 = -1
        var propertyCount = 0
        let nullsBefore = nullPlaceholders

        if peek() == 0x7D {
            pos += 1
            depth -= 1
            if !isResource { report(.structure, "empty object (FHIR JSON has no empty objects)", at: objectStart) }
            return
        }
        while true {
            guard peek() == 0x22 else { throw syntaxError("expected a property name, found \(describeNext())") }
            let keyOffset = pos
            let key = try scanString()
            try expect(0x3A, "':'")
            _ = peek()
            propertyCount += 1

            var keyStart = key.start
            let isExtensionPart = input[keyStart] == 0x5F
            if isExtensionPart { keyStart += 1 }
            // The property's name as written, without a leading `_`.
            let name = keyStart..<key.end
            var found: (slot: Int16, type: Int32)? = nil
            if !key.escaped {
                found = type.properties.lookup(UnsafeBufferPointer(rebasing: input[name]))
            }

            if let keeping, !Self.reads(found, of: type, keeping: keeping) {
                try skipValue()
            } else if let (slot, typeIndex) = found {
                // The model lives as long as the program: no reference count for a definition.
                unowned(unsafe) let definition = type.elements[Int(slot)]
                if slot < lastSlot { sorted = false }
                lastSlot = slot
                // A second value for one element is reported and left out (the first is kept):
                // kept, it would make a tree no format can write back.
                if isExtensionPart {
                    if seenExtensions.insert(slot) == false {
                        report(.structure, "'_\(text(name))' appears twice (the second is left out)", at: keyOffset)
                        try skipValue()
                    } else {
                        let parts = try parseExtensionParts(definition: definition, typeIndex: typeIndex, key: key.start..<key.end)
                        pending.append(PendingExtensions(slot: slot, typeIndex: typeIndex, key: key.start..<key.end, parts: parts, offset: keyOffset))
                    }
                } else if seen.insert(slot) == false {
                    report(.structure, definition.isChoice
                        ? "'\(text(name))': \(definition.name)[x] can have only one type (the second is left out)"
                        : "'\(text(name))' appears twice (the second is left out)", at: keyOffset)
                    try skipValue()
                } else {
                    try parseProperty(definition: definition, typeIndex: typeIndex, name: name, isResource: isResource)
                }
            } else {
                let keyString = try decodeString(key)
                if isResource && keyString == "resourceType" {
                    try skipValue()
                } else {
                    let valueStart = pos
                    try skipValue()
                    let raw = String(decoding: UnsafeBufferPointer(rebasing: input[valueStart..<pos]), as: UTF8.self)
                    path.append(PathStep(name: keyString, index: -1))
                    report(.unknownElement, "unknown element '\(keyString)' in \(type.name) (kept)", at: keyOffset, severity: .warning)
                    path.removeLast()
                    childStack.push(Element(name: keyString, typeIndex: Element.unknownJSON, slot: Int16.max, value: raw))
                }
            }

            guard let next = peek() else { throw syntaxError("unterminated object", at: objectStart) }
            pos += 1
            if next == 0x7D { break }
            guard next == 0x2C else { throw syntaxError("expected ',' or '}' after a property, found \(describeNext())", at: pos - 1) }
        }
        depth -= 1
        if pending.isEmpty && nullPlaceholders == nullsBefore {
            // The common case: the children are final, put in definition order as they move out.
            node.children = childStack.pop(from: firstChild, inSlotOrder: !sorted)
            return
        }
        node.children = childStack.pop(from: firstChild, inSlotOrder: false)

        if !pending.isEmpty {
            mergeExtensions(pending, into: &node)
            sorted = false
        }
        if nullPlaceholders != nullsBefore {
            // A null in a primitive array must be matched by an id or extension in `_name`.
            let before = node.children.count
            node.children.removeAll { $0.value == nil && $0.children.isEmpty && $0.isPrimitive }
            if node.children.count != before {
                report(.structure, "null in an array without a matching '_' entry carrying an id or extension", at: objectStart)
            }
        }
        if !sorted {
            let indexed = node.children.enumerated().sorted { a, b in
                a.element.slot != b.element.slot ? a.element.slot < b.element.slot : a.offset < b.offset
            }
            node.children = indexed.map(\.element)
        }
    }

    /// Whether a skimmed resource reads a property: its `id` and the kept elements.
    static func reads(_ found: (slot: Int16, type: Int32)?, of type: TypeDefinition, keeping: Set<String>) -> Bool {
        guard let found else { return false }
        let name = type.elements[Int(found.slot)].name
        return name == "id" || keeping.contains(name)
    }

    /// Parses the value of one known property (a single value or an array) onto the child stack.
    /// `name` is the property's name in the input.
    mutating func parseProperty(definition: ElementDefinition, typeIndex: Int32, name: Range<Int>,
                                isResource: Bool) throws(FHIRFormatError) {
        let valueOffset = pos
        try expectValue()
        if input[pos] == 0x5B {
            if !definition.isRepeating {
                path.append(PathStep(key: name, index: -1))
                report(.cardinality, "expected a single value, found an array", at: valueOffset)
                path.removeLast()
            }
            try enter()
            pos += 1
            if peek() == 0x5D {
                pos += 1
                depth -= 1
                path.append(PathStep(key: name, index: -1))
                report(.structure, "empty array (FHIR JSON has no empty arrays)", at: valueOffset)
                path.removeLast()
                return
            }
            var index = 0
            while true {
                path.append(PathStep(key: name, index: index))
                _ = peek()
                if let child = try parseValue(definition: definition, typeIndex: typeIndex, inArray: true, isResourceId: false) {
                    childStack.push(child)
                }
                path.removeLast()
                index += 1
                guard let next = peek() else { throw syntaxError("unterminated array", at: valueOffset) }
                pos += 1
                if next == 0x5D { break }
                guard next == 0x2C else { throw syntaxError("expected ',' or ']', found \(describeNext())", at: pos - 1) }
            }
            depth -= 1
            if let max = definition.max, index > max {
                path.append(PathStep(key: name, index: -1))
                report(.cardinality, "at most \(max) allowed, found \(index)", at: valueOffset)
                path.removeLast()
            }
        } else {
            path.append(PathStep(key: name, index: -1))
            if definition.isRepeating {
                report(.cardinality, "expected an array", at: valueOffset)
            }
            let isResourceId = isResource && definition.slot == 0
            if let child = try parseValue(definition: definition, typeIndex: typeIndex, inArray: false, isResourceId: isResourceId) {
                childStack.push(child)
            }
            path.removeLast()
        }
    }

    /// Parses one value of an element. Returns nil when the value was reported and dropped.
    @inline(__always)
    mutating func parseValue(definition: ElementDefinition, typeIndex: Int32, inArray: Bool, isResourceId: Bool) throws(FHIRFormatError) -> Element? {
        unowned(unsafe) let type = model.types[Int(typeIndex)]
        let valueOffset = pos
        try expectValue()
        switch type.kind {
        case .primitive:
            let kind = isResourceId ? PrimitiveKind.id : type.primitiveKind!
            let b = input[pos]
            let text: String
            var formMatches = true
            switch b {
            case 0x22:
                let s = try scanString()
                text = try decodeString(s)
                if kind.jsonForm != .string {
                    formMatches = false
                    report(.structure, "expected a JSON \(kind.jsonForm == .number ? "number" : "boolean") for \(kind.rawValue), found a string", at: valueOffset)
                }
            case 0x74, 0x66:
                try scanLiteral(b == 0x74 ? "true" : "false")
                text = b == 0x74 ? "true" : "false"
                if kind.jsonForm != .boolean {
                    formMatches = false
                    report(.structure, "expected \(kind.jsonForm == .string ? "a string" : "a number") for \(kind.rawValue), found a boolean", at: valueOffset)
                }
            case 0x6E:
                try scanLiteral("null")
                if !inArray {
                    report(.structure, "null is only allowed in arrays of primitives with extensions", at: valueOffset)
                    return nil
                }
                nullPlaceholders += 1
                return Element(name: definition.name, typeIndex: typeIndex, slot: definition.slot)
            case 0x2D, 0x30...0x39:
                let range = try scanNumber()
                text = String(decoding: UnsafeBufferPointer(rebasing: input[range]), as: UTF8.self)
                if kind.jsonForm != .number {
                    formMatches = false
                    report(.structure, "expected \(kind.jsonForm == .string ? "a string" : "a boolean") for \(kind.rawValue), found a number", at: valueOffset)
                }
            case 0x7B, 0x5B:
                report(.structure, "expected a \(kind.rawValue) value, found \(b == 0x7B ? "an object" : "an array")", at: valueOffset)
                try skipValue()
                return nil
            default:
                throw syntaxError("expected a value, found \(describeNext())")
            }
            if formMatches { checkPrimitive(text, kind: kind, definition: definition, at: valueOffset) }
            return Element(name: definition.name, typeIndex: typeIndex, slot: definition.slot, value: text)

        case .complex, .backbone:
            guard input[pos] == 0x7B else {
                report(.structure, "expected an object (\(type.name)), found \(describeNext())", at: valueOffset)
                try skipValue()
                return nil
            }
            var child = Element(name: definition.name, typeIndex: typeIndex, slot: definition.slot)
            try parseObject(type: type, into: &child, isResource: false)
            return child

        case .resource:
            guard input[pos] == 0x7B else {
                report(.structure, "expected a resource (an object), found \(describeNext())", at: valueOffset)
                try skipValue()
                return nil
            }
            let depthBefore = path.count
            let isEntryResource = definition === model.bundleEntryResource
            let start = pos
            let resource = try parseResource(name: definition.name, slot: definition.slot, skimmable: isEntryResource)
            path.removeSubrange(depthBefore...)
            // A root Bundle's entry resource is three levels in: the Bundle, `entry`'s array, the entry.
            if keepsEntryRanges, isEntryResource, depth == 3, resource != nil { entryRanges.append(start..<pos) }
            return resource
        }
    }

    /// Checks a primitive's lexical form and its element's required binding.
    @inline(__always)
    mutating func checkPrimitive(_ text: String, kind: PrimitiveKind, definition: ElementDefinition, at offset: Int) {
        var text = text
        let valid = text.withUTF8 { kind.isValid(utf8: $0) }
        if !valid {
            report(.invalidValue, "\"\(text)\" is not a valid \(kind.rawValue) (\(kind.ruleDescription))", at: offset)
            return
        }
        if kind == .xhtml, let problem = XHTMLNarrative.problem(text) {
            report(.invalidValue, "the narrative is not well-formed XHTML (\(problem))", at: offset)
            return
        }
        if definition.binding != nil, let binding = definition.binding, !binding.contains(text) {
            let shown = binding.codes.count <= 8
                ? binding.codes.joined(separator: "|")
                : binding.codes.prefix(6).joined(separator: "|") + "|..."
            report(.binding, "expected one of \(shown), found \"\(text)\"", at: offset)
        }
    }

    /// Parses an `_name` property (`key` is its name in the input): an object, or an array of
    /// objects and nulls.
    mutating func parseExtensionParts(definition: ElementDefinition, typeIndex: Int32, key: Range<Int>) throws(FHIRFormatError) -> [Element?] {
        try expectValue()
        let type = model.types[Int(typeIndex)]
        guard type.kind == .primitive else {
            path.append(PathStep(key: key, index: -1))
            report(.structure, "'\(text(key))' is only allowed for primitive elements", at: pos)
            path.removeLast()
            try skipValue()
            return []
        }
        func part(_ parser: inout JSONParser, index: Int) throws(FHIRFormatError) -> Element? {
            parser.path.append(PathStep(key: key, index: index))
            defer { parser.path.removeLast() }
            try parser.expectValue()
            if parser.input[parser.pos] == 0x6E {
                try parser.scanLiteral("null")
                return nil
            }
            guard parser.input[parser.pos] == 0x7B else {
                parser.report(.structure, "expected an object with id or extension, found \(parser.describeNext())", at: parser.pos)
                try parser.skipValue()
                return nil
            }
            var element = Element(name: definition.name, typeIndex: typeIndex, slot: definition.slot)
            try parser.parseObject(type: type, into: &element, isResource: false)
            return element
        }
        if input[pos] == 0x5B {
            try enter()
            pos += 1
            var parts: [Element?] = []
            if peek() == 0x5D { pos += 1; depth -= 1; return [] }
            while true {
                _ = peek()
                parts.append(try part(&self, index: parts.count))
                guard let next = peek() else { throw syntaxError("unterminated array") }
                pos += 1
                if next == 0x5D { break }
                guard next == 0x2C else { throw syntaxError("expected ',' or ']', found \(describeNext())", at: pos - 1) }
            }
            depth -= 1
            return parts
        }
        return [try part(&self, index: -1)]
    }

    /// Joins `_name` parts with the values of `name`, index by index.
    mutating func mergeExtensions(_ pending: [PendingExtensions], into node: inout Element) {
        for extensions in pending {
            // `_name` and `name` are made only for a report.
            func partsName() -> String { text(extensions.key) }
            func name() -> String { String(text(extensions.key).dropFirst()) }
            let indices = node.children.indices.filter { node.children[$0].slot == extensions.slot && !node.children[$0].isUnknown }
            if indices.isEmpty {
                // Only `_name`: the primitives have no values, just ids or extensions.
                for part in extensions.parts {
                    if let part { node.children.append(part) }
                    else {
                        path.append(PathStep(key: extensions.key, index: -1))
                        report(.structure, "null in '\(partsName())' without a value in '\(name())'", at: extensions.offset)
                        path.removeLast()
                    }
                }
                continue
            }
            if indices.count != extensions.parts.count {
                path.append(PathStep(key: extensions.key, index: -1))
                report(.structure, "'\(partsName())' has \(extensions.parts.count) entries but '\(name())' has \(indices.count)", at: extensions.offset)
                path.removeLast()
            }
            for (i, childIndex) in indices.enumerated() where i < extensions.parts.count {
                guard let part = extensions.parts[i] else {
                    if node.children[childIndex].value == nil {
                        path.append(PathStep(key: extensions.key.dropFirst(), index: i))
                        report(.structure, "both '\(name())' and '\(partsName())' are null at index \(i)", at: extensions.offset)
                        path.removeLast()
                    }
                    continue
                }
                node.children[childIndex].children = part.children
            }
        }
    }
}

/// A set of element slots (definition positions) seen in one object.
struct SlotSet {
    private var bits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var overflow: Set<Int16> = []

    /// Inserts a slot; returns false when it was already there.
    @inline(__always)
    mutating func insert(_ slot: Int16) -> Bool {
        let s = Int(slot)
        let mask = UInt64(1) << UInt64(s & 63)
        switch s >> 6 {
        case 0: if bits.0 & mask != 0 { return false }; bits.0 |= mask
        case 1: if bits.1 & mask != 0 { return false }; bits.1 |= mask
        case 2: if bits.2 & mask != 0 { return false }; bits.2 |= mask
        case 3: if bits.3 & mask != 0 { return false }; bits.3 |= mask
        default: return overflow.insert(slot).inserted
        }
        return true
    }
}

/// The children of the objects being read, gathered in one buffer: each object's children are
/// pushed as they are read and moved into one array of the right size when it closes, instead of
/// an array per object grown (and allocated again) child by child.
struct ChildStack: ~Copyable {
    private var base: UnsafeMutablePointer<Element>
    private var capacity = 64
    private(set) var count = 0
    /// Each property's run of children, kept between objects for sorting them.
    private var runs: [(slot: Int16, start: Int, end: Int)] = []

    init() {
        base = .allocate(capacity: capacity)
    }

    deinit {
        base.deinitialize(count: count)
        base.deallocate()
    }

    @inline(__always)
    mutating func push(_ element: consuming Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    /// Moves the children pushed since `mark` out: in the order pushed, or `inSlotOrder`, each
    /// property's run of values moved whole and runs of one slot kept in the order pushed.
    mutating func pop(from mark: Int, inSlotOrder: Bool) -> [Element] {
        let n = count - mark
        guard n > 0 else { return [] }
        var children: [Element] = []
        children.reserveCapacity(n)
        if inSlotOrder {
            runs.removeAll(keepingCapacity: true)
            var i = mark
            while i < count {
                var end = i + 1
                while end < count && base[end].slot == base[i].slot { end += 1 }
                runs.append((base[i].slot, i, end))
                i = end
            }
            runs.sort { $0.slot != $1.slot ? $0.slot < $1.slot : $0.start < $1.start }
            for run in runs {
                for k in run.start..<run.end { children.append((base + k).move()) }
            }
        } else {
            for k in mark..<count { children.append((base + k).move()) }
        }
        count = mark
        return children
    }

    private mutating func grow() {
        let larger = UnsafeMutablePointer<Element>.allocate(capacity: capacity * 2)
        larger.moveInitialize(from: base, count: count)
        base.deallocate()
        base = larger
        capacity *= 2
    }
}
