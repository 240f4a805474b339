import FHIRPath
import Foundation

/// A StructureDefinition's snapshot as a tree, ready to walk an instance with: each element's
/// children by name, each sliced element's slices, each invariant parsed once. Built once per
/// profile and shared (the validator caches it).
public final class CompiledProfile: Sendable {
    /// One element of the snapshot with its children and slices.
    public final class Node: Sendable {
        public let definition: StructureDefinition.ElementDefinition
        /// The child elements, in snapshot order (slices excluded).
        public let children: [Node]
        /// The slices of this element, when it is sliced, in order (re-slices under their slice).
        public let slices: [Node]
        /// Each constraint with its parsed expression, or why it could not be parsed.
        let invariants: [Invariant]
        /// The invariants with the element id they are reported under (this element's).
        let reportedInvariants: [(Invariant, String)]
        /// What the walk asks of every element, worked out once: the instance name it matches
        /// (`value` for `value[x]`), whether it is a choice, whether it repeats in its base, and
        /// whether it is sliced.
        let name: String
        let isChoice: Bool
        let repeatsInBase: Bool
        let isSliced: Bool
        let isExtension: Bool
        /// The children's positions in `children` by name.
        private let childIndexByName: [String: Int]
        /// The children an element without children must still be checked against: those with a
        /// minimum, and sliced ones (their slices' minimums).
        let requiredChildren: [Node]
        /// Which of `children` are checked even when the instance has none of them (as
        /// `requiredChildren`), by position: the walk skips the others without touching them.
        let checkedWhenAbsent: [Bool]
        /// The position of the child named `value` (a primitive's value, not walked as a child).
        let valueChildIndex: Int?
        /// How often elements walked against this node were remembered clean (`CleanVerdicts`).
        let verdictHitRate = VerdictHitRate()
        /// The same for all the items of this element together, when it is sliced.
        let slicedItemsHitRate = VerdictHitRate()

        init(definition: StructureDefinition.ElementDefinition, children: [Node], slices: [Node], invariants: [Invariant]) {
            self.definition = definition
            self.children = children
            self.slices = slices
            self.invariants = invariants
            reportedInvariants = invariants.map { ($0, definition.id) }
            name = definition.name
            isChoice = definition.isChoice
            repeatsInBase = definition.repeatsInBase
            isSliced = definition.slicing != nil && !slices.isEmpty
            isExtension = name == "extension" || name == "modifierExtension"
            checkedWhenAbsent = children.map { ($0.definition.min ?? 0) > 0 || $0.isSliced }
            requiredChildren = zip(children, checkedWhenAbsent).filter(\.1).map(\.0)
            valueChildIndex = children.firstIndex { $0.name == "value" }
            childIndexByName = Dictionary(children.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })
        }

        /// The child node for an instance child named `name` (`value` matches `value[x]`).
        func child(named name: String) -> Node? {
            childIndexByName[name].map { children[$0] }
        }

