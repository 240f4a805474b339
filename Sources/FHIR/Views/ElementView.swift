/// A typed view of an `Element`: generated structs (`CarePlan`, `Timing`, `CarePlan.Activity`)
/// that read and write the underlying tree through Swift properties.
///
/// A view holds its element, so typed access and the lossless tree never disagree: what a view
/// does not model (extensions on primitives, unknown elements) stays in `element` untouched.
///
/// ```swift
/// let plan = try R4.CarePlan(parsed.resource)       // throws ElementViewError for another type
/// for activity in plan.activity {
///     print(activity.detail?.code?.text ?? "-", activity.detail?.scheduledTiming?.repeat?.frequency ?? 1)
/// }
/// var weight = R4.Quantity()
/// weight.value = "78.40"
/// weight.code = "kg"
/// var observation = R4.Observation()
/// observation.status = "final"
/// observation.valueQuantity = weight
/// ```
public protocol ElementView: Sendable, Hashable {
    /// The FHIR type this view reads (`CarePlan`, `Quantity`, `CarePlan.activity`).
    static var fhirTypeName: String { get }
    /// The element behind the view.
    var element: Element { get set }
    /// Wraps an element already known to be of this type.
    init(unchecked element: Element)
}

/// A typed view of a resource.
public protocol ResourceView: ElementView {}

/// Why an element could not be viewed as a type.
public struct ElementViewError: Error, Sendable, CustomStringConvertible {
    /// The type the view wanted.
    public let expected: String
    /// The type the element has.
    public let found: String
    public var description: String { "expected a \(expected), found a \(found)" }
}

extension ElementView {
    /// Views an element of this type (or one derived from it: an `Age` as a `Quantity`).
    public init(_ element: Element) throws(ElementViewError) {
        guard let type = element.definition,
              type.name == Self.fhirTypeName || ModelInfo.r4.isType(type, derivedFrom: Self.fhirTypeName) else {
            throw ElementViewError(expected: Self.fhirTypeName, found: element.typeName ?? "unknown element \(element.name)")
        }
        self.init(unchecked: element)
    }

    /// An empty instance of this type.
    public init() {
        let name = Self.fhirTypeName.split(separator: ".").last.map(String.init) ?? Self.fhirTypeName
        self.init(unchecked: Element(name: name, type: Self.fhirTypeName))
    }

    public static func == (a: Self, b: Self) -> Bool { a.element == b.element }
    public func hash(into hasher: inout Hasher) { hasher.combine(element) }

    // MARK: Primitives

    /// The lexical value of a primitive child.
    public func primitiveValue(_ name: String) -> String? {
        element.children.first { $0.name == name && !$0.isUnknown }?.value
    }

    /// The lexical values of a repeating primitive child.
    public func primitiveValues(_ name: String) -> [String] {
        element.children.compactMap { $0.name == name && !$0.isUnknown ? $0.value : nil }
    }

    /// Sets a primitive child's value, keeping its id and extensions; nil removes the value
    /// (and the element, when it has no extensions).
    public mutating func setPrimitiveValue(_ name: String, type: String, _ value: String?) {
        if let index = element.children.firstIndex(where: { $0.name == name && !$0.isUnknown }) {
            element.children[index].value = value
            if value == nil && element.children[index].children.isEmpty { element.children.remove(at: index) }
            return
        }
        guard let value else { return }
        element.append(Element(name: name, type: type, value: value))
    }

    /// Replaces a repeating primitive child's values.
    public mutating func setPrimitiveValues(_ name: String, type: String, _ values: [String]) {
        element.removeChildren(named: name)
        for value in values { element.append(Element(name: name, type: type, value: value)) }
    }

    // MARK: Complex children

    /// The first child with this name, viewed as `V`, when it has that type.
    public func child<V: ElementView>(_ name: String, as: V.Type = V.self) -> V? {
        element.children.first { $0.name == name && !$0.isUnknown }.flatMap { try? V($0) }
    }

