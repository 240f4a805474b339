import FHIRPackages
import Foundation

/// `../shared` beside the project, and the US Core packages in it.
enum SharedData {
    static let projectRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    /// `../shared/fhir-packages`, or nil when it is not there.
    static let packages: URL? = {
        let url = projectRoot.deletingLastPathComponent().appendingPathComponent("shared/fhir-packages")
        return FileManager.default.fileExists(atPath: url.path) ? url : nil
    }()

    static func skipNotice(_ test: String) {
        print("SKIPPED \(test): ../shared/fhir-packages is not present beside the project")
    }

    /// The US Core package of a version (`6.1.0`), read once per process.
    static func usCore(_ version: String) throws -> FHIRPackage? {
        guard let packages else { return nil }
        return try cache.withLock { cache in
            if let found = cache[version] { return found }
            let package = try FHIRPackage.load(path: packages.appendingPathComponent("hl7.fhir.us.core-\(version).tgz").path)
            cache[version] = package
            return package
        }
    }

    private static let cache = LockedPackages()
}

final class LockedPackages: @unchecked Sendable {
    // @unchecked: `value` is used only under `lock`.
    private let lock = NSLock()
    private var value: [String: FHIRPackage] = [:]
    func withLock<T>(_ body: (inout [String: FHIRPackage]) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
