// fhir-tablegen: generates CareGate's R4 type table from the official R4 core package.
//
// Usage: swift run fhir-tablegen [DEFINITIONS_DIR] [OUTPUT_DIR] [PACKAGES_OUTPUT_DIR]
//   defaults: ../shared/fhir-r4/definitions  Sources/FHIR/Generated  Sources/FHIRPackages/Generated
//
// Writes two files:
// - R4Definitions.swift: the type table. Facts only (type names, element names in definition
//   order, cardinalities, types, modifier flags, required bindings and the codes of their value
//   sets); no prose. Its line format is documented in Sources/FHIR/Model/ModelInfo.swift.
// - R4CoreConformance.swift (in PACKAGES_OUTPUT_DIR): the core's conformance resources for
//   profile validation (see CoreConformance.swift).
// - R4Views.swift: typed Swift views (`R4.CarePlan`, `R4.Timing`...) over the element model for
//   the resources and datatypes the gateway reads and writes.
import Foundation
import JSON

struct GeneratorError: Error, CustomStringConvertible {
    var description: String
}

let arguments = CommandLine.arguments
let definitionsDirectory = arguments.count > 1 ? arguments[1] : "../shared/fhir-r4/definitions"
let outputDirectory = arguments.count > 2 ? arguments[2] : "Sources/FHIR/Generated"
let outputPath = outputDirectory + "/R4Definitions.swift"
let viewsPath = outputDirectory + "/R4Views.swift"
let conformancePath = (arguments.count > 3 ? arguments[3] : "Sources/FHIRPackages/Generated") + "/R4CoreConformance.swift"

@MainActor func loadJSON(_ path: String) throws -> JSONValue {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    let value: JSONValue
    do { value = try JSONValue.parse(Array(data)) } catch { throw GeneratorError(description: "\(path):\(error)") }
    guard case .object = value else { throw GeneratorError(description: "\(path): not a JSON object") }
    return value
}

let fileNames = try FileManager.default.contentsOfDirectory(atPath: definitionsDirectory).sorted()

// MARK: Code systems and value sets

/// Codes of one code system, flattened, with their parent for is-a filters.
struct CodeSystemCodes {
    var codes: [String] = []
    var parents: [String: String] = [:]
    var complete: Bool
}

var codeSystems: [String: CodeSystemCodes] = [:]
var valueSets: [String: JSONValue] = [:]

@MainActor func flatten(_ concepts: [JSONValue], parent: String?, into system: inout CodeSystemCodes) {
    for concept in concepts {
        guard let code = concept["code"]?.stringValue else { continue }
        system.codes.append(code)
        if let parent { system.parents[code] = parent }
        if let children = concept["concept"]?.arrayValue {
            flatten(children, parent: code, into: &system)
        }
    }
}

for name in fileNames where name.hasPrefix("CodeSystem-") || name.hasPrefix("ValueSet-") {
    let resource = try loadJSON("\(definitionsDirectory)/\(name)")
    guard let url = resource["url"]?.stringValue else { continue }
    if name.hasPrefix("CodeSystem-") {
        var system = CodeSystemCodes(complete: (resource["content"]?.stringValue) == "complete")
        flatten(resource["concept"]?.arrayValue ?? [], parent: nil, into: &system)
        codeSystems[url] = system
    } else {
        valueSets[url] = resource
    }
}

