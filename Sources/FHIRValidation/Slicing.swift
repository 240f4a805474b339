import FHIR
import Foundation
import FHIRPackages
import FHIRPath
import JSON

/// Slicing: which slice each item of a sliced element belongs to (by its discriminators), each
/// slice's cardinality, `closed`, `openAtEnd` and `ordered` rules, re-slices within a slice.
extension InstanceWalk {
    mutating func walkSliced(_ items: [Element], node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        walkSliced(Array(items.enumerated()), node: node, in: profile, location: location)
    }

    mutating func walkSliced(_ items: [(offset: Int, element: Element)], node: CompiledProfile.Node, in profile: CompiledProfile, location: InstanceLocation) {
        let definition = node.definition
        let slicing = definition.slicing!
        let url = profile.versionedURL
        let assigned: [Int?] = items.map { item in
            node.slices.firstIndex { matches(item.element, slice: $0, discriminators: slicing.discriminators, in: profile) }
        }
        for (s, slice) in node.slices.enumerated() {
            checkCardinality(assigned.count { $0 == s }, of: slice, in: profile, location: location)
        }
        var lastSlice = -1
        for (position, slice) in assigned.enumerated() {
            let item = items[position]
            let path = childLocation(location, item.element, node, index: item.offset)
            if let slice {
                if slicing.ordered && slice < lastSlice {
                    report(.init(.error, "structure", at: path, "the items of \(definition.path) are out of order: slice '\(node.slices[slice].definition.sliceName ?? "")' comes after '\(node.slices[lastSlice].definition.sliceName ?? "")' in the profile",
                                 profile: url, elementID: definition.id))
                }
                lastSlice = max(lastSlice, slice)
                continue
            }
            if slicing.rules == "closed" {
                report(.init(.error, "structure", at: path, "this element does not match any slice of \(definition.id) defined in the profile, and the slicing is closed",
                             profile: url, elementID: definition.id))
            } else if slicing.rules == "openAtEnd" && assigned[(position + 1)...].contains(where: { $0 != nil }) {
                report(.init(.error, "structure", at: path, "this element matches no slice of \(definition.id) and comes before a sliced one, but the slicing is open only at the end",
                             profile: url, elementID: definition.id))
            }
        }
        for (s, slice) in node.slices.enumerated() {
            if slice.definition.slicing != nil && !slice.slices.isEmpty {
                let members = items.indices.filter { assigned[$0] == s }.map { items[$0] }
                walkSliced(members, node: slice, in: profile, location: location)
                continue
            }
            for position in items.indices where assigned[position] == s {
                let item = items[position]
                walk(item.element, node: slice, in: profile, location: childLocation(location, item.element, node, index: item.offset))
            }
        }
        for position in items.indices where assigned[position] == nil {
            let item = items[position]
            let path = childLocation(location, item.element, node, index: item.offset)
            walk(item.element, node: node, in: profile, location: path)
            if node.isExtension {
                walkExtensionDefinition(item.element, at: definition.path, location: path)
            }
        }
    }

    /// Whether an item belongs to a slice: every discriminator matches (with none, the item
    /// must meet the slice without errors).
    mutating func matches(_ item: Element, slice: CompiledProfile.Node, discriminators: [StructureDefinition.ElementDefinition.Discriminator], in profile: CompiledProfile) -> Bool {
        if discriminators.isEmpty { return conforms(item, to: slice, in: profile) }
        for (index, discriminator) in discriminators.enumerated() {
            let plan = validator.discriminatorPlan(slice, index) { DiscriminatorPlan(discriminator, slice: slice, in: profile, walk: self) }
            if !matches(item, plan: plan) { return false }
        }
        return true
    }

    mutating func matches(_ item: Element, plan: DiscriminatorPlan) -> Bool {
        let values = discriminatorValues(item, plan: plan)
        switch plan.type {
        case "value", "pattern":
            if !plan.fixedValues.isEmpty {
                return plan.fixedValues.contains { expected, exact in values.contains { Pattern.matches($0, expected, exact: exact) } }
            }
            if let url = plan.extensionURL {
                return values.contains { $0.value == url }
            }
            if let expansion = plan.requiredExpansion {
                return values.contains { value in
                    (Self.codes(of: value) ?? []).contains { expansion.contains(system: $0.system, code: $0.code) }
                }
            }
            return false
        case "exists":
            guard let definition = plan.target?.node.definition else { return !values.isEmpty }
            if (definition.min ?? 0) >= 1 { return !values.isEmpty }
            if definition.maxIsStated && definition.max == 0 { return values.isEmpty }
            return true
        case "type":
            guard let types = plan.target?.node.definition.types else { return false }
            return values.contains { value in types.contains { $0.code == Self.typeName(of: value) } }
        case "profile":
            let profiles = plan.target?.node.definition.types?.flatMap { $0.profiles + $0.targetProfiles } ?? []
            return values.contains { value in
                profiles.contains { canonical in
                    guard let compiled = validator.profile(canonical) else { return false }
                    return conforms(value, to: compiled.root, in: compiled)
                }
            }
        default:
            return false
        }
    }

    /// Whether an item meets a definition without errors (the issues found are not kept).
    mutating func conforms(_ item: Element, to node: CompiledProfile.Node, in profile: CompiledProfile) -> Bool {
        let before = (issues, reportedOnce)
        walk(item, node: node, in: profile, location: InstanceLocation(root: ""), isResource: item.isResource)
        let failed = issues[before.0.count...].contains { $0.severity <= .error }
        (issues, reportedOnce) = before
        return !failed
    }

