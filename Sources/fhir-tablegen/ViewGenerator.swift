// Generates typed views (`R4.CarePlan`, `R4.Quantity`, `R4.CarePlan.Activity`...) from the type table.

/// The resources and datatypes that get typed views; their backbone elements come along.
let viewedTypes: [String] = [
    "Patient", "Practitioner", "PractitionerRole", "CareTeam", "CarePlan", "MedicationRequest", "ServiceRequest",
    "Observation", "Bundle", "OperationOutcome", "Provenance",
    "Timing", "Dosage", "Quantity", "Range", "Ratio", "Period", "CodeableConcept", "Coding", "Reference", "Identifier",
    "HumanName", "ContactPoint", "Address", "Annotation", "Meta", "Narrative", "Extension",
]

/// Datatypes viewed through another view (they specialise Quantity).
let viewAliases: [String: String] = ["Age": "Quantity", "Count": "Quantity", "Distance": "Quantity", "Duration": "Quantity",
                                     "SimpleQuantity": "Quantity", "MoneyQuantity": "Quantity"]

let swiftKeywords: Set<String> = ["associatedtype", "class", "deinit", "enum", "extension", "fileprivate", "func", "import",
    "init", "inout", "internal", "let", "open", "operator", "private", "protocol", "public", "rethrows", "static", "struct",
    "subscript", "typealias", "var", "break", "case", "continue", "default", "defer", "do", "else", "fallthrough", "for",
    "guard", "if", "in", "repeat", "return", "switch", "where", "while", "as", "catch", "false", "is", "nil", "super",
    "self", "Self", "throw", "throws", "true", "try", "Type", "Protocol", "any", "some"]

struct ViewGenerator {
    struct TypeInfo {
        var name: String
        var kind: String
        var elements: [(name: String, min: Int, max: String, types: [String], isChoice: Bool)]
    }

    var types: [String: TypeInfo] = [:]
    var order: [String] = []

    init(table: String) {
        var current: String?
        for line in table.split(separator: "\n") {
            let f = line.split(separator: " ").map(String.init)
            if f.first == "T" {
                current = f[1]
                types[f[1]] = TypeInfo(name: f[1], kind: f[2], elements: [])
                order.append(f[1])
            } else if f.first == "E", let current {
                var name = f[1]
                let isChoice = name.hasSuffix("[x]")
                if isChoice { name.removeLast(3) }
                types[current]!.elements.append((name, Int(f[2])!, f[3], f[4].split(separator: "|").map(String.init), isChoice))
            }
        }
    }

    /// `CarePlan.activity.detail` → `R4.CarePlan.Activity.Detail`.
    func swiftTypeName(_ fhirName: String) -> String {
        let parts = fhirName.split(separator: ".")
        return "R4." + parts.enumerated().map { i, p in i == 0 ? String(p) : p.prefix(1).uppercased() + p.dropFirst() }.joined(separator: ".")
    }

    func identifier(_ name: String) -> String {
        swiftKeywords.contains(name) ? "`\(name)`" : name
    }

    /// The Swift type of one value and the conversion expressions, for a FHIR type.
    enum ValueKind {
        case primitive(swift: String, get: String, set: String)
        case view(String)
        case element
    }

    func valueKind(_ typeName: String) -> ValueKind {
        if let t = types[typeName], t.kind == "primitive" {
            switch typeName {
            case "boolean": return .primitive(swift: "Bool", get: "PrimitiveConversion.bool", set: "PrimitiveConversion.string")
            case "integer", "positiveInt", "unsignedInt": return .primitive(swift: "Int", get: "PrimitiveConversion.int", set: "PrimitiveConversion.string")
            case "decimal": return .primitive(swift: "FHIRDecimal", get: "PrimitiveConversion.decimal", set: "PrimitiveConversion.string")
            case "date", "dateTime", "instant": return .primitive(swift: "FHIRDateTime", get: "PrimitiveConversion.dateTime", set: "PrimitiveConversion.string")
            case "time": return .primitive(swift: "FHIRTime", get: "PrimitiveConversion.time", set: "PrimitiveConversion.string")
            default: return .primitive(swift: "String", get: "", set: "")
            }
        }
        if viewedTypes.contains(typeName) || typeName.contains(".") && viewedTypes.contains(String(typeName.split(separator: ".")[0])) {
            return .view(swiftTypeName(typeName))
        }
        if let alias = viewAliases[typeName] { return .view(swiftTypeName(alias)) }
        return .element
    }

