/// The conformance resources validation can see: the R4 core and the packages loaded, indexed by
/// canonical, with versions (`url|version`). Like the HL7 validator's package cache, but fixed at
/// creation and without any network.
public struct ConformanceSet: Sendable {
    /// A dependency a loaded package names that is not loaded, once per package name, with the
    /// packages that need it. What it defines (value sets, extensions, profiles) cannot be checked.
    public struct MissingDependency: Sendable, Hashable, CustomStringConvertible {
        public let name: String
        public let version: String
        public let neededBy: [String]
        public var description: String {
            "package \(name)#\(version) (needed by \(neededBy.joined(separator: ", "))) is not loaded: what it defines cannot be checked"
        }
    }

    /// The packages, the core first.
    public let packages: [FHIRPackage]
    /// Dependencies named and not loaded, each once.
    public let missingDependencies: [MissingDependency]
    private let byURL: [String: [(package: Int, resource: ConformanceResource)]]

    /// The core, then `packages` in order (a later package's resource wins a tie of versions).
    public init(packages: [FHIRPackage], core: FHIRPackage = .r4Core) {
        let all = [core] + packages
        self.packages = all
        var index: [String: [(package: Int, resource: ConformanceResource)]] = [:]
        for (i, package) in all.enumerated() {
            for resource in package.resources { index[resource.url, default: []].append((i, resource)) }
        }
        byURL = index
        let loaded = Set(all.map(\.name))
        var missing: [String: (version: String, neededBy: [String])] = [:]
        var order: [String] = []
        for package in all {
            for dependency in package.dependencies where !loaded.contains(dependency.name) {
                if missing[dependency.name] == nil { order.append(dependency.name) }
                missing[dependency.name, default: (dependency.version, [])].neededBy.append(package.id)
            }
        }
        missingDependencies = order.map { MissingDependency(name: $0, version: missing[$0]!.version, neededBy: missing[$0]!.neededBy) }
    }

    /// The resource a canonical names: with a version, that version exactly; without one, the one
    /// in `package` (the package of the resource that refers to it) if it has it, else the highest
    /// version loaded.
    public func resolve(_ canonical: String, type: String? = nil, from package: String? = nil) -> ConformanceResource? {
        let wanted = Canonical(canonical)
        guard var candidates = byURL[wanted.url] else { return nil }
        if let type { candidates = candidates.filter { $0.resource.resourceType == type } }
        if let version = wanted.version {
            return candidates.last { $0.resource.version == version }?.resource
                ?? candidates.last { $0.resource.version.map { Self.isSameRelease(version, $0) } ?? false }?.resource
        }
        if let package, let own = candidates.last(where: { packages[$0.package].id == package }) { return own.resource }
        return candidates.max { Self.isOlder($0.resource.version, $1.resource.version) || ($0.resource.version == $1.resource.version && $0.package < $1.package) }?.resource
    }

    /// Every loaded resource of a type (`StructureDefinition`), in package order.
    public func resources(ofType type: String) -> [ConformanceResource] {
        packages.flatMap { $0.resources.filter { $0.resourceType == type } }
    }

    /// `6.1` names `6.1.0` (a version reference may leave out the patch).
    static func isSameRelease(_ wanted: String, _ actual: String) -> Bool {
        actual.hasPrefix(wanted + ".")
    }

    /// Compares versions part by part, numbers as numbers (`3.1.1` < `6.1.0` < `6.10.0`).
    static func isOlder(_ a: String?, _ b: String?) -> Bool {
        let left = (a ?? "").split(whereSeparator: { $0 == "." || $0 == "-" })
        let right = (b ?? "").split(whereSeparator: { $0 == "." || $0 == "-" })
        for (x, y) in zip(left, right) where x != y {
            if let m = Int(x), let n = Int(y) { return m < n }
            return x < y
        }
        return left.count < right.count
    }
}
