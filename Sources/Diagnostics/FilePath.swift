/// A path's folder and name, split at its last `/` (trailing ones aside). Foundation's NSString
/// path methods crash on a bare file name on Linux (`caregate import F --store S` did), so the
/// project splits paths here.
public enum FilePath {
    /// The folder: `.` for a bare name, `/` for a file at the root.
    public static func folder(of path: String) -> String {
        let trimmed = trimmingTrailingSlashes(path)
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        let folder = trimmingTrailingSlashes(String(trimmed[..<slash]))
        return folder.isEmpty ? "/" : folder
    }

    /// The last component: the file's or folder's own name.
    public static func name(of path: String) -> String {
        let trimmed = trimmingTrailingSlashes(path)
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    static func trimmingTrailingSlashes(_ path: String) -> String {
        var path = Substring(path)
        while path.count > 1 && path.hasSuffix("/") { path = path.dropLast() }
        return String(path)
    }
}