/// Expands a value set to its codes, or nil when it cannot be enumerated from the package
/// (grammar-based systems such as BCP-47 languages, MIME types or UCUM).
@MainActor func expand(_ url: String, depth: Int = 0) -> [String]? {
    let key = url.split(separator: "|").first.map(String.init) ?? url
    guard depth < 10, let valueSet = valueSets[key],
          let compose = valueSet["compose"] else { return nil }
    var result: [String] = []
    var seen = Set<String>()
    func add(_ codes: [String]) {
        for code in codes where seen.insert(code).inserted { result.append(code) }
    }
    for include in compose["include"]?.arrayValue ?? [] {
        var codes: [String]? = nil
        if let system = include["system"]?.stringValue {
            if let concepts = include["concept"]?.arrayValue {
                codes = concepts.compactMap { $0["code"]?.stringValue }
            } else if let filters = include["filter"]?.arrayValue {
                guard let cs = codeSystems[system], cs.complete, filters.count == 1,
                      let op = filters[0]["op"]?.stringValue, let value = filters[0]["value"]?.stringValue,
                      (filters[0]["property"]?.stringValue) == "concept",
                      op == "is-a" || op == "descendent-of" else { return nil }
                codes = cs.codes.filter { code in
                    var current: String? = op == "is-a" ? code : cs.parents[code]
                    while let c = current { if c == value { return true }; current = cs.parents[c] }
                    return false
                }
            } else {
                guard let cs = codeSystems[system], cs.complete, !cs.codes.isEmpty else { return nil }
                codes = cs.codes
            }
        }
        if let imported = include["valueSet"]?.arrayValue?.compactMap(\.stringValue) {
            var intersection: [String]? = codes
            for vs in imported {
                guard let expanded = expand(vs, depth: depth + 1) else { return nil }
                intersection = intersection.map { c in c.filter(expanded.contains) } ?? expanded
            }
            codes = intersection
        }
        guard let codes else { return nil }
        add(codes)
    }
    if let excludes = compose["exclude"]?.arrayValue {
        var removed = Set<String>()
        for exclude in excludes {
            for concept in exclude["concept"]?.arrayValue ?? [] {
                if let code = concept["code"]?.stringValue { removed.insert(code) }
            }
        }
        result.removeAll(where: removed.contains)
    }
    return result.isEmpty ? nil : result
}

// MARK: Structure definitions

var bindingIndex: [String: Int] = [:]
var bindingLines: [String] = []

@MainActor func bindingReference(_ url: String) -> Int? {
    let key = url.split(separator: "|").first.map(String.init) ?? url
    if let index = bindingIndex[key] { return index }
    guard let codes = expand(key) else { return nil }
    for code in codes where code.contains(where: { $0 == " " || $0 == "|" }) {
        fatalError("code with separator character in \(key): \(code)")
    }
    let index = bindingLines.count
    bindingIndex[key] = index
    bindingLines.append("B \(key) \(codes.joined(separator: "|"))")
    return index
}

/// One element of a type, as a table line.
@MainActor func elementLine(_ element: JSONValue, name: String, typeCodes: [String]) -> String {
    let min = element["min"]?.numberValue.map { Int($0) } ?? 0
    let max = element["max"]?.stringValue ?? "1"
    var line = "E \(name) \(min) \(max) \(typeCodes.joined(separator: "|"))"
    if element["isModifier"]?.boolValue == true { line += " m" }
    if element["isSummary"]?.boolValue == true { line += " s" }
    if let binding = element["binding"],
       binding["strength"]?.stringValue == "required",
       let valueSet = binding["valueSet"]?.stringValue,
       let index = bindingReference(valueSet) {
        line += " b\(index)"
    }
    return line
}

@MainActor func typeCode(_ type: JSONValue) -> String {
    let code = type["code"]?.stringValue ?? "Element"
    if code.hasPrefix("http://hl7.org/fhirpath/System.") {
        for ext in type["extension"]?.arrayValue ?? []
        where ext["url"]?.stringValue == "http://hl7.org/fhir/StructureDefinition/structuredefinition-fhir-type" {
            if let value = ext["valueUrl"]?.stringValue ?? ext["valueUri"]?.stringValue { return value }
        }
        // Element ids are FHIR strings; xhtml.id alone lacks the extension saying so.
        let system = code.dropFirst("http://hl7.org/fhirpath/System.".count)
        return system == "String" ? "string" : "System." + system
    }
    return code
}

struct TypeBlock {
    var name: String
    var lines: [String]
}

var blocks: [TypeBlock] = []
var structureCount = 0

