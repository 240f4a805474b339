#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The FHIR R4 type system: every primitive, datatype, resource and backbone element with its
/// elements in definition order, generated from the R4 core package (see `fhir-tablegen`).
///
/// `ModelInfo.r4` is built once, on first use, from the committed table, so neither the build nor
/// the program needs the definitions at run time. Everything here is immutable and shared freely
/// across threads.
///
/// Table format, one fact per line (space separated):
/// - `B <value-set-url> <code>|<code>|...`: a required value set and its codes; the Nth `B` line is binding N.
/// - `T <name> <primitive|complex|resource|backbone> <base|-> [abstract]`: starts a type. Backbone
///   types are named by their path (`CarePlan.activity.detail`).
/// - `E <name> <min> <max|*> <type>|<type>... [m] [s] [b<N>]`: an element of the type above, in
///   definition order; a name ending in `[x]` is a choice; `m` modifier, `s` summary, `bN` required binding N.
public final class ModelInfo: Sendable {
    /// The R4 (4.0.1) model, parsed from the generated table on first use.
    public static let r4 = ModelInfo(table: ModelInfo.r4Table)
    /// The type of an element the model knows, held without a reference count: the writers ask
    /// it of every element they read in place.
    @inline(__always)
    func type(at element: UnsafePointer<Element>) -> TypeDefinition? {
        let index = element.pointee.typeIndex
        guard index >= 0 else { return nil }
        unowned(unsafe) let type = types[Int(index)]
        return type
    }

    /// The index of `Extension` in R4's types: the XML reader and writer ask of every element
    /// whether it is one (its `url` is an attribute), without comparing names.
    static let extensionTypeIndex = r4.type(named: "Extension")!.index

    /// Every type, in table order; an element's `typeIndices` index into this array.
    public let types: [TypeDefinition]
    private let typeIndexByName: [String: Int32]
    /// The required value sets, indexed by `ElementDefinition.binding`.
    public let bindings: [RequiredBinding]
    /// `Bundle.entry.resource`: the resources a skimming read skims (`ParseOptions.Skim`).
    let bundleEntryResource: ElementDefinition?

    /// Parses a table in the format above. The table is generated and committed; a malformed
    /// table is a programming error.
    init(table: String) {
        var bindings: [RequiredBinding] = []
        var pendingTypes: [(name: String, kind: TypeDefinition.Kind, base: String?, abstract: Bool, elements: [PendingElement])] = []
        // Read over the UTF-8 bytes: the table is read at every start of the program.
        var table = table
        table.withUTF8 { bytes in
            var lineStart = 0
            while lineStart < bytes.count {
                let lineEnd = bytes[lineStart...].firstIndex(of: 0x0A) ?? bytes.count
                let fields = Self.fields(of: UnsafeBufferPointer(rebasing: bytes[lineStart..<lineEnd]), separator: 0x20)
                lineStart = lineEnd + 1
                guard let tag = fields.first, tag.count == 1 else { continue }
                switch tag[0] {
                case UInt8(ascii: "B"):
                    let codes = fields.count > 2 ? Self.fields(of: fields[2], separator: 0x7C).map(Self.string) : []
                    bindings.append(RequiredBinding(valueSet: Self.string(fields[1]), codes: codes))
                case UInt8(ascii: "T"):
                    let kind = TypeDefinition.Kind(rawValue: Self.string(fields[2]))!
                    let base = Self.string(fields[3])
                    pendingTypes.append((Self.string(fields[1]), kind, base == "-" ? nil : base, fields.count > 4 && Self.string(fields[4]) == "abstract", []))
                case UInt8(ascii: "E"):
                    var name = Self.string(fields[1])
                    let isChoice = name.hasSuffix("[x]")
                    if isChoice { name.removeLast(3) }
                    let max = Self.string(fields[3])
                    var element = PendingElement(
                        name: name, isChoice: isChoice, min: Int(Self.string(fields[2]))!,
                        max: max == "*" ? nil : Int(max)!,
                        typeNames: Self.fields(of: fields[4], separator: 0x7C).map(Self.string))
                    for flag in fields.dropFirst(5) {
                        switch flag[0] {
                        case UInt8(ascii: "m"): element.isModifier = true
                        case UInt8(ascii: "s"): element.isSummary = true
                        case UInt8(ascii: "b"): element.binding = Int(Self.string(UnsafeBufferPointer(rebasing: flag.dropFirst())))!
                        default: break
                        }
                    }
                    pendingTypes[pendingTypes.count - 1].elements.append(element)
                default:
                    continue
                }
            }
        }
        var index: [String: Int32] = [:]
        for (i, type) in pendingTypes.enumerated() { index[type.name] = Int32(i) }
        self.typeIndexByName = index
        self.bindings = bindings
        let types = pendingTypes.enumerated().map { i, pending in
            let elements = pending.elements.enumerated().map { slot, e in
                ElementDefinition(
                    name: e.name, slot: Int16(slot), isChoice: e.isChoice, min: e.min, max: e.max,
                    typeNames: e.typeNames, typeIndices: e.typeNames.map { index[$0] ?? -1 },
                    isModifier: e.isModifier, isSummary: e.isSummary,
                    binding: e.binding.map { bindings[$0] })
            }
            return TypeDefinition(
                index: Int32(i), name: pending.name, kind: pending.kind, baseName: pending.base, baseIndex: pending.base.flatMap { index[$0] } ?? -1,
                isAbstract: pending.abstract, elements: elements)
        }
        self.types = types
        self.bundleEntryResource = index["Bundle.entry"].flatMap { types[Int($0)].elements.first { $0.name == "resource" } }
    }

