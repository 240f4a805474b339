/// Why a package, or a file of conformance resources, could not be read; each case names the file.
public enum FHIRPackageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing at this path.
    case notFound(path: String)
    /// The file could not be read or inflated, or is not a tar archive.
    case unreadable(path: String, reason: String)
    /// The archive or folder has no `package/package.json`, or that file is not a package manifest.
    case notAPackage(path: String, reason: String)
    /// One file inside the package or folder is not a FHIR resource.
    case badResource(path: String, file: String, reason: String)

    public var description: String {
        switch self {
        case .notFound(let path): "\(path): no such file or directory"
        case .unreadable(let path, let reason): "\(path): cannot be read: \(reason)"
        case .notAPackage(let path, let reason): "\(path): not a FHIR package: \(reason)"
        case .badResource(let path, let file, let reason): "\(path): \(file): \(reason)"
        }
    }
}
