import FHIR
import Foundation

/// One item of a FHIRPath collection: a node of a FHIR resource (typed by the R4 definitions), or
/// a value of FHIRPath's own System types.
public enum FHIRPathValue: Sendable {
    /// A FHIR element: a resource, a datatype, a backbone element or a primitive (its `value`).
    case element(Element)
    /// A Boolean.
    case boolean(Bool)
    /// An Integer.
    case integer(Int)
    /// A Decimal, exact.
    case decimal(FHIRPathDecimal)
    /// A String.
    case string(String)
    /// A Date.
    case date(PartialDateTime)
    /// A DateTime.
    case dateTime(PartialDateTime)
    /// A Time.
    case time(PartialTime)
    /// A Quantity.
    case quantity(FHIRPathQuantity)
    /// What `type()` returns: a namespace and a name.
    case typeInfo(namespace: String, name: String)

    /// The value as FHIRPath literal text (`'abc'`, `@2014-01-01`, `4 'mg'`).
    public var literalText: String {
        switch self {
        case .element(let e): e.typeName ?? e.name
        case .boolean(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        case .decimal(let d): d.description
        case .string(let s): "'" + s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
        case .date(let d), .dateTime(let d): "@" + d.description
        case .time(let t): "@T" + t.description
        case .quantity(let q): q.description
        case .typeInfo(let ns, let name): "\(ns).\(name)"
        }
    }

    /// The FHIR element, if this item is one.
    public var element: Element? {
        if case .element(let e) = self { return e }
        return nil
    }

    /// A FHIR primitive or Quantity as the System value FHIRPath computes with; other items as they are.
    /// (`Patient.birthDate` is a FHIR `date`; compared with `@1974-12-25` it is a System Date.)
    public var systemValue: FHIRPathValue {
        guard case .element(let e) = self, let type = e.definition else { return self }
        if type.kind == .primitive {
            guard let text = e.value else { return self }
            switch type.primitiveKind {
            case .boolean: return .boolean(text == "true")
            case .integer, .positiveInt, .unsignedInt: return Int(text).map { .integer($0) } ?? self
            case .decimal: return FHIRPathDecimal(fhirLexical: text).map { .decimal($0) } ?? self
            case .date: return PartialDateTime(fhirPath: text).map { .date($0) } ?? self
            case .dateTime, .instant:
                guard var value = PartialDateTime(fhirPath: text) else { return self }
                if text.utf8.count > 10 { value.hasTime = true }
                return .dateTime(value)
            case .time: return PartialTime(text).map { .time($0) } ?? self
            default: return .string(text)
            }
        }
        if ModelInfo.r4.isType(type, derivedFrom: "Quantity"), let v = e.string("value"), let value = FHIRPathDecimal(fhirLexical: v) {
            let unit = e.string("code") ?? e.string("unit") ?? "1"
            return .quantity(FHIRPathQuantity(value: value, unit: unit))
        }
        return self
    }

    /// The item's type: FHIR types for elements, System types for values.
    var typeInfo: (namespace: String, name: String) {
        switch self {
        case .element(let e):
            guard let type = e.definition else { return ("FHIR", e.name) }
            return ("FHIR", type.kind == .backbone ? "BackboneElement" : type.name)
        case .boolean: return ("System", "Boolean")
        case .integer: return ("System", "Integer")
        case .decimal: return ("System", "Decimal")
        case .string: return ("System", "String")
        case .date: return ("System", "Date")
        case .dateTime: return ("System", "DateTime")
        case .time: return ("System", "Time")
        case .quantity: return ("System", "Quantity")
        case .typeInfo: return ("System", "Object")
        }
    }

    /// Whether the item is of type `type` or a type derived from it. With `exactPrimitive` (what
    /// `as` and `ofType` do), a FHIR primitive must be exactly the type: a `code` is a `string`
    /// for `is`, but `as(string)` does not select it.
    func isType(_ type: TypeSpecifier, exactPrimitive: Bool = false) -> Bool {
        switch self {
        case .element(let e):
            guard type.resolvedNamespace == "FHIR", let definition = e.definition else { return false }
            if definition.kind == .backbone { return ["BackboneElement", "Element", "Base"].contains(type.name) }
            if exactPrimitive, definition.kind == .primitive { return definition.name == type.name }
            guard let ancestor = type.fhirTypeIndex else { return ModelInfo.r4.isType(definition, derivedFrom: type.name) }
            return ModelInfo.r4.isType(definition, derivedFrom: ancestor)
        default:
            guard type.resolvedNamespace == "System" else { return false }
            let name = typeInfo.name
            return name == type.name || (type.name == "Any")
        }
    }

    static let systemTypes: Set<String> = ["Boolean", "String", "Integer", "Decimal", "Date", "DateTime", "Time", "Quantity", "Any"]

    /// Whether an unqualified type name names a FHIR or System type.
    static func isKnownType(_ type: TypeSpecifier) -> Bool {
        ModelInfo.r4.type(named: type.name) != nil || systemTypes.contains(type.name)
            || ["BackboneElement", "Element", "Base", "Resource", "DomainResource"].contains(type.name)
    }

    /// An unqualified name means the FHIR type when there is one, else the System type.
    static func resolve(_ type: TypeSpecifier) -> (namespace: String, name: String) {
        (type.resolvedNamespace, type.name)
    }
}

extension FHIRPathValue: CustomStringConvertible {
    public var description: String { literalText }
}

extension FHIRPathValue {
    /// The two one-Boolean collections, made once: operators and functions answer with them
    /// rather than allocating a collection for each answer.
    private static let trueCollection: [FHIRPathValue] = [.boolean(true)]
    private static let falseCollection: [FHIRPathValue] = [.boolean(false)]

    /// The collection holding one Boolean.
    static func collection(_ value: Bool) -> [FHIRPathValue] {
        value ? trueCollection : falseCollection
    }
}
