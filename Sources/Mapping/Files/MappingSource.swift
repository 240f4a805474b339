import Diagnostics
import FHIR
import Foundation

/// The mapping files shipped in `Mappings/`, built into the binary, so that `caregate import`
/// works from any folder and in a container that holds nothing but the executable. Paths are
/// relative to `Mappings/`; on the command line and in `extends`/`include` they are written
/// `builtin:careplan.yaml`, `builtin:shared/timing.yaml`.
public enum BuiltInMappings {
    /// Every shipped file by its path under `Mappings/` (a test checks that none is missing).
    public static let files: [String: [UInt8]] = [
        "README.md": PackageResources.README_md,
        "careplan.yaml": PackageResources.careplan_yaml,
        "careteam.yaml": PackageResources.careteam_yaml,
        "medicationrequest.yaml": PackageResources.medicationrequest_yaml,
        "observation.yaml": PackageResources.observation_yaml,
        "patient.yaml": PackageResources.patient_yaml,
        "servicerequest.yaml": PackageResources.servicerequest_yaml,
        "shared/healthkit.yaml": PackageResources.healthkit_yaml,
        "shared/observation-codes.yaml": PackageResources.observation_codes_yaml,
        "shared/task-codes.yaml": PackageResources.task_codes_yaml,
        "shared/timing.yaml": PackageResources.timing_yaml,
        "task.yaml": PackageResources.task_yaml,
        "tests/careteam-standalone.expected.json": PackageResources.careteam_standalone_expected_json,
        "tests/hba1c-standalone.expected.json": PackageResources.hba1c_standalone_expected_json,
        "tests/maria-lopez-demo-bundle.expected.json": PackageResources.maria_lopez_demo_bundle_expected_json,
        "tests/metformin-standalone.expected.json": PackageResources.metformin_standalone_expected_json,
        "tests/patient-maria-lopez.expected.json": PackageResources.patient_maria_lopez_expected_json,
        "tests/weight-without-task.expected.json": PackageResources.weight_without_task_expected_json,
    ]

    /// Writes the built-in files into `directory` (created if needed), for a site to edit;
    /// refuses to replace a file that is there already unless `overwrite`. Returns the paths written.
    public static func dump(to directory: String, overwrite: Bool = false) throws(MappingError) -> [String] {
        var written: [String] = []
        for (relative, bytes) in files.sorted(by: { $0.key < $1.key }) {
            let path = (directory as NSString).appendingPathComponent(relative)
            let at = SourceLocation(file: path, line: 1, column: 1)
            if !overwrite && FileManager.default.fileExists(atPath: path) {
                throw MappingError([Diagnostic(.error, at, "the file exists already; nothing was written (--force replaces the shipped files)")])
            }
            do {
                try FileManager.default.createDirectory(atPath: FilePath.folder(of: path), withIntermediateDirectories: true)
                try Data(bytes).write(to: URL(fileURLWithPath: path), options: .atomic)
            } catch {
                throw MappingError([Diagnostic(.error, at, "cannot write the file: \(error.localizedDescription)")])
            }
            written.append(path)
        }
        return written
    }
}

/// Where the loader reads mapping files: the file system, or the built-in files for paths that
/// start with `builtin:`. Relative `include`, `extends` and test paths resolve against the file
/// naming them, within the same place.
public enum MappingSource {
    /// What starts a built-in file's path.
    public static let builtInPrefix = "builtin:"

    /// Whether the path names a built-in file.
    public static func isBuiltIn(_ path: String) -> Bool { path.hasPrefix(builtInPrefix) }

    /// The file's name without its folder (`careplan.yaml` for `builtin:careplan.yaml` and for
    /// `site/careplan.yaml`), as provenance records name the rule's file.
    public static func fileName(_ path: String) -> String {
        let plain = isBuiltIn(path) ? String(path.dropFirst(builtInPrefix.count)) : path
        return FilePath.name(of: plain)
    }

    /// The file's bytes, or nil when there is no such file.
    public static func contents(_ path: String) -> Data? {
        if isBuiltIn(path) { return BuiltInMappings.files[String(path.dropFirst(builtInPrefix.count))].map { Data($0) } }
        return (try? FileBytes.read(path)).map { Data($0) }
    }

