import Foundation

/// Scratch files an import makes beside the store (the staging database, spilled notes), named by
/// the process that made them so that ones a killed process left behind can be told from those
/// of a run still going, and removed.
public enum ScratchFile {
    /// A new scratch file's path: `<directory>/<prefix>-<pid>-<uuid><suffix>`.
    public static func path(in directory: String, prefix: String, suffix: String) -> String {
        (directory as NSString).appendingPathComponent("\(prefix)-\(getpid())-\(UUID().uuidString)\(suffix)")
    }

    /// Removes the scratch files with this prefix whose process is gone (killed before it could
    /// remove them); returns their names.
    @discardableResult
    public static func removeAbandoned(in directory: String, prefix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        var removed: [String] = []
        for name in names where name.hasPrefix(prefix + "-") {
            guard let pid = Int32(name.dropFirst(prefix.count + 1).prefix { $0.isNumber }), pid > 0, pid != getpid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            if unlink((directory as NSString).appendingPathComponent(name)) == 0 { removed.append(name) }
        }
        return removed
    }
}