    /// The elements a discriminator's path reaches from an item (`code`, `url`, `$this`,
    /// `resolve()`, `extension('…').value`, `ofType(Quantity)`).
    func discriminatorValues(_ item: Element, plan: DiscriminatorPlan) -> [Element] {
        if let names = plan.names {
            // A plain path of names (`code`, `coding.system`, `url`) is followed without FHIRPath.
            var current = [item]
            for name in names {
                current = current.flatMap { element in element.children.filter { $0.name == name } }
            }
            return current
        }
        if plan.path == "$this" { return [item] }
        guard case .success(let expression) = validator.invariants.expression(plan.path) else { return [] }
        return ((try? expression.evaluate(in: invariantEnvironment(item))) ?? []).compactMap(\.element)
    }

    /// The node a discriminator's path names inside a slice: through the slice's children, or
    /// the profile or base definition of its type when the snapshot does not unroll them.
    func descendant(of slice: CompiledProfile.Node, path: String, in profile: CompiledProfile) -> (node: CompiledProfile.Node, profile: CompiledProfile)? {
        var current = (node: slice, profile: profile)
        for part in Self.pathParts(path) {
            if part == "$this" || part.hasPrefix("ofType(") || part == "resolve()" { continue }
            if part.hasPrefix("extension(") {
                let url = part.dropFirst("extension(".count).dropLast().trimmingCharacters(in: CharacterSet(charactersIn: "'\""))
                guard let next = childOrTypeChild(current, "extension") else { return nil }
                guard let found = next.node.slices.first(where: { $0.definition.types?.first?.profiles.contains { Canonical($0).url == url } ?? false }) else { return nil }
                current = (found, next.profile)
                continue
            }
            guard let next = childOrTypeChild(current, part) else { return nil }
            current = next
        }
        return current
    }

    /// Every node a discriminator's path names inside a slice, through the slices of the
    /// elements along it as well as the elements themselves.
    func descendants(of slice: CompiledProfile.Node, path: String, in profile: CompiledProfile) -> [(node: CompiledProfile.Node, profile: CompiledProfile)] {
        var current = [(node: slice, profile: profile)]
        for part in Self.pathParts(path) {
            if part == "$this" || part.hasPrefix("ofType(") || part == "resolve()" || part.hasPrefix("extension(") { continue }
            var next: [(node: CompiledProfile.Node, profile: CompiledProfile)] = []
            for candidate in current {
                guard let child = childOrTypeChild(candidate, part) else { continue }
                next.append(child)
                next += child.node.slices.map { ($0, child.profile) }
            }
            current = next
        }
        return current
    }

    private func childOrTypeChild(_ current: (node: CompiledProfile.Node, profile: CompiledProfile), _ name: String) -> (node: CompiledProfile.Node, profile: CompiledProfile)? {
        if let child = current.node.child(named: name) { return (child, current.profile) }
        guard current.node.children.isEmpty, let type = current.node.definition.types?.first else { return nil }
        let canonical = type.profiles.first ?? "http://hl7.org/fhir/StructureDefinition/" + type.code
        guard let typeProfile = validator.profile(canonical), let child = typeProfile.root.child(named: name) else { return nil }
        return (child, typeProfile)
    }

    /// A discriminator path split at the dots outside parentheses.
    static func pathParts(_ path: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var depth = 0
        for character in path {
            switch character {
            case "(": depth += 1; current.append(character)
            case ")": depth -= 1; current.append(character)
            case "." where depth == 0: parts.append(current); current = ""
            default: current.append(character)
            }
        }
        if !current.isEmpty { parts.append(current) }
        return parts
    }
}

/// What one discriminator asks of the items of one slice, worked out once per validator: the
/// node its path names, the fixed or pattern values along the path, the extension url, the
/// required binding's expansion. A class: the validator hands the one it remembers to every
/// item matched, without copying its parts.
final class DiscriminatorPlan: Sendable {
    let type: String
    let path: String
    /// The path's names when it is a plain path (followed without FHIRPath).
    let names: [String]?
    let target: (node: CompiledProfile.Node, profile: CompiledProfile)?
    /// Each fixed (exact) or pattern value along the path (R4's `bp` fixes
    /// `code.coding:SBPCode.code`, its slices discriminated by `code.coding.code`).
    let fixedValues: [(JSONValue, Bool)]
    /// For a `url` discriminator of an extension slice: the extension's url.
    let extensionURL: String?
    let requiredExpansion: ValueSetExpansion?

    init(_ discriminator: StructureDefinition.ElementDefinition.Discriminator, slice: CompiledProfile.Node,
         in profile: CompiledProfile, walk: InstanceWalk) {
        type = discriminator.type
        path = discriminator.path
        names = path.contains("(") || path.contains("$") ? nil : path.split(separator: ".").map(String.init)
        target = walk.descendant(of: slice, path: path, in: profile)
        let isValue = type == "value"
        fixedValues = walk.descendants(of: slice, path: path, in: profile).compactMap { candidate -> (JSONValue, Bool)? in
            if let fixed = candidate.node.definition.fixed { return (fixed.value, isValue) }
            if let pattern = candidate.node.definition.pattern { return (pattern.value, false) }
            return nil
        }
        extensionURL = path == "url" ? slice.definition.types?.first?.profiles.first.map { Canonical($0).url } : nil
        if let binding = target?.node.definition.binding, binding.strength == "required", let valueSet = binding.valueSet {
            requiredExpansion = walk.validator.terminology.expansion(of: valueSet)
        } else {
            requiredExpansion = nil
        }
    }
}
