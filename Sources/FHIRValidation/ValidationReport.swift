import FHIR

/// One finding: how bad, what kind (OperationOutcome's issue type), where in the instance (a
/// FHIRPath location, `Observation.component[1].valueQuantity.code`), what, and which profile
/// and element stated the rule, so it can be set beside what the HL7 validator says.
public struct ValidationIssue: Sendable, Hashable, CustomStringConvertible {
    public enum Severity: String, Sendable, Comparable, CaseIterable {
        case fatal, error, warning, information
        public static func < (a: Severity, b: Severity) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }
    }

    public var severity: Severity
    /// OperationOutcome's `issue.code`: `structure`, `required`, `value`, `invariant`,
    /// `code-invalid`, `not-supported`, `informational`, …
    public var code: String
    public var location: String
    public var message: String
    /// The profile (`url|version`) whose rule this is.
    public var profile: String?
    /// The element id in that profile (`Observation.component:systolic.value[x]`).
    public var elementID: String?
    /// The invariant's key (`vs-2`), for invariant issues.
    public var key: String?

    public init(_ severity: Severity, _ code: String, at location: String, _ message: String,
                profile: String? = nil, elementID: String? = nil, key: String? = nil) {
        self.severity = severity
        self.code = code
        self.location = location
        self.message = message
        self.profile = profile
        self.elementID = elementID
        self.key = key
    }

    public var description: String {
        var text = "\(severity.rawValue): \(location): \(message)"
        if let elementID { text += " [\(elementID)" + (profile.map { " in \($0)" } ?? "") + "]" }
        return text
    }
}

/// Everything validation found about one resource (a Bundle's entries included).
public struct ValidationReport: Sendable {
    public var issues: [ValidationIssue]

    public init(issues: [ValidationIssue] = []) {
        self.issues = issues
    }

    /// The errors and fatal issues.
    public var errors: [ValidationIssue] { issues.filter { $0.severity <= .error } }

    /// Whether nothing is an error.
    public var isValid: Bool { !issues.contains { $0.severity <= .error } }

    /// The report as an R4 OperationOutcome: each issue's severity, code, text, location
    /// (`expression`), and the profile and element in `diagnostics`. An empty report is one
    /// `information` issue saying so, since an OperationOutcome needs one.
    public var operationOutcome: Element {
        var outcome = Element(resourceType: "OperationOutcome")
        let all = issues.isEmpty ? [ValidationIssue(.information, "informational", at: "", "no issues found")] : issues
        for issue in all {
            var entry = Element(name: "issue", type: "OperationOutcome.issue")
            entry.setValue(issue.severity.rawValue, for: "severity")
            entry.setValue(issue.code, for: "code")
            var details = Element(name: "details", type: "CodeableConcept")
            details.setValue(issue.message, for: "text")
            entry.append(details)
            var diagnostics: [String] = []
            if let key = issue.key { diagnostics.append("invariant \(key)") }
            if let elementID = issue.elementID { diagnostics.append("element \(elementID)") }
            if let profile = issue.profile { diagnostics.append("profile \(profile)") }
            if !diagnostics.isEmpty { entry.setValue(diagnostics.joined(separator: "; "), for: "diagnostics") }
            if !issue.location.isEmpty { entry.append(Element(name: "expression", type: "string", value: issue.location)) }
            outcome.append(entry)
        }
        return outcome
    }
}
