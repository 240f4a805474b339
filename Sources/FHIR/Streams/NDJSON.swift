import Diagnostics
/// Reads FHIR NDJSON (one resource per line) as a stream: one line in memory at a time.
///
/// A line that fails to parse throws with its line number, and the reader stays positioned after
/// it, so a caller can report it and go on with the next resource. Blank lines are skipped.
public final class NDJSONReader {
    private let file: ChunkedFileReader
    private let options: ParseOptions
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    /// The 1-based line number of the last line read.
    public private(set) var lineNumber = 0
    static let chunkSize = 1 << 20

    /// Opens an NDJSON file.
    public init(path: String, options: ParseOptions = ParseOptions()) throws(FHIRFormatError) {
        file = try ChunkedFileReader(path: path)
        var options = options
        if options.sourceName == nil { options.sourceName = path }
        self.options = options
    }

    /// The next resource, or nil at the end of the file.
    public func next() throws(FHIRFormatError) -> ParsedResource? {
        guard let line = try nextLine() else { return nil }
        return try line.parse(options: options)
    }

    /// The next line that is not blank, unparsed (so that lines can be parsed elsewhere, on
    /// other threads), or nil at the end of the file. A line over the size limit throws.
    public func nextLine() throws(FHIRFormatError) -> Line? {
        while true {
            guard let line = try nextLineRange() else { return nil }
            lineNumber += 1
            let isBlank = buffer[line].allSatisfy { Lexical.isWhitespace($0) }
            if isBlank { continue }
            if line.count > options.maximumDocumentSize {
                throw .limitExceeded(ParseIssue(.error, .limit,
                    "line is \(line.count) bytes, larger than the limit of \(options.maximumDocumentSize)",
                    at: SourceLocation(file: options.sourceName, line: lineNumber)))
            }
            return Line(bytes: Array(buffer[line]), number: lineNumber)
        }
    }

    /// One line of an NDJSON file, as read.
    public struct Line: Sendable {
        /// The line's bytes, without its line break.
        public var bytes: [UInt8]
        /// Its 1-based line number in the file.
        public var number: Int

        /// The line's resource, with issues placed on this line of the file `options` names.
        public func parse(options: ParseOptions) throws(FHIRFormatError) -> ParsedResource {
            try bytes.withUnsafeBufferPointer { all throws(FHIRFormatError) in
                try FHIRJSONReader(options: options).read(all, lineOffset: number - 1)
            }
        }
    }

    /// The options lines are read with (`sourceName` is the file).
    public var readOptions: ParseOptions { options }

    /// Finds the next line in the buffer, reading more of the file as needed.
    private func nextLineRange() throws(FHIRFormatError) -> Range<Int>? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 0x0A) {
                let line = start..<newline
                start = newline + 1
                scanned = start
                return line
            }
            scanned = buffer.count
            if file.isAtEnd {
                guard start < buffer.count else { return nil }
                let line = start..<buffer.count
                start = buffer.count
                scanned = start
                return line
            }
            // Drop consumed lines before reading more, so memory holds about one line.
            if start > 0 {
                buffer.removeSubrange(0..<start)
                scanned -= start
                start = 0
            }
            if buffer.count > options.maximumDocumentSize {
                throw .limitExceeded(ParseIssue(.error, .limit,
                    "line is longer than the limit of \(options.maximumDocumentSize) bytes",
                    at: SourceLocation(file: options.sourceName, line: lineNumber + 1)))
            }
            _ = try file.read(into: &buffer, count: NDJSONReader.chunkSize)
        }
    }
}

/// Writes resources as NDJSON: one compact JSON resource per line.
public struct NDJSONWriter {
    private let output: FHIROutput
    private let writer = FHIRJSONWriter(pretty: false)
    private var line: [UInt8] = []

    /// A writer of one resource a line to `output`.
    public init(output: FHIROutput) {
        self.output = output
    }

    /// Appends one resource as a line.
    public mutating func write(_ resource: Element) throws(FHIRFormatError) {
        line.removeAll(keepingCapacity: true)
        writer.write(resource, into: &line)
        line.append(0x0A)
        try output.write(line)
    }
}