    /// The non-empty fields of a line of the table, split at `separator`.
    private static func fields(of line: UnsafeBufferPointer<UInt8>, separator: UInt8) -> [UnsafeBufferPointer<UInt8>] {
        // A plain loop: `split` made this a third of every start of the program.
        var fields: [UnsafeBufferPointer<UInt8>] = []
        fields.reserveCapacity(8)
        var start = 0
        for i in 0...line.count where i == line.count || line[i] == separator {
            if i > start { fields.append(UnsafeBufferPointer(rebasing: line[start..<i])) }
            start = i + 1
        }
        return fields
    }

    private static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self)
    }

    private struct PendingElement {
        var name: String
        var isChoice: Bool
        var min: Int
        var max: Int?
        var typeNames: [String]
        var isModifier = false
        var isSummary = false
        var binding: Int?
    }

    /// The type with this name (`"Observation"`, `"Quantity"`, `"dateTime"`, `"CarePlan.activity"`).
    public func type(named name: String) -> TypeDefinition? {
        typeIndexByName[name].map { types[Int($0)] }
    }

    /// The index of the type with this name in `types`.
    public func typeIndex(named name: String) -> Int32? {
        typeIndexByName[name]
    }

    /// The resource type with this name, or nil when `name` is not a concrete R4 resource type.
    public func resourceType(named name: String) -> TypeDefinition? {
        guard let type = type(named: name), type.kind == .resource, !type.isAbstract else { return nil }
        return type
    }

    /// Whether `type` is `ancestor` or derives from it (`Age` is a `Quantity`, `Patient` a `DomainResource`).
    public func isType(_ type: TypeDefinition, derivedFrom ancestor: String) -> Bool {
        typeIndex(named: ancestor).map { isType(type, derivedFrom: $0) } ?? false
    }

    /// Whether `type` is the type at `ancestor` in `types` or derives from it: `isType(_:derivedFrom:)`
    /// for a name looked up once (FHIRPath's `is` and `as` resolve their type when parsed).
    public func isType(_ type: TypeDefinition, derivedFrom ancestor: Int32) -> Bool {
        var current = type
        while true {
            if current.index == ancestor { return true }
            guard current.baseIndex >= 0 else { return false }
            current = types[Int(current.baseIndex)]
        }
    }
}

/// A required binding: the element's code must be one of `codes`.
public struct RequiredBinding: Sendable, Hashable {
    /// The canonical URL of the value set.
    public let valueSet: String
    /// The value set's codes, expanded from the core package.
    public let codes: [String]

    /// Whether `code` is in the value set.
    public func contains(_ code: String) -> Bool { codes.contains(code) }
}

