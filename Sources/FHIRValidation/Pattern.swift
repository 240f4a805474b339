import FHIR
import JSON

/// `fixed[x]` and `pattern[x]` against an instance element: a pattern's every value must be
/// found in the instance (for a repeating element, each pattern item in some instance item); a
/// fixed value must be the instance exactly.
enum Pattern {
    static func matches(_ element: Element, _ expected: JSONValue, exact: Bool) -> Bool {
        switch expected {
        case .object(let members):
            for (key, value) in members where key != "id" && !key.hasPrefix("_") {
                let items = children(of: element, named: key)
                if case .array(let expectedItems) = value {
                    if exact {
                        guard items.count == expectedItems.count, zip(items, expectedItems).allSatisfy({ matches($0, $1, exact: true) }) else { return false }
                    } else {
                        guard expectedItems.allSatisfy({ wanted in items.contains { matches($0, wanted, exact: false) } }) else { return false }
                    }
                } else {
                    if exact {
                        guard items.count == 1, matches(items[0], value, exact: true) else { return false }
                    } else {
                        guard items.contains(where: { matches($0, value, exact: false) }) else { return false }
                    }
                }
            }
            if exact {
                let names = Set(members.map { baseName($0.0, in: element) })
                return element.children.allSatisfy { names.contains($0.name) || $0.name == "id" || $0.name == "extension" }
            }
            return true
        case .string(let text):
            return element.value == text
        case .bool(let flag):
            return element.value == (flag ? "true" : "false")
        case .number(let number):
            return element.value.flatMap(Double.init) == number
        case .array(let items):
            return items.contains { matches(element, $0, exact: exact) }
        case .null:
            return true
        }
    }

    /// The children a JSON member names: by name, or a choice's JSON spelling (`valueQuantity`).
    static func children(of element: Element, named key: String) -> [Element] {
        let direct = element.children.filter { $0.name == key }
        if !direct.isEmpty { return direct }
        let base = baseName(key, in: element)
        guard base != key else { return [] }
        let type = String(key.dropFirst(base.count))
        return element.children.filter { $0.name == base && ($0.typeName?.lowercased() == type.lowercased()) }
    }

    /// The element name a JSON member stands for (`value` for `valueQuantity`).
    static func baseName(_ key: String, in element: Element) -> String {
        guard let definition = element.definition, definition.element(named: key) == nil else { return key }
        for child in definition.elements where child.isChoice && key.hasPrefix(child.name) && key.count > child.name.count {
            return child.name
        }
        return key
    }
}
