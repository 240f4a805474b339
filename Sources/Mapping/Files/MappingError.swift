import Diagnostics

/// Mapping files that cannot be used, with every finding.
public struct MappingError: Error, Sendable, CustomStringConvertible {
    /// Every problem found, each with its file, line and column.
    public var diagnostics: [Diagnostic]

    /// An error of these diagnostics.
    public init(_ diagnostics: [Diagnostic]) {
        self.diagnostics = diagnostics
    }

    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}
