import Diagnostics

/// A problem found while reading a FHIR document.
public struct ParseIssue: Sendable, Hashable, CustomStringConvertible, Error {
    /// The one severity every diagnostic has (`Diagnostic.Severity`).
    public typealias Severity = Diagnostic.Severity

    /// What sort of problem.
    public enum Code: String, Sendable, Hashable {
        /// The bytes are not well-formed JSON or XML.
        case syntax
        /// A construct FHIR forbids or CareGate refuses for safety (DTDs, entities, processing of `null`).
        case forbidden
        /// A property or element the R4 definitions do not have (kept, and reported).
        case unknownElement
        /// A `resourceType` or root element that is not an R4 resource.
        case unknownResourceType
        /// A value of the wrong JSON kind or shape (string for a number, object for an array...).
        case structure
        /// A primitive that breaks its type's lexical rules.
        case invalidValue
        /// A code outside its element's required value set.
        case binding
        /// Too many (or too few) repetitions.
        case cardinality
        /// A configured limit (document size, nesting depth) was hit.
        case limit
        /// The document could not be read.
        case io
    }

    /// Error or warning.
    public var severity: Severity
    /// What kind of problem, for code that reacts to some.
    public var code: Code
    /// What is wrong, in words.
    public var message: String
    /// Where: source, line, column and element path.
    public var location: SourceLocation

    /// An issue at `location`.
    public init(_ severity: Severity, _ code: Code, _ message: String, at location: SourceLocation) {
        self.severity = severity
        self.code = code
        self.message = message
        self.location = location
    }

    /// The issue as a diagnostic, its code kept for programs.
    public var diagnostic: Diagnostic { Diagnostic(severity, location, message, code: code.rawValue) }

    /// `file.json:12:5: error: Observation.status: expected one of ..., found "done"`.
    public var description: String { diagnostic.description }
}

/// Why a FHIR document could not be read.
public enum FHIRFormatError: Error, Sendable, CustomStringConvertible {
    /// The document is not well-formed, or breaks a safety rule; reading stopped here.
    case malformed(ParseIssue)
    /// The document is well-formed but not valid R4; every error found is listed, warnings too.
    case invalid([ParseIssue])
    /// A configured limit was hit.
    case limitExceeded(ParseIssue)
    /// A file could not be opened, read or written; `reason` says which and why.
    case io(path: String, reason: String)

    /// The issues this error carries.
    public var issues: [ParseIssue] {
        switch self {
        case .malformed(let issue), .limitExceeded(let issue): [issue]
        case .invalid(let issues): issues
        case .io(let path, let reason): [ParseIssue(.error, .io, reason, at: SourceLocation(file: path))]
        }
    }

    public var description: String {
        switch self {
        case .io(let path, let reason):
            return "\(path): \(reason)"
        default:
            let errors = issues.filter { $0.severity == .error }
            let shown = errors.prefix(20).map(\.description).joined(separator: "\n")
            return errors.count > 20 ? shown + "\n... and \(errors.count - 20) more errors" : shown
        }
    }
}

/// How strictly, and within which limits, documents are read.
public struct ParseOptions: Sendable {
    /// Largest document accepted, in bytes (default 1 GiB). Streams (NDJSON, Bundle entries)
    /// apply it per resource.
    public var maximumDocumentSize: Int
    /// Deepest nesting of objects, arrays or elements accepted (default 128).
    public var maximumDepth: Int
    /// When true, invalid values, codes and cardinalities are warnings rather than errors.
    public var lenient: Bool
    /// The name used in locations (usually the file path).
    public var sourceName: String?
    /// Resources read only in part (JSON only; nil reads every resource whole).
    public var skim: Skim?

    /// Options; the defaults read strictly, up to 1 GiB and 128 levels deep.
    public init(maximumDocumentSize: Int = 1 << 30, maximumDepth: Int = 128, lenient: Bool = false, sourceName: String? = nil) {
        self.maximumDocumentSize = maximumDocumentSize
        self.maximumDepth = maximumDepth
        self.lenient = lenient
        self.sourceName = sourceName
    }

    /// Which resources a JSON read skims: for a reader that keeps each resource's text and needs
    /// only a few elements of most resources (the import's staging: a Claim's id and patient).
    /// A skimmed resource's tree holds its `id` and `keptElements`; the rest of its JSON is
    /// checked as JSON and skipped, neither validated nor kept. A Bundle's entries are skimmed,
    /// never resources inside other resources (`contained`, a Parameters' values).
    public struct Skim: Sendable {
        /// Types read whole (those the reader maps).
        public var wholeTypes: Set<String>
        /// Top-level elements of a skimmed resource that are read (validated) into its tree.
        public var keptElements: Set<String>
        /// Whether the document's root is skimmed too (an NDJSON line, whose text is the
        /// resource's); a root Bundle never is.
        public var root: Bool

        /// What to skim.
        public init(wholeTypes: Set<String>, keptElements: Set<String>, root: Bool) {
            self.wholeTypes = wholeTypes
            self.keptElements = keptElements
            self.root = root
        }

        /// The same skim, with the document's root skimmed or not.
        public func skimmingRoot(_ root: Bool) -> Skim {
            var skim = self
            skim.root = root
            return skim
        }

        func skims(_ type: String, isRoot: Bool) -> Bool {
            type != "Bundle" && !wholeTypes.contains(type) && (!isRoot || root)
        }
    }
}

/// A resource read from a document, with the warnings found on the way.
public struct ParsedResource: Sendable {
    /// The resource's root element.
    public var resource: Element
    /// Warnings (unknown elements kept, and with `lenient`, demoted errors).
    public var warnings: [ParseIssue]
}