    /// Whether the file exists (built in, or on disk).
    public static func exists(_ path: String) -> Bool {
        if isBuiltIn(path) { return BuiltInMappings.files[String(path.dropFirst(builtInPrefix.count))] != nil }
        return FileManager.default.fileExists(atPath: path)
    }

    /// `relative` as named in `file`: absolute and `builtin:` paths as they are, others against
    /// the folder of `file`.
    public static func resolve(_ relative: String, from file: String) -> String {
        if relative.hasPrefix("/") || isBuiltIn(relative) { return relative }
        guard isBuiltIn(file) else {
            let folder = file.contains("/") ? FilePath.folder(of: file) : ""
            return ((folder as NSString).appendingPathComponent(relative) as NSString).standardizingPath
        }
        var parts = file.dropFirst(builtInPrefix.count).split(separator: "/").dropLast().map(String.init)
        for part in relative.split(separator: "/") {
            switch part {
            case ".": continue
            case "..": if parts.last == nil || parts.last == ".." { parts.append("..") } else { parts.removeLast() }
            default: parts.append(String(part))
            }
        }
        return builtInPrefix + parts.joined(separator: "/")
    }

    /// The folder mapping files may read inside when no root is given: the one holding the
    /// mapping folder named (a file's own folder; a mapping folder and what sits beside it, as
    /// the shipped `Mappings/` reads `../FHIRSamples/` for its golden tests), whatever the working
    /// directory; for several, the folder holding all of theirs.
    public static func defaultRoot(for paths: [String]) -> String {
        let roots = paths.filter { !isBuiltIn($0) }.map { path -> [Substring] in
            let real = realPath(path)
            let folder = FileManager.default.fileExists(atPath: real) && !isDirectory(real) ? FilePath.folder(of: real) : real
            return FilePath.folder(of: folder).split(separator: "/")
        }
        guard var common = roots.first else { return "/" }
        for root in roots.dropFirst() {
            common = Array(zip(common, root).prefix { $0 == $1 }.map(\.0))
        }
        return "/" + common.joined(separator: "/")
    }

    static func isDirectory(_ path: String) -> Bool {
        var directory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &directory) && directory.boolValue
    }

    /// Whether `path` lies inside the folder `root` (symbolic links followed); built-in files
    /// always do. What mapping files may read (`include`, `extends`, test inputs).
    public static func isInside(_ path: String, root: String) -> Bool {
        if isBuiltIn(path) { return true }
        let folder = realPath(root), target = realPath(path)
        return folder == "/" || target == folder || target.hasPrefix(folder + "/")
    }

    /// The path with `.`, `..` and symbolic links resolved; a last component that does not
    /// exist yet (a snapshot to be written) is kept as it is, after its resolved folder.
    static func realPath(_ path: String) -> String {
        func resolved(_ p: String) -> String { URL(fileURLWithPath: p).standardizedFileURL.resolvingSymlinksInPath().path }
        let name = FilePath.name(of: path)
        guard !FileManager.default.fileExists(atPath: path), !["", ".", ".."].contains(name) else { return resolved(path) }
        return resolved(FilePath.folder(of: path)) + "/" + name
    }

    /// Whether `path` (resolved from `file`) lies inside the folder of `file`, symbolic links
    /// followed: where a golden test may write its snapshot.
    public static func isInsideFolder(_ path: String, of file: String) -> Bool {
        if isBuiltIn(file) { return isBuiltIn(path) && !path.contains("..") }
        guard !isBuiltIn(path) else { return false }
        let folder = realPath(FilePath.folder(of: file))
        return realPath(path).hasPrefix(folder + "/")
    }

    /// The .yaml files at `paths`: directories searched, `builtin:` alone for every built-in
    /// file (a missing path is kept, to be reported when read).
    static func yamlFiles(_ paths: [String]) -> [String] {
        paths.flatMap { path in
            path == builtInPrefix ? BuiltInMappings.files.keys.filter(isYAML).sorted().map { builtInPrefix + $0 }
                : isBuiltIn(path) ? [path] : FolderFiles.expand([path], suffixes: [".yaml", ".yml"])
        }
    }

    static func isYAML(_ path: String) -> Bool { path.hasSuffix(".yaml") || path.hasSuffix(".yml") }
}