/// One FHIR type: a primitive, a datatype, a resource, or a backbone element named by its path.
public final class TypeDefinition: Sendable, CustomStringConvertible {
    /// What sort of type this is.
    public enum Kind: String, Sendable {
        /// A primitive type, a datatype, a resource, or a backbone element.
        case primitive, complex, resource, backbone
    }

    /// This type's index in `ModelInfo.types`.
    public let index: Int32
    /// The type name; for backbone elements, their path (`CarePlan.activity`).
    public let name: String
    /// What sort of type this is.
    public let kind: Kind
    /// The type this one specialises (`DomainResource`, `Element`, `BackboneElement`), if any.
    public let baseName: String?
    /// The index of `baseName`'s type in `ModelInfo.types`, or -1 for none.
    public let baseIndex: Int32
    /// Whether the type is abstract (`Resource`, `DomainResource`): no instance has it as its own
    /// type.
    public let isAbstract: Bool
    /// The elements in definition order, which is also FHIR XML's element order.
    public let elements: [ElementDefinition]
    /// The primitive's lexical kind; nil for other kinds.
    public let primitiveKind: PrimitiveKind?
    /// What a choice element's JSON name takes after its base name for this type (`Quantity`,
    /// `DateTime`), made once.
    let choiceSuffix: String
    /// JSON and XML property names (`status`, `valueQuantity`) to elements and chosen types.
    let properties: PropertyIndex
    private let elementSlotByName: [String: Int16]

    init(index: Int32, name: String, kind: Kind, baseName: String?, baseIndex: Int32, isAbstract: Bool, elements: [ElementDefinition]) {
        self.index = index
        self.name = name
        self.kind = kind
        self.baseName = baseName
        self.baseIndex = baseIndex
        self.isAbstract = isAbstract
        self.elements = elements
        self.primitiveKind = kind == .primitive ? PrimitiveKind(rawValue: name) : nil
        self.choiceSuffix = ElementDefinition.choiceSuffix(for: name)
        var entries: [(name: String, slot: Int16, type: Int32)] = []
        entries.reserveCapacity(elements.count)
        var slots: [String: Int16] = [:]
        slots.reserveCapacity(elements.count)
        for element in elements {
            slots[element.name] = element.slot
            if element.isChoice {
                for (typeName, typeIndex) in zip(element.typeNames, element.typeIndices) {
                    entries.append((element.name + ElementDefinition.choiceSuffix(for: typeName), element.slot, typeIndex))
                }
            } else {
                entries.append((element.name, element.slot, element.typeIndices.first ?? -1))
            }
        }
        self.properties = PropertyIndex(entries)
        self.elementSlotByName = slots
    }

    /// The element with this name (choice elements by their name without `[x]`: `value`).
    public func element(named name: String) -> ElementDefinition? {
        elementSlotByName[name].map { elements[Int($0)] }
    }

    /// The definition of one of an element's children: found through the slot the child was
    /// read into (no hashing of its name), by name when it has none.
    func element(of child: Element) -> ElementDefinition? {
        slot(named: child.name, at: child.slot).map { elements[$0] }
    }

    /// The slot of the element a child names: its own slot when the name there matches (the
    /// common case, no lookup), else the slot found by name.
    private func slot(named name: String, at slot: Int16) -> Int? {
        let slot = Int(slot)
        if slot < elements.count, elements[slot].name == name { return slot }
        return elementSlotByName[name].map(Int.init)
    }

    /// What a writer needs to know of a child's element: whether the definitions know it, whether
    /// it is a choice, whether it repeats. Found through the child's slot like `element(of:)`, and
    /// read without taking a reference to the definition (writers ask it of every child).
    func traits(of child: UnsafePointer<Element>) -> (known: Bool, isChoice: Bool, isRepeating: Bool) {
        guard let slot = slot(named: child.pointee.name, at: child.pointee.slot) else { return (false, false, false) }
        unowned(unsafe) let element = elements[slot]
        return (true, element.isChoice, element.isRepeating)
    }

    /// Resolves a JSON or XML property name (`valueQuantity`, `status`) to its element and the
    /// type it names, or nil for a name the type does not have.
    public func property(named name: String) -> (element: ElementDefinition, typeIndex: Int32)? {
        var name = name
        return name.withUTF8 { bytes in
            properties.lookup(bytes).map { (elements[Int($0.slot)], $0.type) }
        }
    }

