import CareStore
import Diagnostics
import Foundation

/// The mapping files in use, by the resource type each maps.
public struct MappingSet: Sendable {
    /// The files by the resource type each maps.
    public var files: [String: MappingFile]
    /// The tables of the shared table files among the paths (what export reads).
    public var sharedTables: MappingTables

    /// A set of these files.
    public init(files: [String: MappingFile], sharedTables: MappingTables = MappingTables()) {
        self.files = files
        self.sharedTables = sharedTables
    }

    /// By mapped resource type, what its tasks' outcomes are exported as, where a file says.
    public var exportTargets: [String: ExportTarget] { files.compactMapValues(\.exportAs) }

    /// Loads and validates the mapping files at `paths` (files, directories, `builtin:` for the
    /// built-in ones) and nothing else; a set with any error is refused with every finding, as
    /// `caregate validate` prints them.
    public static func load(_ paths: [String], root: String? = nil) throws(MappingError) -> MappingSet {
        var files: [String: MappingFile] = [:]
        var problems: [Diagnostic] = []
        var shared = MappingTables()
        for (contents, found) in read(MappingSet.yamlFiles(paths), root: root) {
            defer { problems += found.filter { $0.severity == .error }.sorted(by: MappingValidator.order) }
            switch contents {
            case .tables(let tables):
                shared.observationCodes.merge(tables.observationCodes) { $1 }
                shared.units.merge(tables.units) { $1 }
                shared.healthKit.merge(tables.healthKit) { $1 }
                shared.siteRules += tables.siteRules
                shared.exportProfiles += tables.exportProfiles
                shared.origins.merge(tables.origins) { $1 }
            case .mapping(let file?):
                if let other = files[file.resource] {
                    problems.append(Diagnostic(.error, file.location, "a second mapping for \(file.resource) (the first is \(other.path)); use extends to override one"))
                }
                files[file.resource] = file
            case .mapping(nil):
                continue
            }
        }
        if !problems.isEmpty { throw MappingError(problems) }
        return MappingSet(files: files, sharedTables: shared)
    }

    /// Each file read and, if a mapping, validated: the files on as many cores as there are,
    /// one loader for all (each file included by several is parsed once). In `paths`' order.
    static func read(_ paths: [String], root: String?) -> [(contents: MappingLoader.Contents, diagnostics: [Diagnostic])] {
        let loader = MappingLoader(root: root)
        let validator = MappingValidator(root: root)
        let results = Locked([(contents: MappingLoader.Contents, diagnostics: [Diagnostic])?](repeating: nil, count: paths.count))
        DispatchQueue.concurrentPerform(iterations: paths.count) { i in
            var (contents, found) = loader.read(paths[i])
            if case .mapping(let file?) = contents { found += validator.validate(file) }
            results.withLock { $0[i] = (contents, found) }
        }
        return results.withLock { $0.map { $0! } }
    }

    /// The .yaml files at `paths`: directories searched, `builtin:` for the built-in files (a
    /// missing path is kept, to be reported when read).
    public static func yamlFiles(_ paths: [String]) -> [String] { MappingSource.yamlFiles(paths) }
}

extension MappingSet {
    /// The built-in mapping files with a site's over them, as every command loads them: a site
    /// mapping file replaces the built-in one for its resource type (or builds on it with
    /// `extends: builtin:careplan.yaml`), a site file of shared tables adds and overrides
    /// entries, and a resource type only the site maps is added. No site paths: the built-in set.
    public static func load(site paths: [String], root: String? = nil) throws(MappingError) -> MappingSet {
        var merged = try load([MappingSource.builtInPrefix])
        guard !paths.isEmpty else { return merged }
        let site = try load(paths, root: root)
        merged.files.merge(site.files) { $1 }
        merged.sharedTables.observationCodes.merge(site.sharedTables.observationCodes) { $1 }
        merged.sharedTables.units.merge(site.sharedTables.units) { $1 }
        merged.sharedTables.healthKit.merge(site.sharedTables.healthKit) { $1 }
        merged.sharedTables.siteRules += site.sharedTables.siteRules
        merged.sharedTables.exportProfiles += site.sharedTables.exportProfiles
        merged.sharedTables.origins.merge(site.sharedTables.origins) { $1 }
        return merged
    }
}
