import FHIRPackages
import JSON

/// A StructureDefinition as validation reads it: the profile or type, what it is based on, and its
/// elements (snapshot, and differential when it has one).
public struct StructureDefinition: Sendable {
    /// Where an extension may be used (`context`): an element path or type, another extension's
    /// url, or a FHIRPath expression.
    public struct Context: Sendable, Hashable {
        public let type: String
        public let expression: String
    }

    public let url: String
    public let version: String?
    public let name: String
    /// The type it constrains (`Observation`, `Extension`, `Quantity`).
    public let type: String
    /// `resource`, `complex-type`, `primitive-type` or `logical`.
    public let kind: String
    public let isAbstract: Bool
    public let baseDefinition: String?
    /// `constraint` for profiles, `specialization` for base types.
    public let derivation: String?
    public let contexts: [Context]
    /// The snapshot: the package's, or one generated from the differential (`SnapshotGenerator`).
    public internal(set) var snapshot: [ElementDefinition]?
    public let differential: [ElementDefinition]?
    /// The package and file it came from.
    public let origin: String

    /// `url|version`.
    public var versionedURL: String { version.map { "\(url)|\($0)" } ?? url }

    public init(_ resource: ConformanceResource) {
        let json = resource.json
        url = resource.url
        version = resource.version
        name = json["name"]?.stringValue ?? resource.url
        type = json["type"]?.stringValue ?? ""
        kind = json["kind"]?.stringValue ?? ""
        isAbstract = json["abstract"]?.boolValue ?? false
        baseDefinition = json["baseDefinition"]?.stringValue
        derivation = json["derivation"]?.stringValue
        contexts = (json["context"]?.arrayValue ?? []).compactMap { context in
            guard let type = context["type"]?.stringValue, let expression = context["expression"]?.stringValue else { return nil }
            return Context(type: type, expression: expression)
        }
        snapshot = json["snapshot"]?["element"]?.arrayValue.map { $0.map(ElementDefinition.init) }
        differential = json["differential"]?["element"]?.arrayValue.map { $0.map(ElementDefinition.init) }
        origin = resource.origin
    }

    public init(url: String, version: String?, name: String, type: String, kind: String, isAbstract: Bool,
                baseDefinition: String?, derivation: String?, contexts: [Context], snapshot: [ElementDefinition]?,
                differential: [ElementDefinition]?, origin: String) {
        self.url = url
        self.version = version
        self.name = name
        self.type = type
        self.kind = kind
        self.isAbstract = isAbstract
        self.baseDefinition = baseDefinition
        self.derivation = derivation
        self.contexts = contexts
        self.snapshot = snapshot
        self.differential = differential
        self.origin = origin
    }
}

extension StructureDefinition {
/// One ElementDefinition of a snapshot or differential: the properties validation reads (named
/// through `StructureDefinition`, since the FHIR module's type table has an `ElementDefinition` too).
public struct ElementDefinition: Sendable {
    /// One allowed type: its code, the profiles the value must meet, and for references the
    /// profiles the target must meet.
    public struct TypeRef: Sendable, Hashable {
        public var code: String
        public var profiles: [String]
        public var targetProfiles: [String]
    }

    public struct Discriminator: Sendable, Hashable {
        /// `value`, `pattern`, `type`, `profile` or `exists`.
        public var type: String
        public var path: String
    }

    public struct Slicing: Sendable {
        public var discriminators: [Discriminator]
        /// `closed`, `open` or `openAtEnd`.
        public var rules: String
        public var ordered: Bool
    }

    public struct Constraint: Sendable, Hashable {
        public var key: String
        /// `error` or `warning`.
        public var severity: String
        public var human: String
        public var expression: String?
        /// The StructureDefinition that stated it.
        public var source: String?
    }

    public struct Binding: Sendable, Hashable {
        /// `required`, `extensible`, `preferred` or `example`.
        public var strength: String
        public var valueSet: String?
    }

