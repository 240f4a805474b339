/// One node of a FHIR instance: a resource, a datatype, a backbone element or a primitive.
///
/// Every R4 resource is one ordered tree of `Element`s, typed by the definitions (the approach of
/// Firely's element model). The tree is lossless: primitives keep their lexical form (`1.50` stays
/// `1.50`), a primitive's `id` and `extension` are its children, `contained` resources are
/// resource-typed children, narrative XHTML is the `div` primitive's value, and content the
/// definitions do not know is kept verbatim as an *unknown* node.
///
/// Children are kept in definition order (FHIR XML's order), so a resource read from JSON and the
/// same resource read from XML give equal trees.
public struct Element: Sendable, Hashable {
    /// The element name (`status`, `activity`); choice elements use their base name (`value`) and
    /// carry the chosen type in `type`. A root resource is named by its type.
    public var name: String
    /// The element's value in its lexical form, for primitives; for unknown content, its raw text.
    public var value: String?
    /// Child elements in definition order; repeated elements are consecutive siblings.
    public var children: [Element]
    /// Index of the type in `ModelInfo.types`, or one of the `unknown...` markers.
    public internal(set) var typeIndex: Int32
    /// The element's position in its parent's definition (sort key); `Int16.max` when unknown.
    var slot: Int16

    /// Marks content the definitions do not describe, kept as raw JSON text.
    public static let unknownJSON: Int32 = -2
    /// Marks content the definitions do not describe, kept as raw XML text.
    public static let unknownXML: Int32 = -3

    init(name: String, typeIndex: Int32, slot: Int16, value: String? = nil, children: [Element] = []) {
        self.name = name
        self.typeIndex = typeIndex
        self.slot = slot
        self.value = value
        self.children = children
    }

    /// Creates an element of a named R4 type: `Element(name: "status", type: "code", value: "final")`.
    /// The name's position among its future parent's elements is fixed when it is appended.
    public init(name: String, type: String, value: String? = nil, children: [Element] = []) {
        let index = ModelInfo.r4.typeIndex(named: type)
        precondition(index != nil, "unknown FHIR type \(type)")
        self.init(name: name, typeIndex: index!, slot: Int16.max, value: value, children: [])
        for child in children { append(child) }
    }

    /// Creates an empty resource of the given type (`Element(resourceType: "Observation")`).
    public init(resourceType: String) {
        precondition(ModelInfo.r4.resourceType(named: resourceType) != nil, "unknown resource type \(resourceType)")
        self.init(name: resourceType, type: resourceType)
    }

    /// The element's type definition, or nil for unknown content.
    public var definition: TypeDefinition? {
        typeIndex >= 0 ? ModelInfo.r4.types[Int(typeIndex)] : nil
    }

    /// The FHIR type name (`CodeableConcept`, `dateTime`, `Observation`, `CarePlan.activity`).
    public var typeName: String? { definition?.name }

    /// Whether this element is unknown to the R4 definitions (kept verbatim, reported as a warning).
    public var isUnknown: Bool { typeIndex < 0 }

    /// Whether this element is a resource (a root, a `contained` resource or a Bundle entry's).
    public var isResource: Bool { definition?.kind == .resource }

    /// Whether writing this element in `format` gives anything: a value, or a child that does.
    /// The other format's unknown content has no form in this one, so an element holding only
    /// that is left out rather than written empty (`{}` or `<code/>`, which no reader accepts).
    public func hasContent(in format: FHIRFormat) -> Bool {
        withUnsafePointer(to: self) { Element.hasContent(at: $0, in: format) }
    }

    /// `hasContent(in:)` of an element read in place: writers ask it of every element, and a call
    /// on an element held in a buffer copies it first.
    static func hasContent(at element: UnsafePointer<Element>, in format: FHIRFormat) -> Bool {
        if element.pointee.value != nil { return true }
        let kept = format == .xml ? Element.unknownXML : Element.unknownJSON
        let found = element.pointee.children.withUnsafeBufferPointer { children in
            for i in children.indices {
                let child = children.baseAddress! + i
                if child.pointee.typeIndex < 0 ? child.pointee.typeIndex == kept : hasContent(at: child, in: format) { return true }
            }
            return false
        }
        return found || element.pointee.isResource
    }

    /// The resource type, when this element is a resource.
    public var resourceType: String? { isResource ? definition?.name : nil }

    /// `Type/id`, when this element is a resource with an id: how other resources refer to it,
    /// and its identity across files and Bundles.
    public var relativeReference: String? {
        guard let type = resourceType, let id = string("id") else { return nil }
        return "\(type)/\(id)"
    }

