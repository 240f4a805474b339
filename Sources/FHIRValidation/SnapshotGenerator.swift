import FHIRPackages
import JSON

/// Why a snapshot could not be generated, naming the profile and the element.
public enum SnapshotError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The profile has no differential to apply.
    case noDifferential(profile: String)
    /// The profile's base definition is not loaded.
    case baseNotFound(profile: String, base: String)
    /// A differential element names something its base does not have.
    case elementNotFound(profile: String, element: String, reason: String)

    public var description: String {
        switch self {
        case .noDifferential(let profile): "\(profile): no differential to generate a snapshot from"
        case .baseNotFound(let profile, let base): "\(profile): its base definition \(base) is not loaded"
        case .elementNotFound(let profile, let element, let reason): "\(profile): differential element \(element): \(reason)"
        }
    }
}

/// Generates a profile's snapshot from its differential, as the FHIR publisher does for what the
/// validator reads: the base's snapshot (itself generated when the base has none), each
/// differential element merged into the element with its id (narrowing cardinality, types,
/// bindings, fixed and pattern values, adding invariants and slicing), new slices copied from
/// the element they slice, and the children of a datatype or a `contentReference` unrolled where
/// the differential constrains inside them.
public struct SnapshotGenerator: Sendable {
    public let conformance: ConformanceSet

    public init(conformance: ConformanceSet) {
        self.conformance = conformance
    }

    /// The snapshot `structure`'s differential gives over its base.
    public func snapshot(of structure: StructureDefinition) throws(SnapshotError) -> [StructureDefinition.ElementDefinition] {
        guard let differential = structure.differential else { throw .noDifferential(profile: structure.url) }
        guard let baseURL = structure.baseDefinition,
              let baseResource = conformance.resolve(baseURL, type: "StructureDefinition", from: conformance.package(ofOrigin: structure.origin)) else {
            throw .baseNotFound(profile: structure.url, base: structure.baseDefinition ?? "(none)")
        }
        let base = StructureDefinition(baseResource)
        let baseElements: [StructureDefinition.ElementDefinition]
        if let published = base.snapshot { baseElements = published } else { baseElements = try snapshot(of: base) }
        var work = Work(profile: structure.url, elements: baseElements, base: baseElements, generator: self)
        for element in differential {
            try work.apply(element)
        }
        // A profile names the element a `contentReference` points at by the base type's url.
        let root = "http://hl7.org/fhir/StructureDefinition/" + (work.elements.first?.path.split(separator: ".").first.map(String.init) ?? structure.type)
        return work.elements.map { element in
            var element = element
            if let reference = element.contentReference, reference.hasPrefix("#") { element.contentReference = root + reference }
            return element
        }
    }

    /// The children of a type, from its snapshot (generated when it has none), without its root.
    func typeChildren(_ canonical: String) -> [StructureDefinition.ElementDefinition]? {
        guard let resource = conformance.resolve(canonical, type: "StructureDefinition") else { return nil }
        let type = StructureDefinition(resource)
        guard let elements = type.snapshot ?? (try? snapshot(of: type)), !elements.isEmpty else { return nil }
        return Array(elements.dropFirst())
    }

    /// The elements being built, and the differential applied to them one element at a time.
    struct Work {
        let profile: String
        var elements: [StructureDefinition.ElementDefinition]
        /// The base's snapshot as it was: new slices start from the base's element, not from
        /// what this differential made of it.
        let base: [StructureDefinition.ElementDefinition]
        let generator: SnapshotGenerator

        mutating func apply(_ differential: StructureDefinition.ElementDefinition) throws(SnapshotError) {
            var differential = differential
            let id = try normalizedID(of: &differential)
            if elements.isEmpty == false, id == elements[0].id || differential.path == elements[0].path && !id.contains(".") {
                merge(differential, into: 0)
                return
            }
            let index = try ensure(id, sliceName: differential.sliceName)
            merge(differential, into: index)
        }

