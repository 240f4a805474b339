import JSON

/// One finding, printed the way compilers print theirs, whatever found it:
/// `Mappings/careplan.yaml:12:15: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?`
public struct Diagnostic: Sendable, Hashable, CustomStringConvertible, Error {
    public enum Severity: String, Sendable, Hashable, Comparable, CaseIterable {
        case error, warning, note

        public static func < (a: Severity, b: Severity) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }
    }

    public var severity: Severity
    public var location: SourceLocation
    public var message: String
    /// What sort of finding, for programs (a FHIR reader's `syntax`, `binding`...); nil when
    /// the message is all there is.
    public var code: String?

    public init(_ severity: Severity, _ location: SourceLocation, _ message: String, code: String? = nil) {
        self.severity = severity
        self.location = location
        self.message = message
        self.code = code
    }

    /// `file.json:12:5: error: Observation.status: expected one of ..., found "done"`.
    public var description: String {
        let position = location.position
        let path = location.path.isEmpty ? "" : location.path + ": "
        return (position.isEmpty ? "" : position + ": ") + "\(severity.rawValue): \(path)\(message)"
    }

    /// A GitHub Actions workflow command, so CI shows the finding on its line.
    public var githubAnnotation: String {
        let text = (location.path.isEmpty ? "" : location.path + ": ") + message
        let escaped = text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
        let command = severity == .note ? "notice" : severity.rawValue
        var properties: [String] = []
        if let file = location.file { properties.append("file=\(file)") }
        if location.line > 0 { properties.append("line=\(location.line)") }
        if location.column > 0 { properties.append("col=\(location.column)") }
        let where_ = properties.isEmpty ? "" : " " + properties.joined(separator: ",")
        return "::\(command)\(where_)::\(escaped)"
    }

    /// The finding as data: file, line, column, path, severity, code and message.
    public var json: JSONValue {
        var members: [(String, JSONValue)] = []
        if let file = location.file { members.append(("file", .init(file))) }
        if location.line > 0 { members.append(("line", .init(location.line))) }
        if location.column > 0 { members.append(("column", .init(location.column))) }
        if !location.path.isEmpty { members.append(("path", .init(location.path))) }
        members.append(("severity", .init(severity.rawValue)))
        if let code { members.append(("code", .init(code))) }
        members.append(("message", .init(message)))
        return .object(members)
    }
}

/// How a list of diagnostics is shown: compiler-style lines, GitHub annotations, or JSON.
public enum DiagnosticFormat: String, Sendable, CaseIterable {
    case text, github, json

    /// The diagnostics rendered, one per line (`json`: one array).
    public func render(_ diagnostics: [Diagnostic]) -> String {
        switch self {
        case .text: diagnostics.map(\.description).joined(separator: "\n")
        case .github: diagnostics.map(\.githubAnnotation).joined(separator: "\n")
        case .json: JSONValue.array(diagnostics.map(\.json)).serialized()
        }
    }
}
