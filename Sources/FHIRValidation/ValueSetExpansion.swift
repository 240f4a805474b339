import FHIRPackages
import Foundation
import JSON

/// The codes of a value set, expanded from its `compose` over the CodeSystems at hand (or taken
/// from its `expansion`). When some part cannot be expanded (a code system not loaded, or one
/// such as LOINC or UCUM that no package enumerates), the expansion says so: what it holds is
/// then only part of the set, and a code outside it is not known to be wrong.
public struct ValueSetExpansion: Sendable {
    /// A code in a system (`system` empty when the value set names none).
    public struct Code: Sendable, Hashable {
        public let system: String
        public let code: String
    }

    public let valueSet: String
    public let codes: Set<Code>
    /// Why the expansion is partial, nil when it is complete.
    public let incompleteBecause: String?
    /// The codes without their systems, for `code` elements (whose system is the value set's).
    public let bareCodes: Set<String>

    init(valueSet: String, codes: Set<Code>, incompleteBecause: String?) {
        self.valueSet = valueSet
        self.codes = codes
        self.incompleteBecause = incompleteBecause
        self.bareCodes = Set(codes.map(\.code))
    }

    public var isComplete: Bool { incompleteBecause == nil }

    public func contains(system: String?, code: String) -> Bool {
        guard let system else { return bareCodes.contains(code) }
        return codes.contains(Code(system: system, code: code))
    }
}

/// Expands value sets over a `ConformanceSet`, each once (expansions are cached; the type is
/// shared across threads).
public final class ValueSetExpander: @unchecked Sendable {
    // @unchecked: the only mutable state is `cache`, read and written under `lock`.
    private let conformance: ConformanceSet
    private let lock = NSLock()
    private var cache: [String: ValueSetExpansion?] = [:]

    public init(conformance: ConformanceSet) {
        self.conformance = conformance
    }

    /// The expansion of a value set by canonical, or nil when no such value set is loaded.
    public func expansion(of canonical: String) -> ValueSetExpansion? {
        lock.lock()
        if let cached = cache[canonical] { lock.unlock(); return cached }
        lock.unlock()
        var visiting: Set<String> = []
        let result = expand(canonical, visiting: &visiting)
        lock.lock()
        cache[canonical] = result
        lock.unlock()
        return result
    }

    private func expand(_ canonical: String, visiting: inout Set<String>) -> ValueSetExpansion? {
        guard let resource = conformance.resolve(canonical, type: "ValueSet") else { return nil }
        guard visiting.insert(resource.url).inserted else {
            return ValueSetExpansion(valueSet: canonical, codes: [], incompleteBecause: "it includes itself")
        }
        defer { visiting.remove(resource.url) }
        let json = resource.json
        guard let compose = json["compose"] else {
            let contains = Self.flattenContains(json["expansion"]?["contains"]?.arrayValue ?? [])
            return ValueSetExpansion(valueSet: canonical, codes: contains,
                                     incompleteBecause: json["expansion"] == nil ? "it has neither compose nor expansion" : nil)
        }
        var codes: Set<ValueSetExpansion.Code> = []
        var incomplete: String?
        for include in compose["include"]?.arrayValue ?? [] {
            let part = expand(include: include, visiting: &visiting)
            codes.formUnion(part.codes)
            incomplete = incomplete ?? part.incompleteBecause
        }
        for exclude in compose["exclude"]?.arrayValue ?? [] {
            // An exclusion that cannot be expanded leaves the set as it is: nothing wrongly refused.
            codes.subtract(expand(include: exclude, visiting: &visiting).codes)
        }
        return ValueSetExpansion(valueSet: canonical, codes: codes, incompleteBecause: incomplete)
    }

