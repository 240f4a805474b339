import Diagnostics
import FHIR
import Foundation

/// Validates the resources in FHIR files (JSON, XML, NDJSON; a Bundle with its entries), each
/// against the profiles it claims and any asked for: what `caregate validate` runs on resources.
public struct ResourceFileValidation: Sendable {
    /// One resource's report, with where it was read.
    public struct Result: Sendable {
        /// The file it was read from.
        public let file: String
        /// Its line, for NDJSON (0 for a whole-file resource).
        public let line: Int
        /// `Observation/weight` (its type alone when it has no id).
        public let resource: String
        public let report: ValidationReport

        /// The report's issues as diagnostics, at the resource's file and line, with the
        /// element's FHIRPath location as the path: one finding, rendered as text, GitHub
        /// annotations or JSON by `DiagnosticFormat`.
        public var diagnostics: [Diagnostic] {
            report.issues.map { issue in
                let severity: Diagnostic.Severity = switch issue.severity {
                case .fatal, .error: .error
                case .warning: .warning
                case .information: .note
                }
                var message = issue.message
                if let element = issue.elementID { message += " (\(element)" + (issue.profile.map { " in \($0)" } ?? "") + ")" }
                return Diagnostic(severity, SourceLocation(file: file, line: line, path: issue.location), message, code: issue.code)
            }
        }
    }

    public let validator: ProfileValidator
    /// Profiles every resource is also checked against (`--profile`), beside those it claims.
    public let profiles: [String]

    public init(validator: ProfileValidator, profiles: [String] = []) {
        self.validator = validator
        self.profiles = profiles
    }

    /// Every resource in the file validated; a file that cannot be read is one fatal result.
    public func validate(file: String) -> [Result] {
        let options = ParseOptions(lenient: true, sourceName: file)
        do {
            if try FHIRFormat.detect(path: file) == .ndjson {
                let reader = try NDJSONReader(path: file, options: options)
                var results: [Result] = []
                while let line = try reader.nextLine() {
                    results.append(result(try line.parse(options: options).resource, file: file, line: line.number))
                }
                return results
            }
            return [result(try FHIRDocument.read(contentsOf: file, options: options).resource, file: file, line: 0)]
        } catch {
            let issue = ValidationIssue(.fatal, "structure", at: "", error.issues.first?.message ?? "\(error)")
            let line = error.issues.first?.location.line ?? 0
            return [Result(file: file, line: line, resource: "(unreadable)", report: ValidationReport(issues: [issue]))]
        }
    }

    private func result(_ resource: Element, file: String, line: Int) -> Result {
        Result(file: file, line: line, resource: resource.relativeReference ?? resource.resourceType ?? resource.name,
               report: validator.validate(resource, against: profiles))
    }
}
