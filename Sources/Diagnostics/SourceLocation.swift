/// Where something is: a file (or other source name), 1-based line and column, and for FHIR
/// documents the element path (`Bundle.entry[3].resource.status`). Every diagnostic CareGate
/// prints carries one: FHIR readers, the FHIRPath checker and the mapping validator alike.
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The file or other source name, if known.
    public var file: String?
    /// 1-based line, or 0 when unknown.
    public var line: Int
    /// 1-based column in characters, or 0 when unknown.
    public var column: Int
    /// The element path in FHIRPath style, with indexes on repeated elements ("" when none).
    public var path: String

    public init(file: String? = nil, line: Int = 0, column: Int = 0, path: String = "") {
        self.file = file
        self.line = line
        self.column = column
        self.path = path
    }

    /// `file.json:12:5` (or as much of it as is known).
    public var position: String {
        var parts: [String] = []
        if let file { parts.append(file) }
        if line > 0 { parts.append(String(line)); if column > 0 { parts.append(String(column)) } }
        return parts.joined(separator: ":")
    }

    /// The position, then the path: `file.json:12:5: Observation.status`.
    public var description: String {
        let position = self.position
        if path.isEmpty { return position }
        return position.isEmpty ? path : "\(position): \(path)"
    }

    /// File, then line, then column: the order a reader goes through a file.
    public static func < (a: SourceLocation, b: SourceLocation) -> Bool {
        (a.file ?? "", a.line, a.column, a.path) < (b.file ?? "", b.line, b.column, b.path)
    }
}
