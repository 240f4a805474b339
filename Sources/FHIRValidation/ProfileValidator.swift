import FHIR
import FHIRPackages
import FHIRPath
import Foundation

/// Validates FHIR instances against StructureDefinitions: the base definition of each resource
/// and every profile it claims (`meta.profile`) or is asked to meet, with cardinality, types,
/// `fixed[x]`/`pattern[x]`, slicing, extensions, bindings, reference targets and invariants.
///
/// Profiles are compiled once and kept (the validator is shared across threads), and an
/// element equal to one already found clean against the same definition is not walked again
/// (`CleanVerdicts`: a gateway's exports repeat most of their content):
///
/// ```swift
/// let validator = ProfileValidator(conformance: ConformanceSet(packages: [try .load(path: "us-core-6.1.0.tgz")]))
/// let report = validator.validate(observation, against: ["http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure"])
/// if !report.isValid { print(report.errors) }
/// ```
public final class ProfileValidator: @unchecked Sendable {
    // @unchecked: `compiled`, `unusable` and the other caches are read and written only under `lock`; the rest is immutable.
    public let conformance: ConformanceSet
    public let terminology: ValueSetExpander
    let invariants = InvariantCache()
    /// Elements already found clean against a definition (`CleanVerdicts`).
    let cleanVerdicts: CleanVerdicts
    private let lock = NSLock()
    private var compiled: [CompiledKey: CompiledProfile?] = [:]

    /// A canonical as asked for, with the package unversioned claims are looked up in first.
    struct CompiledKey: Hashable {
        let canonical: String
        let package: String?
    }
    /// What each discriminator asks of a slice's items, by slice and discriminator.
    private var discriminatorPlans: [DiscriminatorKey: DiscriminatorPlan] = [:]
    /// The resource types a list of target profiles admits, by the node whose type lists them.
    private var referenceTypes: [ReferenceKey: Set<String>] = [:]

    /// A node's Reference or canonical type (an element's types are unique by code, so a node
    /// has at most one of each).
    struct ReferenceKey: Hashable {
        let node: ObjectIdentifier
        let canonical: Bool
    }

    struct DiscriminatorKey: Hashable {
        let slice: ObjectIdentifier
        let index: Int
    }

    /// A value worked out once per validator (`make` runs outside the lock; a race computes it twice).
    /// Inlined, so that each table's key path is resolved where it is named, not at every lookup.
    @inline(__always)
    func remembered<Key: Hashable, Value>(_ key: Key, in table: ReferenceWritableKeyPath<ProfileValidator, [Key: Value]>,
                                          _ make: () -> Value) -> Value {
        if let found = lock.withLock({ self[keyPath: table][key] }) { return found }
        let value = make()
        lock.withLock { self[keyPath: table][key] = value }
        return value
    }

    func discriminatorPlan(_ slice: CompiledProfile.Node, _ index: Int, _ make: () -> DiscriminatorPlan) -> DiscriminatorPlan {
        remembered(DiscriminatorKey(slice: ObjectIdentifier(slice), index: index), in: \.discriminatorPlans, make)
    }

    /// The invariants an element meets: its definition's, then its type's that the definition
    /// does not restate (by key), each with the element id it is reported under.
    func invariants(of node: CompiledProfile.Node, typeRoot: CompiledProfile.Node?) -> [(CompiledProfile.Invariant, String)] {
        // Most types (the primitives) add nothing but `ele-1`, which every element states: no lookup.
        guard let typeRoot, typeRoot !== node,
              !typeRoot.invariants.allSatisfy({ invariant in node.invariants.contains { $0.constraint.key == invariant.constraint.key } }) else {
            return node.reportedInvariants
        }
        return remembered(NodePair(node: ObjectIdentifier(node), typeRoot: ObjectIdentifier(typeRoot)), in: \.mergedInvariants) {
            let keys = Set(node.invariants.map(\.constraint.key))
            return node.reportedInvariants
                + typeRoot.invariants.filter { !keys.contains($0.constraint.key) }.map { ($0, typeRoot.definition.id) }
        }
    }