        /// The id the element has in the snapshot: a renamed choice (`valueQuantity`, as older
        /// differentials write it) is the choice element (`value[x]`) with its type narrowed.
        mutating func normalizedID(of differential: inout StructureDefinition.ElementDefinition) throws(SnapshotError) -> String {
            let parts = Self.segments(differential.id)
            var rebuilt: [String] = []
            for (i, part) in parts.enumerated() {
                let candidate = (rebuilt + [part]).joined(separator: ".")
                if i == 0 || elements.contains(where: { $0.id == candidate }) || part.contains(":") {
                    rebuilt.append(part)
                    continue
                }
                let parentID = rebuilt.joined(separator: ".")
                if let index = elements.firstIndex(where: { $0.id == parentID }), !hasChildren(index) { try unroll(index) }
                if elements.contains(where: { $0.id == candidate }) { rebuilt.append(part); continue }
                // `valueQuantity`: the choice `value[x]` whose type list has Quantity, read as the
                // publisher reads a renamed choice: the choice itself when it has that one type
                // already, or when the element is inside a slice; else a type slice of it
                // (`value[x]:valueQuantity`), which also narrows the choice to that type when it
                // makes the element required.
                if let choice = elements.first(where: { element in
                    element.isChoice && element.id.hasPrefix(parentID + ".") && Self.segments(element.id).count == rebuilt.count + 1
                        && part.hasPrefix(element.name) && (element.types ?? []).contains { $0.code.lowercased() == part.dropFirst(element.name.count).lowercased() }
                }) {
                    let typeName = String(part.dropFirst(choice.name.count))
                    let isLast = i == parts.count - 1
                    if isLast {
                        differential.path = choice.path
                        if differential.types == nil {
                            differential.types = (choice.types ?? []).filter { $0.code.lowercased() == typeName.lowercased() }
                        }
                    }
                    let inSlice = rebuilt.dropFirst().contains { $0.contains(":") }
                    if (choice.types ?? []).count == 1 || inSlice {
                        rebuilt.append(Self.segments(choice.id).last!)
                        continue
                    }
                    rebuilt.append(Self.segments(choice.id).last! + ":" + part)
                    if isLast {
                        differential.sliceName = part
                        if (differential.min ?? 0) >= 1 { narrowChoice(choice.id, to: differential) }
                    }
                    continue
                }
                rebuilt.append(part)
            }
            let id = rebuilt.joined(separator: ".")
            differential.id = id
            return id
        }

        /// Narrows a choice to the one type a renamed element names, with its cardinality.
        mutating func narrowChoice(_ id: String, to differential: StructureDefinition.ElementDefinition) {
            guard let index = elements.firstIndex(where: { $0.id == id }) else { return }
            elements[index].types = differential.types
            if let min = differential.min { elements[index].min = min }
            if differential.maxIsStated { elements[index].max = differential.max }
            elements[index].slicing = .init(discriminators: [.init(type: "type", path: "$this")], rules: "closed", ordered: false)
        }

        /// The index of the element with `id`, creating it: a slice copied from what it slices,
        /// children unrolled from their parent's type.
        mutating func ensure(_ id: String, sliceName: String?) throws(SnapshotError) -> Int {
            if let index = elements.firstIndex(where: { $0.id == id }) { return index }
            let last = Self.segments(id).last!
            if let colon = last.lastIndex(of: ":") {
                let slice = String(last[last.index(after: colon)...])
                let slicedID: String
                if let slash = slice.lastIndex(of: "/") {
                    slicedID = String(id.dropLast(slice.count - slice.distance(from: slice.startIndex, to: slash)))
                } else {
                    slicedID = String(id.dropLast(slice.count + 1))
                }
                let sliced = try ensure(slicedID, sliceName: nil)
                return insertSlice(id: id, name: sliceName ?? slice, of: sliced)
            }
            let parentID = String(id.dropLast(last.count + 1))
            guard !parentID.isEmpty else { throw .elementNotFound(profile: profile, element: id, reason: "not in the base") }
            let parent = try ensure(parentID, sliceName: nil)
            if !hasChildren(parent) { try unroll(parent) }
            guard let index = elements.firstIndex(where: { $0.id == id }) else {
                throw .elementNotFound(profile: profile, element: id, reason: "\(parentID) has no element \(last)")
            }
            return index
        }

        /// Whether the element at `index` has its children in the list.
        func hasChildren(_ index: Int) -> Bool {
            index + 1 < elements.count && elements[index + 1].id.hasPrefix(elements[index].id + ".")
        }

        /// Inserts the children of the element at `index`: its type's elements (the type's
        /// profile when it names one), or those its `contentReference` names.
        mutating func unroll(_ index: Int) throws(SnapshotError) {
            let parent = elements[index]
            var children: [StructureDefinition.ElementDefinition]
            var fromID: String
            if let reference = parent.contentReference {
                fromID = reference.split(separator: "#", omittingEmptySubsequences: false).last.map(String.init) ?? reference
                guard let start = elements.firstIndex(where: { $0.id == fromID }) else {
                    throw .elementNotFound(profile: profile, element: parent.id, reason: "its contentReference \(reference) is not in the base")
                }
                children = Array(elements[(start + 1)...].prefix { $0.id.hasPrefix(fromID + ".") })
            } else {
                guard let types = parent.types, types.count == 1 else {
                    throw .elementNotFound(profile: profile, element: parent.id, reason: "it has \(parent.types?.count ?? 0) types, so its children cannot be constrained")
                }
                let canonical = types[0].profiles.first ?? "http://hl7.org/fhir/StructureDefinition/" + types[0].code
                guard let found = generator.typeChildren(canonical) else {
                    throw .elementNotFound(profile: profile, element: parent.id, reason: "the definition of its type \(canonical) is not loaded")
                }
                children = found
                fromID = Self.segments(found.first?.id ?? types[0].code).first ?? types[0].code
            }
            let fromPath = fromID.split(separator: ":").first.map(String.init) ?? fromID
            let rewritten = children.map { child in
                var copy = child
                copy.id = parent.id + copy.id.dropFirst(fromID.count)
                copy.path = parent.path + copy.path.dropFirst(fromPath.count)
                return copy
            }
            elements.insert(contentsOf: rewritten, at: index + 1)
        }