        /// The position in `children` of the child node for an instance child named `name`.
        func childIndex(named name: String) -> Int? {
            childIndexByName[name]
        }
    }

    /// A constraint and how it is checked, worked out once.
    final class Invariant: Sendable {
        let constraint: StructureDefinition.ElementDefinition.Constraint
        let check: Check

        enum Check: Sendable {
            /// `ele-1` (a value or children beyond the id): asked of every element, checked natively.
            case hasValueOrChildren
            case expression(FHIRPathExpression)
            /// An expression this engine does not read, and why.
            case unreadable(FHIRPathError)
            /// A constraint with no expression: nothing to check.
            case none
        }

        init(constraint: StructureDefinition.ElementDefinition.Constraint, check: Check) {
            self.constraint = constraint
            self.check = check
        }
    }

    public let structure: StructureDefinition
    /// `url|version`, as issues name the profile (worked out once: every element's issues name it).
    public let versionedURL: String
    public let root: Node
    /// Every node by element id, for `contentReference` (`#Questionnaire.item`).
    let nodesByID: [String: Node]

    /// Compiles the snapshot; nil when the definition has none.
    public init?(_ structure: StructureDefinition, invariants cache: InvariantCache) {
        guard let elements = structure.snapshot, !elements.isEmpty else { return nil }
        self.structure = structure
        versionedURL = structure.versionedURL
        var byID: [String: Node] = [:]
        // Children of each element id (slices apart), in order.
        var childIDs: [String: [String]] = [:]
        var sliceIDs: [String: [String]] = [:]
        var definitions: [String: StructureDefinition.ElementDefinition] = [:]
        for element in elements {
            definitions[element.id] = element
            let (parent, isSlice) = Self.parent(of: element)
            guard let parent else { continue }
            if isSlice { sliceIDs[parent, default: []].append(element.id) } else { childIDs[parent, default: []].append(element.id) }
        }
        func build(_ id: String) -> Node {
            let definition = definitions[id]!
            let node = Node(definition: definition,
                            children: (childIDs[id] ?? []).map(build),
                            slices: (sliceIDs[id] ?? []).map(build),
                            invariants: (definition.constraints ?? []).map(cache.invariant))
            byID[id] = node
            return node
        }
        root = build(elements[0].id)
        nodesByID = byID
    }

    /// The element a node's `contentReference` names, in this profile.
    func node(forReference reference: String) -> Node? {
        // `#Questionnaire.item`, or with the type's url before the `#`.
        let id = reference.split(separator: "#", omittingEmptySubsequences: false).last.map(String.init) ?? reference
        return nodesByID[id] ?? nodesByID.values.first { $0.definition.path == id && $0.definition.sliceName == nil }
    }

    /// The id of an element's parent, and whether the element is a slice of it (then the parent
    /// is the sliced element: `Observation.component` for `Observation.component:systolic`,
    /// `Observation.component:systolic` for the re-slice `Observation.component:systolic/sub`).
    static func parent(of element: StructureDefinition.ElementDefinition) -> (String?, Bool) {
        let id = element.id
        guard let dot = Self.lastSeparator(in: id) else { return (nil, false) }
        let last = id[id.index(after: dot)...]
        if let colon = last.lastIndex(of: ":") {
            let sliceName = last[last.index(after: colon)...]
            if let slash = sliceName.lastIndex(of: "/") {
                return (String(id[..<slash]), true)
            }
            return (String(id[..<colon]), true)
        }
        return (String(id[..<dot]), false)
    }

    /// The last `.` of an id (the slice names of published packages hold none).
    private static func lastSeparator(in id: String) -> String.Index? {
        id.lastIndex(of: ".")
    }
}

/// Parsed invariants, shared by every profile compiled by one validator (`ele-1` is on every
/// element of every profile: parsed once).
public final class InvariantCache: @unchecked Sendable {
    // @unchecked: `parsed` is read and written only under `lock`.
    private let lock = NSLock()
    private var parsed: [String: Result<FHIRPathExpression, FHIRPathError>] = [:]

    public init() {}

    /// A FHIRPath expression parsed once (invariants, discriminator paths).
    func expression(_ text: String) -> Result<FHIRPathExpression, FHIRPathError> {
        if let found = lock.withLock({ parsed[text] }) { return found }
        let result: Result<FHIRPathExpression, FHIRPathError>
        do { result = .success(try FHIRPathExpression(text)) } catch { result = .failure(error) }
        lock.withLock { parsed[text] = result }
        return result
    }

    func invariant(_ constraint: StructureDefinition.ElementDefinition.Constraint) -> CompiledProfile.Invariant {
        if constraint.key == "ele-1" { return .init(constraint: constraint, check: .hasValueOrChildren) }
        guard let text = constraint.expression else { return .init(constraint: constraint, check: .none) }
        switch expression(text) {
        case .success(let parsed): return .init(constraint: constraint, check: .expression(parsed))
        case .failure(let error): return .init(constraint: constraint, check: .unreadable(error))
        }
    }
}

