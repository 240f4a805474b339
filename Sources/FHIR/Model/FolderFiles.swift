import Foundation

/// The files a command is given, with folders searched: one walk for the mapping files
/// `caregate validate` reads and the FHIR files `caregate import` reads.
public enum FolderFiles {
    /// The files at `paths` in a stable order: a folder, or a link to one, gives the files under
    /// it whose names end in one of `suffixes` (any case), sorted; any other path stays as given.
    /// A folder with no such file stays in the list as itself, so that reading it reports the
    /// folder by name instead of the run quietly finding nothing.
    public static func expand(_ paths: [String], suffixes: [String]) -> [String] {
        paths.flatMap { path -> [String] in
            guard isFolder(path) else { return [path] }
            let found = files(under: path, suffixes: suffixes)
            return found.isEmpty ? [path] : found
        }
    }

    /// Whether `path` is a folder, following a link.
    public static func isFolder(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Foundation's enumerator lists nothing under a link to a folder on Linux, so the walk
    /// starts at the folder the link names and the names it finds are joined to the path given.
    static func files(under path: String, suffixes: [String]) -> [String] {
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let names = FileManager.default.enumerator(atPath: resolved)?.compactMap { $0 as? String } ?? []
        let wanted = suffixes.map { $0.lowercased() }
        return names.filter { name in
            wanted.contains { name.lowercased().hasSuffix($0) } && !isFolder((resolved as NSString).appendingPathComponent(name))
        }.sorted().map { (path as NSString).appendingPathComponent($0) }
    }
}