        /// A new slice: a copy of the sliced element and its children, after the sliced
        /// element's own children and slices.
        mutating func insertSlice(id: String, name: String, of sliced: Int) -> Int {
            let slicedID = elements[sliced].id
            var end = sliced + 1
            while end < elements.count && (elements[end].id.hasPrefix(slicedID + ".") || elements[end].id.hasPrefix(slicedID + ":") || elements[end].id.hasPrefix(slicedID + "/")) {
                end += 1
            }
            if elements[sliced].slicing == nil {
                // Slicing implied by the slices: a choice by type (`value[x]:valueQuantity`),
                // extensions by url.
                if elements[sliced].isChoice {
                    elements[sliced].slicing = .init(discriminators: [.init(type: "type", path: "$this")], rules: "open", ordered: false)
                } else if elements[sliced].name == "extension" || elements[sliced].name == "modifierExtension" {
                    elements[sliced].slicing = .init(discriminators: [.init(type: "value", path: "url")], rules: "open", ordered: false)
                }
            }
            // The slice starts as the base's element (this differential's changes to the sliced
            // element are not the slice's), or as the element now when the base has none.
            let source: [StructureDefinition.ElementDefinition]
            if let start = base.firstIndex(where: { $0.id == slicedID }) {
                source = [base[start]] + base[(start + 1)...].prefix { $0.id.hasPrefix(slicedID + ".") || $0.id.hasPrefix(slicedID + ":") }
                    .filter { $0.id.hasPrefix(slicedID + ".") }
            } else {
                source = [elements[sliced]] + elements[(sliced + 1)..<end].filter { $0.id.hasPrefix(slicedID + ".") }
            }
            var subtree = source
            subtree[0].sliceName = name
            subtree[0].slicing = nil
            subtree[0].min = 0
            let copies = subtree.map { element in
                var copy = element
                copy.id = id + element.id.dropFirst(slicedID.count)
                return copy
            }
            elements.insert(contentsOf: copies, at: end)
            return end
        }

        /// Applies what a differential element states to the snapshot element at `index`.
        mutating func merge(_ differential: StructureDefinition.ElementDefinition, into index: Int) {
            var element = elements[index]
            if let sliceName = differential.sliceName { element.sliceName = sliceName }
            if let min = differential.min { element.min = min }
            if differential.maxIsStated { element.max = differential.max; element.maxIsStated = true }
            if let types = differential.types { element.types = types }
            if let fixed = differential.fixed { element.fixed = fixed }
            if let pattern = differential.pattern { element.pattern = pattern }
            if var slicing = differential.slicing {
                if slicing.discriminators.isEmpty, let existing = element.slicing { slicing.discriminators = existing.discriminators }
                element.slicing = slicing
            }
            if let constraints = differential.constraints {
                let existing = Set((element.constraints ?? []).map(\.key))
                element.constraints = (element.constraints ?? []) + constraints.filter { !existing.contains($0.key) }
            }
            if let binding = differential.binding, (element.types ?? []).contains(where: { Self.bindable.contains($0.code) }) {
                element.binding = .init(strength: binding.strength, valueSet: binding.valueSet ?? element.binding?.valueSet)
            }
            if let reference = differential.contentReference { element.contentReference = reference }
            if let maxLength = differential.maxLength { element.maxLength = maxLength }
            if let isModifier = differential.isModifier { element.isModifier = isModifier }
            elements[index] = element
        }

        /// The types a binding applies to (a binding stated on an Extension is dropped).
        static let bindable: Set<String> = ["code", "Coding", "CodeableConcept", "Quantity", "string", "uri", "canonical"]

        /// An id's parts at the dots outside slice names.
        static func segments(_ id: String) -> [String] {
            id.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        }
    }
}

extension ConformanceSet {
    /// The id of the package an origin (`hl7.fhir.us.core#6.1.0 package/…`) names.
    func package(ofOrigin origin: String) -> String? {
        packages.first { origin.hasPrefix($0.id + " ") || origin == $0.id }?.id
    }
}
