import Diagnostics
import FHIR

/// One rule an EHR sets on what it takes, declared in a mapping file's `ehr-rules` table (not
/// coded per vendor), with its place there:
///
/// ```yaml
/// tables:
///   ehr-rules:
///     flowsheet-rows:            # Epic: each organization's flowsheet rows as extra codings
///       add-codings:
///         "http://loinc.org|29463-7": {system: "urn:oid:1.2.840.114350.1.13.0.1.7.2.707679", code: "14", display: WEIGHT}
///     final-only:
///       accept-statuses: [final]
///     listed-vitals:             # Oracle Health: only these vital signs, components only for two panels
///       accept-codes: ["http://loinc.org|29463-7", "http://loinc.org|85354-9"]
///       components-only-for: ["http://loinc.org|85354-9"]
///       accept-units: {"http://loinc.org|29463-7": [kg, "[lb_av]"]}
/// ```
///
/// Codings are added first; then each rule's checks refuse a resource that breaks them, and the
/// outcome becomes a dead letter naming the rule, its file and line (`SiteRule.Refusal`).
public struct SiteRule: Sendable, Hashable {
    /// The rule's name (its key in `ehr-rules`).
    public var name: String
    /// Where it is declared.
    public var location: SourceLocation
    /// Codings added to an Observation's code (or a component's) with this `system|code`.
    public var addCodings: [String: [ExportCoding]] = [:]
    /// The only `system|code`s the EHR takes for an Observation (nil: any).
    public var acceptCodes: Set<String>?
    /// By `system|code`, the only UCUM units the EHR takes for its value (an Observation's or a
    /// component's).
    public var acceptUnits: [String: Set<String>] = [:]
    /// The only Observations (by `system|code`) that may have components (nil: any).
    public var componentsOnlyFor: Set<String>?
    /// The only statuses the EHR takes, of any resource sent (nil: any).
    public var acceptStatuses: Set<String>?

    /// A rule named `name` at `location`, with nothing set.
    public init(name: String, location: SourceLocation) {
        self.name = name
        self.location = location
    }

    /// Why a rule refused a resource, naming the rule and where it is declared.
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The rule.
        public var rule: String
        /// Where the rule is declared.
        public var location: SourceLocation
        /// What it refused, in words.
        public var reason: String

        public var description: String {
            "refused by the site rule '\(rule)' (\(location.file ?? "<input>"):\(location.line)): \(reason)"
        }
    }

    /// Adds this rule's codings to an Observation.
    public func addCodings(to resource: inout Element) {
        guard !addCodings.isEmpty, resource.resourceType == "Observation" else { return }
        Self.addCodings(addCodings, to: &resource, at: "code")
        for i in resource.children.indices where resource.children[i].name == "component" {
            Self.addCodings(addCodings, to: &resource.children[i], at: "code")
        }
    }

    static func addCodings(_ table: [String: [ExportCoding]], to element: inout Element, at name: String) {
        guard var code = element[name] else { return }
        let present = Set(Self.codes(code))
        let added = present.flatMap { table[$0] ?? [] }.filter { !present.contains("\($0.system)|\($0.code)") }
        guard !added.isEmpty else { return }
        for coding in added { code.append(.coding(coding)) }
        element.removeChildren(named: name)
        element.append(code)
    }

    /// The refusal of a resource this rule refuses, or nil.
    public func check(_ resource: Element) -> Refusal? {
        let type = resource.resourceType ?? "resource"
        if let acceptStatuses, let status = resource.string("status"), !acceptStatuses.contains(status) {
            return refusal("the EHR takes no \(type) with status \(status) (only \(acceptStatuses.sorted().joined(separator: ", ")))")
        }
        guard type == "Observation" else { return nil }
        let codes = resource["code"].map(Self.codes) ?? []
        if let acceptCodes, !codes.contains(where: acceptCodes.contains) {
            return refusal("the EHR takes no Observation coded \(codes.first ?? "(no coding)")")
        }
        let components = resource.children(named: "component")
        if let componentsOnlyFor, !components.isEmpty, !codes.contains(where: componentsOnlyFor.contains) {
            return refusal("the EHR takes components only for \(componentsOnlyFor.sorted().joined(separator: ", ")), not for \(codes.first ?? "(no coding)")")
        }
        var parts = [("Observation.valueQuantity.code", resource)]
        for (i, component) in components.enumerated() { parts.append(("Observation.component[\(i)].valueQuantity.code", component)) }
        for (place, part) in parts {
            guard let value = part["value"], value.typeName == "Quantity", let unit = value.string("code") else { continue }
            for code in part["code"].map(Self.codes) ?? [] {
                if let units = acceptUnits[code], !units.contains(unit) {
                    return refusal("\(place): the EHR takes \(code) in \(units.sorted().joined(separator: ", ")), not \(unit)")
                }
            }
        }
        return nil
    }

    func refusal(_ reason: String) -> Refusal { Refusal(rule: name, location: location, reason: reason) }

    /// A CodeableConcept's codings as `system|code`.
    static func codes(_ concept: Element) -> [String] {
        concept.children(named: "coding").compactMap { c in c.string("system").flatMap { s in c.string("code").map { "\(s)|\($0)" } } }
    }
}

/// A site's rules, in the order they are declared: what an export applies to each outcome.
extension Array where Element == SiteRule {
    /// Applies every rule to the resources of one outcome: codings added, then the first
    /// refusal (in the rules' order) returned, or nil when every rule takes them. Provenances,
    /// which the gateway makes about what is sent, are not the EHR's data rules' business.
    public func apply(to resources: inout [FHIR.Element]) -> SiteRule.Refusal? {
        guard !isEmpty else { return nil }
        for rule in self { for i in resources.indices { rule.addCodings(to: &resources[i]) } }
        for rule in self {
            for resource in resources where resource.resourceType != "Provenance" {
                if let refusal = rule.check(resource) { return refusal }
            }
        }
        return nil
    }
}