    func property(_ name: String, fhirType: String, repeating: Bool, choice: Bool, baseName: String, min: Int, max: String) -> String {
        let doc = "    /// `\(baseName)\(choice ? "[x]" : "")` \(min)..\(max) \(fhirType)\(choice ? " (this choice of type)" : "")\n"
        let id = identifier(name)
        switch valueKind(fhirType) {
        case .primitive(let swift, let get, let set):
            let getter = get.isEmpty ? "$0" : get + "($0)"
            if choice {
                return doc + """
                    public var \(id): \(swift)? {
                        get { \(get)(choiceValue("\(baseName)", type: "\(fhirType)")) }
                        set { setChoiceValue("\(baseName)", type: "\(fhirType)", \(set)(newValue)) }
                    }

                """
            }
            if repeating {
                return doc + """
                    public var \(id): [\(swift)] {
                        get { primitiveValues("\(baseName)").compactMap { \(getter) } }
                        set { setPrimitiveValues("\(baseName)", type: "\(fhirType)", newValue.compactMap { \(set.isEmpty ? "$0" : set + "($0)") }) }
                    }

                """
            }
            return doc + """
                public var \(id): \(swift)? {
                    get { \(get)(primitiveValue("\(baseName)")) }
                    set { setPrimitiveValue("\(baseName)", type: "\(fhirType)", \(set)(newValue)) }
                }

            """
        case .view(let view):
            if choice {
                return doc + """
                    public var \(id): \(view)? {
                        get { choice("\(baseName)", type: "\(fhirType)") }
                        set { setChoice("\(baseName)", type: "\(fhirType)", newValue) }
                    }

                """
            }
            if repeating {
                return doc + """
                    public var \(id): [\(view)] {
                        get { children("\(baseName)") }
                        set { setChildren("\(baseName)", newValue) }
                    }

                """
            }
            return doc + """
                public var \(id): \(view)? {
                    get { child("\(baseName)") }
                    set { setChild("\(baseName)", newValue) }
                }

            """
        case .element:
            if choice {
                return doc + """
                    public var \(id): Element? {
                        get { element.children.first { $0.name == "\(baseName)" && $0.typeName == "\(fhirType)" } }
                        set { element.removeChildren(named: "\(baseName)"); if var e = newValue { e.name = "\(baseName)"; element.append(e) } }
                    }

                """
            }
            if repeating {
                return doc + """
                    public var \(id): [Element] {
                        get { element.children(named: "\(baseName)") }
                        set { element.removeChildren(named: "\(baseName)"); for var e in newValue { e.name = "\(baseName)"; element.append(e) } }
                    }

                """
            }
            return doc + """
                public var \(id): Element? {
                    get { element["\(baseName)"] }
                    set { element.removeChildren(named: "\(baseName)"); if var e = newValue { e.name = "\(baseName)"; element.append(e) } }
                }

            """
        }
    }

    func viewStruct(_ fhirName: String) -> String {
        let info = types[fhirName]!
        let isResource = info.kind == "resource"
        let shortName = String(fhirName.split(separator: ".").last!)
        let structName = shortName.prefix(1).uppercased() + shortName.dropFirst()
        var out = "    /// A typed view of FHIR R4 `\(fhirName)`.\n"
        out += "    public struct \(structName): \(isResource ? "ResourceView" : "ElementView") {\n"
        out += "        public static let fhirTypeName = \"\(fhirName)\"\n"
        out += "        public var element: Element\n"
        out += "        public init(unchecked element: Element) { self.element = element }\n\n"
        var body = ""
        for e in info.elements {
            if isResource && e.name == "id" { continue }
            let repeating = e.max != "1"
            if e.isChoice {
                for t in e.types {
                    let name = e.name + t.prefix(1).uppercased() + t.dropFirst()
                    body += property(name, fhirType: t, repeating: false, choice: true, baseName: e.name, min: e.min, max: e.max)
                }
            } else {
                body += property(e.name, fhirType: e.types[0], repeating: repeating, choice: false, baseName: e.name, min: e.min, max: e.max)
            }
        }
        out += body.split(separator: "\n", omittingEmptySubsequences: false).map { $0.isEmpty ? "" : "    " + $0 }.joined(separator: "\n")
        while out.hasSuffix("\n\n") { out.removeLast() }
        out += "    }\n"
        return out
    }

    func source() -> String {
        var out = """
        // GENERATED by `swift run fhir-tablegen` from the FHIR R4 4.0.1 core package. Do not edit.
        // Typed views over the element model; see Sources/FHIR/Views/ElementView.swift.

        /// Typed views of FHIR R4 resources and datatypes (`R4.CarePlan`, `R4.Timing`...), each
        /// wrapping an `Element`. Backbone elements are nested: `R4.CarePlan.Activity.Detail`.
        public enum R4 {}

        """
        for root in viewedTypes {
            let family = order.filter { $0 == root || $0.hasPrefix(root + ".") }
            for fhirName in family {
                let parent = fhirName.contains(".") ? swiftTypeName(String(fhirName[..<fhirName.lastIndex(of: ".")!])) : "R4"
                out += "\nextension \(parent) {\n" + viewStruct(fhirName) + "}\n"
            }
        }
        return out
    }
}
