/// A place in a mapping file: path, 1-based line and column.
public struct MappingLocation: Sendable, Hashable, CustomStringConvertible {
    public var file: String
    public var line: Int
    public var column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    public var description: String { "\(file):\(line):\(column)" }
}

/// A finding about a mapping file, printed the way compilers print theirs:
/// `Mappings/careplan.yaml:12:15: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?`
public struct MappingDiagnostic: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable { case error, warning }

    public var severity: Severity
    public var location: MappingLocation
    public var message: String

    public init(_ severity: Severity, _ location: MappingLocation, _ message: String) {
        self.severity = severity
        self.location = location
        self.message = message
    }

    public var description: String { "\(location): \(severity.rawValue): \(message)" }

    /// A GitHub Actions workflow command, so CI shows the finding on the line.
    public var githubAnnotation: String {
        let text = message.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\n", with: "%0A")
        return "::\(severity.rawValue) file=\(location.file),line=\(location.line),col=\(location.column)::\(text)"
    }
}

/// Mapping files that cannot be used, with every finding.
public struct MappingError: Error, Sendable, CustomStringConvertible {
    public var diagnostics: [MappingDiagnostic]

    public init(_ diagnostics: [MappingDiagnostic]) {
        self.diagnostics = diagnostics
    }

    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}