for name in fileNames where name.hasPrefix("StructureDefinition-") {
    let sd = try loadJSON("\(definitionsDirectory)/\(name)")
    guard let kind = sd["kind"]?.stringValue, let typeName = sd["type"]?.stringValue,
          let id = sd["id"]?.stringValue, id == typeName else { continue }
    let derivation = sd["derivation"]?.stringValue
    guard derivation == "specialization" || derivation == nil,
          ["primitive-type", "complex-type", "resource"].contains(kind) else { continue }
    guard let snapshot = sd["snapshot"],
          let elements = snapshot["element"]?.arrayValue else { continue }
    structureCount += 1
    let base = (sd["baseDefinition"]?.stringValue).map { $0.split(separator: "/").last.map(String.init) ?? "-" } ?? "-"
    let abstract = sd["abstract"]?.boolValue == true
    let kindCode: String
    switch kind {
    case "primitive-type": kindCode = "primitive"
    case "complex-type": kindCode = "complex"
    default: kindCode = "resource"
    }

    // Paths that own children become backbone types named by their path.
    let paths = elements.compactMap { $0["path"]?.stringValue }
    var owners = Set<String>()
    for path in paths {
        if let dot = path.lastIndex(of: ".") { owners.insert(String(path[..<dot])) }
    }

    var typeLines: [String: [String]] = [typeName: ["T \(typeName) \(kindCode) \(base)\(abstract ? " abstract" : "")"]]
    var order: [String] = [typeName]
    for element in elements.dropFirst() {
        guard let path = element["path"]?.stringValue, let dot = path.lastIndex(of: ".") else { continue }
        let parent = String(path[..<dot])
        var elementName = String(path[path.index(after: dot)...])
        // A primitive's value lives on the node itself, not in a child element.
        if kind == "primitive-type" && parent == typeName && elementName == "value" { continue }
        var codes: [String]
        if let reference = element["contentReference"]?.stringValue {
            codes = [String(reference.dropFirst())]
        } else if owners.contains(path) {
            codes = [path]
            if typeLines[path] == nil {
                let baseCode = (element["type"]?.arrayValue)?.first.map(typeCode) ?? "BackboneElement"
                typeLines[path] = ["T \(path) backbone \(baseCode)"]
                order.append(path)
            }
        } else {
            codes = (element["type"]?.arrayValue ?? []).map(typeCode)
        }
        if elementName.hasSuffix("[x]") {
            elementName.removeLast(3)
            elementName += "[x]"
        }
        guard typeLines[parent] != nil else {
            throw GeneratorError(description: "\(name): element \(path) before its parent")
        }
        typeLines[parent]!.append(elementLine(element, name: elementName, typeCodes: codes))
    }
    blocks.append(TypeBlock(name: typeName, lines: order.flatMap { typeLines[$0]! }))
}

blocks.sort { $0.name < $1.name }
let typeCount = blocks.reduce(0) { $0 + $1.lines.filter { $0.hasPrefix("T ") }.count }
let elementCount = blocks.reduce(0) { $0 + $1.lines.filter { $0.hasPrefix("E ") }.count }

var table = "# FHIR R4 4.0.1 (hl7.fhir.r4.core): \(structureCount) structures, \(typeCount) types, \(elementCount) elements, \(bindingLines.count) required value sets\n"
table += bindingLines.joined(separator: "\n") + "\n"
table += blocks.flatMap(\.lines).joined(separator: "\n") + "\n"

precondition(!table.contains("\"\"\"#"), "the table cannot be embedded in a raw string literal")

let source = """
// GENERATED by `swift run fhir-tablegen` from the FHIR R4 4.0.1 core package. Do not edit.
// Facts only: type and element names, cardinalities, types, flags and required-binding codes.

extension ModelInfo {
    /// The R4 type table in the line format that `ModelInfo.init(table:)` documents.
    static let r4Table: String = #\"\"\"
\(table)\"\"\"#
}

"""
try source.write(toFile: outputPath, atomically: true, encoding: .utf8)
print("wrote \(outputPath): \(typeCount) types, \(elementCount) elements, \(bindingLines.count) value sets, \(table.utf8.count) bytes")
let views = ViewGenerator(table: table).source()
try views.write(toFile: viewsPath, atomically: true, encoding: .utf8)
print("wrote \(viewsPath): \(views.split(separator: "\n").count) lines")
try CoreConformance.write(definitions: definitionsDirectory, to: conformancePath)