    /// One `include` (or `exclude`): its concepts, or its system's codes (filtered), intersected
    /// with the value sets it names.
    private func expand(include: JSONValue, visiting: inout Set<String>) -> (codes: Set<ValueSetExpansion.Code>, incompleteBecause: String?) {
        var codes: Set<ValueSetExpansion.Code>?
        var incomplete: String?
        if let system = include["system"]?.stringValue {
            if let concepts = include["concept"]?.arrayValue {
                codes = Set(concepts.compactMap { $0["code"]?.stringValue.map { ValueSetExpansion.Code(system: system, code: $0) } })
            } else {
                let found = systemCodes(system, filters: include["filter"]?.arrayValue ?? [])
                codes = found.codes
                incomplete = found.incompleteBecause
            }
        }
        for valueSet in include["valueSet"]?.arrayValue?.compactMap(\.stringValue) ?? [] {
            guard let other = expand(valueSet, visiting: &visiting) else {
                incomplete = incomplete ?? "value set \(valueSet) is not loaded"
                continue
            }
            codes = codes.map { $0.intersection(other.codes) } ?? other.codes
            incomplete = incomplete ?? other.incompleteBecause
        }
        return (codes ?? [], incomplete)
    }

    /// The codes of a code system, filtered (`is-a`, `descendent-of`, `is-not-a`, `=`, `in`,
    /// `exists`), when the system is loaded with its concepts.
    private func systemCodes(_ system: String, filters: [JSONValue]) -> (codes: Set<ValueSetExpansion.Code>, incompleteBecause: String?) {
        guard let codeSystem = conformance.resolve(system, type: "CodeSystem") else {
            return ([], "code system \(system) is not loaded")
        }
        let content = codeSystem.json["content"]?.stringValue ?? "complete"
        guard content == "complete" else {
            return ([], "code system \(system) is not enumerated here (content: \(content))")
        }
        var concepts: [(code: String, ancestors: [String], properties: [String: String])] = []
        func walk(_ list: [JSONValue], ancestors: [String]) {
            for concept in list {
                guard let code = concept["code"]?.stringValue else { continue }
                var properties: [String: String] = [:]
                for property in concept["property"]?.arrayValue ?? [] {
                    guard let name = property["code"]?.stringValue, case .object(let members) = property else { continue }
                    for (key, value) in members where key.hasPrefix("value") {
                        properties[name] = value.stringValue ?? value.boolValue.map { $0 ? "true" : "false" } ?? value.numberValue.map { String($0) }
                    }
                }
                concepts.append((code, ancestors, properties))
                walk(concept["concept"]?.arrayValue ?? [], ancestors: ancestors + [code])
            }
        }
        walk(codeSystem.json["concept"]?.arrayValue ?? [], ancestors: [])
        var kept = concepts
        for filter in filters {
            let property = filter["property"]?.stringValue ?? ""
            let op = filter["op"]?.stringValue ?? ""
            let value = filter["value"]?.stringValue ?? ""
            switch op {
            case "is-a": kept = kept.filter { $0.code == value || $0.ancestors.contains(value) }
            case "descendent-of": kept = kept.filter { $0.ancestors.contains(value) }
            case "is-not-a": kept = kept.filter { $0.code != value && !$0.ancestors.contains(value) }
            case "=": kept = kept.filter { property == "concept" ? $0.code == value : $0.properties[property] == value }
            case "in":
                let values = Set(value.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
                kept = kept.filter { property == "concept" ? values.contains($0.code) : $0.properties[property].map(values.contains) ?? false }
            case "exists": kept = kept.filter { ($0.properties[property] != nil) == (value == "true") }
            default:
                return ([], "filter '\(property) \(op) \(value)' on \(system) is not supported")
            }
        }
        return (Set(kept.map { ValueSetExpansion.Code(system: system, code: $0.code) }), nil)
    }

    private static func flattenContains(_ list: [JSONValue]) -> Set<ValueSetExpansion.Code> {
        var codes: Set<ValueSetExpansion.Code> = []
        for item in list {
            if let code = item["code"]?.stringValue { codes.insert(.init(system: item["system"]?.stringValue ?? "", code: code)) }
            codes.formUnion(flattenContains(item["contains"]?.arrayValue ?? []))
        }
        return codes
    }
}