    struct NodePair: Hashable {
        let node: ObjectIdentifier
        let typeRoot: ObjectIdentifier
    }

    private var mergedInvariants: [NodePair: [(CompiledProfile.Invariant, String)]] = [:]

    /// The resource types the target profiles of a node's Reference (or canonical) type admit.
    func referenceTypes(of node: CompiledProfile.Node, canonical: Bool, _ make: () -> Set<String>) -> Set<String> {
        remembered(ReferenceKey(node: ObjectIdentifier(node), canonical: canonical), in: \.referenceTypes, make)
    }
    private var unusable: [String: String] = [:]

    public convenience init(conformance: ConformanceSet) {
        self.init(conformance: conformance, cleanVerdicts: 4096)
    }

    /// A validator that remembers at most `cleanVerdicts` elements found clean (0: none, every
    /// element walked each time; tests compare the two).
    init(conformance: ConformanceSet, cleanVerdicts capacity: Int) {
        self.conformance = conformance
        self.terminology = ValueSetExpander(conformance: conformance)
        self.cleanVerdicts = CleanVerdicts(capacity: capacity)
    }

    /// A validator over the R4 core alone.
    public convenience init() {
        self.init(conformance: ConformanceSet(packages: []))
    }

    /// The compiled profile a canonical names (`url` or `url|version`), or nil when it is not
    /// loaded or has no snapshot.
    public func profile(_ canonical: String, from package: String? = nil) -> CompiledProfile? {
        let key = CompiledKey(canonical: canonical, package: package)
        if let found = lock.withLock({ compiled[key] }) { return found }
        var result: CompiledProfile?
        if let resource = conformance.resolve(canonical, type: "StructureDefinition", from: package) {
            var structure = StructureDefinition(resource)
            if structure.snapshot == nil {
                // Site profiles usually come as differentials: their snapshot is generated.
                do { structure.snapshot = try SnapshotGenerator(conformance: conformance).snapshot(of: structure) } catch {
                    lock.withLock { unusable[canonical] = "\(error)" }
                }
            }
            result = CompiledProfile(structure, invariants: invariants)
        }
        lock.withLock { compiled[key] = result }
        return result
    }

    /// Why a loaded profile cannot be used (its snapshot could not be generated), if it cannot.
    public func unusableReason(_ canonical: String) -> String? {
        lock.withLock { unusable[canonical] }
    }

    /// The base definition of a type (`Observation`, `Quantity`, `string`).
    func baseProfile(ofType type: String) -> CompiledProfile? {
        guard let index = ModelInfo.r4.typeIndex(named: type) else {
            return profile("http://hl7.org/fhir/StructureDefinition/" + type)
        }
        return baseProfile(index: Int(index), type: type)
    }

    /// The base definition of an instance element's own type (asked for every element walked:
    /// found by the type's index, without hashing its name).
    func baseProfile(of item: Element) -> CompiledProfile? {
        guard item.typeIndex >= 0, let name = item.typeName else { return nil }
        return baseProfile(index: Int(item.typeIndex), type: name)
    }

    private func baseProfile(index: Int, type: String) -> CompiledProfile? {
        if let found = lock.withLock({ baseProfiles[index] }) { return found }
        let value = profile("http://hl7.org/fhir/StructureDefinition/" + type)
        lock.withLock { baseProfiles[index] = .some(value) }
        return value
    }

    /// The base definitions by type index (`.none`: not asked yet).
    private var baseProfiles = [CompiledProfile??](repeating: nil, count: ModelInfo.r4.types.count)

    /// Validates a resource (a Bundle with its entries, contained resources too) against its
    /// base definition, the profiles it claims, and `profiles`.
    /// `package` (`hl7.fhir.us.core#3.1.1`) is where unversioned claims are looked up first,
    /// when several versions of a package are loaded.
    public func validate(_ resource: Element, against profiles: [String] = [], in package: String? = nil) -> ValidationReport {
        var walk = InstanceWalk(validator: self, root: resource, package: package)
        walk.validateResource(resource, location: InstanceLocation(root: resource.resourceType ?? resource.name), extraProfiles: profiles)
        return ValidationReport(issues: walk.finishedIssues())
    }
}