    public var id: String
    public var path: String
    public var sliceName: String?
    public var min: Int?
    /// The maximum, nil for `*` (and when not stated, in a differential).
    public var max: Int?
    public var maxIsStated: Bool
    public var types: [TypeRef]?
    /// `fixed[x]`: the type suffix (`CodeableConcept`) and the value.
    public var fixed: (type: String, value: JSONValue)?
    /// `pattern[x]`: the type suffix and the value.
    public var pattern: (type: String, value: JSONValue)?
    public var slicing: Slicing?
    public var constraints: [Constraint]?
    public var binding: Binding?
    public var contentReference: String?
    public var maxLength: Int?
    public var isModifier: Bool?
    /// The base element's maximum (`base.max`): whether the element repeats in the base type.
    public var baseMax: Int??

    public init(_ json: JSONValue) {
        path = json["path"]?.stringValue ?? ""
        sliceName = json["sliceName"]?.stringValue
        id = json["id"]?.stringValue ?? (path + (sliceName.map { ":" + $0 } ?? ""))
        min = json["min"]?.numberValue.map { Int($0) }
        let max = json["max"]?.stringValue
        maxIsStated = max != nil
        self.max = max.flatMap { $0 == "*" ? nil : Int($0) }
        types = json["type"]?.arrayValue?.map { type in
            TypeRef(code: type["code"]?.stringValue ?? "",
                    profiles: type["profile"]?.arrayValue?.compactMap(\.stringValue) ?? [],
                    targetProfiles: type["targetProfile"]?.arrayValue?.compactMap(\.stringValue) ?? [])
        }
        if case .object(let members) = json {
            for (key, value) in members {
                if key.hasPrefix("fixed") { fixed = (String(key.dropFirst(5)), value) }
                if key.hasPrefix("pattern") { pattern = (String(key.dropFirst(7)), value) }
            }
        }
        slicing = json["slicing"].map { slicing in
            Slicing(discriminators: (slicing["discriminator"]?.arrayValue ?? []).map {
                        Discriminator(type: $0["type"]?.stringValue ?? "value", path: $0["path"]?.stringValue ?? "$this")
                    },
                    rules: slicing["rules"]?.stringValue ?? "open",
                    ordered: slicing["ordered"]?.boolValue ?? false)
        }
        constraints = json["constraint"]?.arrayValue?.map { constraint in
            Constraint(key: constraint["key"]?.stringValue ?? "",
                       severity: constraint["severity"]?.stringValue ?? "error",
                       human: constraint["human"]?.stringValue ?? "",
                       expression: constraint["expression"]?.stringValue,
                       source: constraint["source"]?.stringValue)
        }
        binding = json["binding"].map { Binding(strength: $0["strength"]?.stringValue ?? "example", valueSet: $0["valueSet"]?.stringValue) }
        contentReference = json["contentReference"]?.stringValue
        maxLength = json["maxLength"]?.numberValue.map { Int($0) }
        isModifier = json["isModifier"]?.boolValue
        if let base = json["base"] {
            let baseMax = base["max"]?.stringValue
            self.baseMax = .some(baseMax.flatMap { $0 == "*" ? nil : Int($0) })
        }
    }

    /// The last part of the path without `[x]` (`value` for `Observation.value[x]`).
    public var name: String {
        let last = path.split(separator: ".").last.map(String.init) ?? path
        return last.hasSuffix("[x]") ? String(last.dropLast(3)) : last
    }

    /// Whether the path ends in `[x]`.
    public var isChoice: Bool { path.hasSuffix("[x]") }

    /// Whether the element may repeat in its base type (and so is written with an index).
    public var repeatsInBase: Bool {
        if let baseMax { return baseMax.map { $0 > 1 } ?? true }
        return maxIsStated ? (max.map { $0 > 1 } ?? true) : false
    }
}
}
