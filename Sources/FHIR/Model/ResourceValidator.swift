/// Checks a tree against the R4 definitions: required elements present (min cardinality), single
/// elements not repeated (max), primitive values in their lexical forms, codes in required value
/// sets, and no content the definitions do not know. What the gateway writes must pass it.
public struct ResourceValidator: Sendable {
    /// A validator over the R4 definitions.
    public init() {}

    /// Every problem found, each with its element path (`Observation.component[1].code`).
    public func validate(_ resource: Element) -> [String] {
        var problems: [String] = []
        check(resource, path: resource.resourceType ?? resource.name, into: &problems)
        return problems
    }

    private func check(_ element: Element, path: String, into problems: inout [String]) {
        guard let type = element.definition else {
            problems.append("\(path): content the R4 definitions do not describe")
            return
        }
        if type.kind == .primitive {
            if let value = element.value, let kind = type.primitiveKind, !kind.isValid(value) {
                problems.append("\(path): '\(value)' is not a valid \(type.name) (\(kind.ruleDescription))")
            }
            if element.value == nil && element.children.isEmpty {
                problems.append("\(path): a primitive with neither a value nor extensions")
            }
        }
        var counts: [String: Int] = [:]
        for child in element.children { counts[child.name, default: 0] += 1 }
        for definition in type.elements {
            let n = counts[definition.name] ?? 0
            if n < definition.min {
                problems.append("\(path).\(definition.name): required (\(definition.min)..\(definition.max.map(String.init) ?? "*")), missing")
            }
            if let max = definition.max, n > max {
                problems.append("\(path).\(definition.name): at most \(max), found \(n)")
            }
        }
        var seen: [String: Int] = [:]
        for child in element.children {
            let i = seen[child.name, default: 0]
            seen[child.name] = i + 1
            let childPath = (counts[child.name] ?? 0) > 1 || (type.element(named: child.name)?.isRepeating ?? false) ? "\(path).\(child.name)[\(i)]" : "\(path).\(child.name)"
            guard let definition = type.element(named: child.name) else {
                problems.append("\(childPath): not an element of \(type.name)")
                continue
            }
            if let binding = definition.binding, let code = child.value, child.definition?.primitiveKind == .code, !binding.contains(code) {
                problems.append("\(childPath): '\(code)' is not in \(binding.valueSet)")
            }
            if child.isResource {
                check(child, path: child.resourceType ?? childPath, into: &problems)
            } else {
                check(child, path: childPath, into: &problems)
            }
        }
    }
}