    /// The `Type/id` a reference names: relative (`Patient/7`), absolute
    /// (`https://ehr.example.org/fhir/Patient/7`) or versioned (`Patient/7/_history/2`); nil for
    /// one that names no type and id (`urn:uuid:…`). Split over bytes: imports ask it of every
    /// reference they follow.
    public static func relativeReference(of reference: String) -> String? {
        // Scanned from the end without splitting (validation asks it of every reference): the
        // steps before the last `_history` step, or the last two steps; empty steps are skipped.
        let bytes = reference.utf8
        var end = bytes.endIndex
        var (id, type): (Substring.UTF8View?, Substring.UTF8View?) = (nil, nil)
        var history = false
        while let step = previousStep(in: bytes, before: &end) {
            if !history && step.elementsEqual("_history".utf8) {
                history = true
                (id, type) = (nil, nil)
            } else if id == nil {
                id = step
            } else if type == nil {
                type = step
            } else if history {
                break
            }
        }
        guard let id, let type else { return nil }
        return "\(Substring(type))/\(Substring(id))"
    }

    /// The non-empty `/`-separated step of `bytes` that ends at or before `end`, moving `end` before it.
    private static func previousStep(in bytes: String.UTF8View, before end: inout String.UTF8View.Index) -> Substring.UTF8View? {
        let slash = UInt8(ascii: "/")
        while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
        guard end > bytes.startIndex else { return nil }
        var start = end
        while start > bytes.startIndex, bytes[bytes.index(before: start)] != slash { start = bytes.index(before: start) }
        defer { end = start }
        return Substring(bytes[start..<end]).utf8
    }

    /// Whether this element is a FHIR primitive (its value, if any, is in `value`).
    public var isPrimitive: Bool { definition?.kind == .primitive }

    /// Whether two element names are equal, compared by length first: most names compared in a
    /// walk differ in length, and comparing two different short strings is a call into the
    /// runtime. (For the validator's and FHIRPath's walks, which compare names per child.)
    @inlinable @inline(__always)
    public static func sameName(_ a: String, _ b: String) -> Bool {
        a.utf8.count == b.utf8.count && a == b
    }

    /// The children with this name, in order (`carePlan.children(named: "activity")`).
    public func children(named name: String) -> [Element] {
        children.filter { $0.name == name }
    }

    /// The first child with this name.
    public subscript(name: String) -> Element? {
        children.first { $0.name == name }
    }

    /// Follows a dotted path of child names and returns the first match
    /// (`resource.first("code.coding.system")`), a convenience for tests and tools.
    public func first(_ path: String) -> Element? {
        var current = self
        // Split over bytes, not characters, and compared as whole strings: this runs per resource.
        for part in path.utf8.split(separator: UInt8(ascii: ".")) {
            let name = String(Substring(part))
            guard let child = current.children.first(where: { $0.name == name }) else { return nil }
            current = child
        }
        return current
    }

    /// The value of the first child with this name, for primitives (`resource.string("status")`).
    public func string(_ name: String) -> String? {
        self[name]?.value
    }

    /// Appends a child, keeping definition order: the child goes after every sibling whose element
    /// comes before or at its own. Unknown names go last.
    public mutating func append(_ child: Element) {
        var child = child
        if let definition, let element = definition.element(named: child.name) {
            child.slot = element.slot
        } else {
            child.slot = Int16.max
        }
        var position = children.endIndex
        while position > children.startIndex && children[position - 1].slot > child.slot {
            position -= 1
        }
        children.insert(child, at: position)
    }

    /// Removes every child with this name.
    public mutating func removeChildren(named name: String) {
        children.removeAll { $0.name == name }
    }

    /// Sets a primitive child's value, replacing any children of that name
    /// (`observation.setValue("final", for: "status")`); a nil value removes them.
    public mutating func setValue(_ value: String?, for name: String) {
        removeChildren(named: name)
        guard let value, let definition, let element = definition.element(named: name),
              let typeName = element.typeNames.first else { return }
        append(Element(name: name, type: typeName, value: value))
    }

    /// Returns a copy with the `text` narrative removed everywhere, recursively
    /// (useful to compare instances whose narratives were dropped by a transformation).
    public func removingNarrative() -> Element {
        var copy = self
        copy.children = children.compactMap { child in
            if child.name == "text" && child.typeName == "Narrative" { return nil }
            return child.removingNarrative()
        }
        return copy
    }

    /// Visits this element and all its descendants, depth first.
    public func forEachDescendant(_ body: (Element) throws -> Void) rethrows {
        try body(self)
        for child in children { try child.forEachDescendant(body) }
    }
}

extension Element {
    /// Elements are equal when their names, types, values and children are (a child's position
    /// key is derived from its name and parent, so it takes no part).
    public static func == (lhs: Element, rhs: Element) -> Bool {
        lhs.name == rhs.name && lhs.typeIndex == rhs.typeIndex && lhs.value == rhs.value && lhs.children == rhs.children
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(typeIndex)
        hasher.combine(value)
        hasher.combine(children)
    }
}

extension Element: CustomStringConvertible {
    /// A compact, indented dump of the tree for debugging and test failures.
    public var description: String {
        var out = ""
        func dump(_ e: Element, _ indent: String) {
            out += indent + e.name
            if let t = e.typeName { out += ": " + t } else if e.isUnknown { out += ": (unknown)" }
            if let v = e.value { out += " = " + (v.count > 60 ? String(v.prefix(57)) + "..." : v) }
            out += "\n"
            for c in e.children { dump(c, indent + "  ") }
        }
        dump(self, "")
        return out
    }
}