    public var description: String { name }
}

/// One element of a type (a class, so that looking one up in a hot loop costs a retain, not a copy).
public final class ElementDefinition: Sendable {
    /// The element name; for choices, without `[x]` (`value`).
    public let name: String
    /// The element's position in its type's definition order.
    public let slot: Int16
    /// Whether this is a choice element (`value[x]`): its JSON and XML names carry the type.
    public let isChoice: Bool
    /// The minimum cardinality.
    public let min: Int
    /// The maximum cardinality, nil for `*`.
    public let max: Int?
    /// The allowed types by name; one unless `isChoice`.
    public let typeNames: [String]
    /// The allowed types as indices into `ModelInfo.types` (-1 where unknown).
    public let typeIndices: [Int32]
    /// Whether this element can change the meaning of its parent (`?!`): never ignore it.
    public let isModifier: Bool
    /// Whether the element is part of the resource's summary (`_summary=true`).
    public let isSummary: Bool
    /// The required binding for coded elements, when its value set is enumerable.
    public let binding: RequiredBinding?

    init(name: String, slot: Int16, isChoice: Bool, min: Int, max: Int?, typeNames: [String], typeIndices: [Int32],
         isModifier: Bool, isSummary: Bool, binding: RequiredBinding?) {
        self.name = name
        self.slot = slot
        self.isChoice = isChoice
        self.min = min
        self.max = max
        self.typeNames = typeNames
        self.typeIndices = typeIndices
        self.isModifier = isModifier
        self.isSummary = isSummary
        self.binding = binding
    }

    /// Whether the element repeats (JSON arrays).
    public var isRepeating: Bool { max != 1 }

    /// The suffix a choice element's name takes for a type: `Quantity` → `Quantity`, `dateTime` → `DateTime`.
    public static func choiceSuffix(for typeName: String) -> String {
        guard let first = typeName.first else { return typeName }
        return first.uppercased() + typeName.dropFirst()
    }
}

/// An open-addressing hash table from property-name bytes to (slot, type): the readers look up
/// names straight from the input buffer without creating Strings. Entries are plain values and
/// the names sit in one byte array, so a probe copies no reference.
struct PropertyIndex: Sendable {
    struct Entry: Sendable {
        var hash: UInt64
        var nameStart: Int32
        var nameCount: Int32
        /// -1 for an empty place.
        var slot: Int16
        var type: Int32
    }

    private var table: [Entry]
    private var names: [UInt8] = []
    private var mask: Int

    init(_ entries: [(name: String, slot: Int16, type: Int32)]) {
        var capacity = 8
        while capacity < entries.count * 3 { capacity <<= 1 }
        table = Array(repeating: Entry(hash: 0, nameStart: 0, nameCount: 0, slot: -1, type: -1), count: capacity)
        mask = capacity - 1
        for entry in entries {
            let start = names.count
            names.append(contentsOf: entry.name.utf8)
            let hash = names.withUnsafeBufferPointer { PropertyIndex.hash(UnsafeBufferPointer(rebasing: $0[start...])) }
            var i = Int(truncatingIfNeeded: hash) & mask
            while table[i].slot >= 0 { i = (i + 1) & mask }
            table[i] = Entry(hash: hash, nameStart: Int32(start), nameCount: Int32(names.count - start), slot: entry.slot, type: entry.type)
        }
    }

    @inline(__always)
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in bytes { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
        return h
    }

    @inline(__always)
    func lookup(_ bytes: UnsafeBufferPointer<UInt8>) -> (slot: Int16, type: Int32)? {
        let hash = PropertyIndex.hash(bytes)
        return table.withUnsafeBufferPointer { table in
            names.withUnsafeBufferPointer { names in
                var i = Int(truncatingIfNeeded: hash) & mask
                while table[i].slot >= 0 {
                    let entry = table[i]
                    if entry.hash == hash && Int(entry.nameCount) == bytes.count
                        && memcmp(names.baseAddress! + Int(entry.nameStart), bytes.baseAddress!, bytes.count) == 0 {
                        return (entry.slot, entry.type)
                    }
                    i = (i + 1) & mask
                }
                return nil
            }
        }
    }
}