    /// The children with this name, viewed as `V`.
    public func children<V: ElementView>(_ name: String, as: V.Type = V.self) -> [V] {
        element.children.compactMap { $0.name == name && !$0.isUnknown ? try? V($0) : nil }
    }

    /// Sets (or with nil removes) a single child.
    public mutating func setChild<V: ElementView>(_ name: String, _ value: V?) {
        element.removeChildren(named: name)
        guard var child = value?.element else { return }
        child.name = name
        element.append(child)
    }

    /// Replaces the children with this name.
    public mutating func setChildren<V: ElementView>(_ name: String, _ values: [V]) {
        element.removeChildren(named: name)
        for value in values {
            var child = value.element
            child.name = name
            element.append(child)
        }
    }

    // MARK: Choice elements

    /// The value of a choice element when it has the given type (`value` as `Quantity`).
    public func choice<V: ElementView>(_ name: String, type typeName: String, as: V.Type = V.self) -> V? {
        element.children.first { $0.name == name && $0.typeName == typeName }.flatMap { try? V($0) }
    }

    /// The lexical value of a primitive choice when it has the given type (`value` as `string`).
    public func choiceValue(_ name: String, type typeName: String) -> String? {
        element.children.first { $0.name == name && $0.typeName == typeName }?.value
    }

    /// Sets a choice element to a complex value of the given type, replacing any other type.
    public mutating func setChoice<V: ElementView>(_ name: String, type typeName: String, _ value: V?) {
        let replacesThisType = element.children.contains { $0.name == name && $0.typeName == typeName }
        guard let value else {
            if replacesThisType { element.removeChildren(named: name) }
            return
        }
        element.removeChildren(named: name)
        var child = value.element
        child.name = name
        if let index = ModelInfo.r4.typeIndex(named: typeName) { child.typeIndex = index }
        element.append(child)
    }

    /// Sets a choice element to a primitive value of the given type, replacing any other type.
    public mutating func setChoiceValue(_ name: String, type typeName: String, _ value: String?) {
        let replacesThisType = element.children.contains { $0.name == name && $0.typeName == typeName }
        guard let value else {
            if replacesThisType { element.removeChildren(named: name) }
            return
        }
        element.removeChildren(named: name)
        element.append(Element(name: name, type: typeName, value: value))
    }
}

extension ResourceView {
    /// The resource's logical id.
    public var id: String? {
        get { primitiveValue("id") }
        set { setPrimitiveValue("id", type: "string", newValue) }
    }

    /// The resource type name.
    public var resourceType: String { Self.fhirTypeName }
}

/// Conversions between lexical primitive values and Swift types, used by the generated views.
public enum PrimitiveConversion {
    /// `true` and `false` as a Bool; nil otherwise.
    public static func bool(_ s: String?) -> Bool? { s.flatMap { $0 == "true" ? true : $0 == "false" ? false : nil } }
    /// A Bool as FHIR writes it.
    public static func string(_ b: Bool?) -> String? { b.map { $0 ? "true" : "false" } }
    /// An integer's lexical form (a leading `+` allowed) as an Int.
    public static func int(_ s: String?) -> Int? { s.flatMap { Int($0.hasPrefix("+") ? String($0.dropFirst()) : $0) } }
    /// An Int as FHIR writes it.
    public static func string(_ i: Int?) -> String? { i.map(String.init) }
    /// A decimal's lexical form, its digits kept.
    public static func decimal(_ s: String?) -> FHIRDecimal? { s.flatMap(FHIRDecimal.init) }
    /// A decimal as it was written.
    public static func string(_ d: FHIRDecimal?) -> String? { d?.lexical }
    /// A date, dateTime or instant's lexical form, its precision kept.
    public static func dateTime(_ s: String?) -> FHIRDateTime? { s.flatMap(FHIRDateTime.init) }
    /// A date or time as it was written.
    public static func string(_ d: FHIRDateTime?) -> String? { d?.lexical }
    /// A time's lexical form.
    public static func time(_ s: String?) -> FHIRTime? { s.flatMap(FHIRTime.init) }
    /// A time as it was written.
    public static func string(_ t: FHIRTime?) -> String? { t?.lexical }
}
