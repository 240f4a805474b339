import FHIR
import Foundation
import JSON

/// A FHIR NPM package (`hl7.fhir.us.core#6.1.0`): its manifest, its conformance resources and its
/// examples, read whole from a `.tgz`, an unpacked folder holding `package/package.json`, or a
/// folder or file of loose conformance resources (what sites usually ship: single
/// StructureDefinition files, JSON or XML). Nothing is fetched: there is no network here.
public struct FHIRPackage: Sendable {
    /// One example the package ships under `package/example/`, as bytes (the caller reads it).
    public struct Example: Sendable {
        public let file: String
        public let bytes: [UInt8]
    }

    /// A dependency the manifest names, `name` at `version`.
    public struct Dependency: Sendable, Hashable {
        public let name: String
        public let version: String

        public init(name: String, version: String) {
            self.name = name
            self.version = version
        }
    }

    /// The package name (`hl7.fhir.us.core`); for loose files, the path they were read from.
    public let name: String
    /// The package version (`6.1.0`); empty for loose files.
    public let version: String
    /// The FHIR versions it is for (`4.0.1`).
    public let fhirVersions: [String]
    /// The packages it depends on, as its manifest lists them.
    public let dependencies: [Dependency]
    /// Its conformance resources (every resource with a canonical URL outside `example/`).
    public let resources: [ConformanceResource]
    /// Its examples.
    public let examples: [Example]
    /// Where it was read from.
    public let path: String

    /// `name#version`, how FHIR's tools name a package.
    public var id: String { version.isEmpty ? name : "\(name)#\(version)" }

    public init(name: String, version: String, fhirVersions: [String] = ["4.0.1"], dependencies: [Dependency] = [],
                resources: [ConformanceResource], examples: [Example] = [], path: String) {
        self.name = name
        self.version = version
        self.fhirVersions = fhirVersions
        self.dependencies = dependencies
        self.resources = resources
        self.examples = examples
        self.path = path
    }

    /// Reads what is at `path`: a `.tgz` package, a folder with `package/package.json` (or a
    /// `package` folder itself), or a folder or file of loose conformance resources.
    public static func load(path: String) throws(FHIRPackageError) -> FHIRPackage {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { throw .notFound(path: path) }
        if isDirectory.boolValue {
            for manifest in ["package/package.json", "package.json"] where FileManager.default.fileExists(atPath: path + "/" + manifest) {
                return try unpacked(path: path, root: manifest == "package.json" ? path : path + "/package")
            }
            return try loose(path: path, files: folderFiles(path))
        }
        let bytes = try read(path)
        if bytes.starts(with: [0x1F, 0x8B]) { return try archive(path: path, compressed: bytes) }
        return try loose(path: path, files: [(path, bytes)])
    }

    /// Each path's package, in order (what `--package` and `ehr.packages` name); the first that
    /// cannot be read stops it.
    public static func load(paths: [String]) throws(FHIRPackageError) -> [FHIRPackage] {
        var loaded: [FHIRPackage] = []
        for path in paths { loaded.append(try load(path: path)) }
        return loaded
    }

    // MARK: Archives and folders

    private static func archive(path: String, compressed: [UInt8]) throws(FHIRPackageError) -> FHIRPackage {
        let tar: TarArchive
        do {
            tar = try TarArchive(try Gzip.inflate(compressed))
        } catch let failure as Gzip.Failure {
            throw .unreadable(path: path, reason: failure.message)
        } catch let failure as TarArchive.Failure {
            throw .unreadable(path: path, reason: "not a tar archive inside the gzip: \(failure)")
        } catch {
            throw .unreadable(path: path, reason: "\(error)")
        }
        return try assemble(path: path, files: tar.files.map { ($0.path, $0.bytes) })
    }

    private static func unpacked(path: String, root: String) throws(FHIRPackageError) -> FHIRPackage {
        var files: [(String, [UInt8])] = []
        for file in folderFiles(root) {
            files.append(("package/" + String(file.dropFirst(root.count + 1)), try read(file)))
        }
        return try assemble(path: path, files: files)
    }

    /// A package from its files, named as inside the archive (`package/…`).
    private static func assemble(path: String, files: [(String, [UInt8])]) throws(FHIRPackageError) -> FHIRPackage {
        guard let manifestBytes = files.first(where: { $0.0 == "package/package.json" })?.1 else {
            throw .notAPackage(path: path, reason: "it holds no package/package.json")
        }
        let manifest: JSONValue
        do { manifest = try JSONValue.parse(manifestBytes) } catch {
            throw .notAPackage(path: path, reason: "package/package.json is not JSON: \(error)")
        }
        guard let name = manifest["name"]?.stringValue, let version = manifest["version"]?.stringValue else {
            throw .notAPackage(path: path, reason: "package/package.json names no name and version")
        }
        let id = "\(name)#\(version)"
        var resources: [ConformanceResource] = []
        var examples: [Example] = []
        for (file, bytes) in files where file.hasSuffix(".json") {
            let inside = file.dropFirst("package/".count)
            if inside.hasPrefix("example/") {
                guard !inside.hasPrefix("example/.") else { continue }
                examples.append(Example(file: file, bytes: bytes))
                continue
            }
            // Conformance resources sit at the package's top level; `other/`, `openapi/` and
            // `xml/` hold the publisher's own files, and `.index.json` and the manifest are not resources.
            guard !inside.contains("/"), !inside.hasPrefix("."), inside != "package.json" else { continue }
            let json: JSONValue
            do { json = try JSONValue.parse(bytes) } catch {
                throw .badResource(path: path, file: file, reason: "not JSON: \(error)")
            }
            if let resource = ConformanceResource(json: json, origin: "\(id) \(file)") { resources.append(resource) }
        }
        let dependencies = (manifest["dependencies"].flatMap { value -> [(String, JSONValue)]? in
            if case .object(let members) = value { members } else { nil }
        } ?? []).compactMap { name, version in version.stringValue.map { Dependency(name: name, version: $0) } }
        return FHIRPackage(
            name: name, version: version,
            fhirVersions: manifest["fhirVersions"]?.arrayValue?.compactMap(\.stringValue) ?? [],
            dependencies: dependencies, resources: resources,
            examples: examples.sorted { $0.file < $1.file }, path: path)
    }

    // MARK: Loose files

    /// Conformance resources as single files, JSON or XML, or Bundles of them.
    private static func loose(path: String, files: [String]) throws(FHIRPackageError) -> FHIRPackage {
        var contents: [(String, [UInt8])] = []
        for file in files where file.hasSuffix(".json") || file.hasSuffix(".xml") { contents.append((file, try read(file))) }
        return try loose(path: path, files: contents)
    }

    private static func loose(path: String, files: [(String, [UInt8])]) throws(FHIRPackageError) -> FHIRPackage {
        var resources: [ConformanceResource] = []
        for (file, bytes) in files {
            let json: JSONValue
            do {
                let format = FHIRFormat.detect(head: Array(bytes.prefix(256)), path: file)
                if format == .json {
                    json = try JSONValue.parse(bytes)
                } else {
                    let element = try FHIRXMLReader(options: ParseOptions(sourceName: file)).read(bytes).resource
                    json = try JSONValue.parse(FHIRDocument.write(element, format: .json, pretty: false))
                }
            } catch {
                throw .badResource(path: path, file: file, reason: "\(error)")
            }
            let found = json["resourceType"]?.stringValue == "Bundle"
                ? (json["entry"]?.arrayValue ?? []).compactMap { $0["resource"] }
                : [json]
            let before = resources.count
            resources += found.compactMap { ConformanceResource(json: $0, origin: file) }
            if resources.count == before && file == path {
                throw .badResource(path: path, file: file, reason: "no conformance resource (nothing with a canonical url)")
            }
        }
        return FHIRPackage(name: path, version: "", resources: resources, path: path)
    }

    // MARK: Files

    private static func read(_ path: String) throws(FHIRPackageError) -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw .unreadable(path: path, reason: "the file cannot be read")
        }
        return [UInt8](data)
    }

    /// Every regular file under a folder, sorted, skipping hidden folders.
    private static func folderFiles(_ folder: String) -> [String] {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let full = folder + "/" + relative
            if FileManager.default.fileExists(atPath: full, isDirectory: &isDirectory), !isDirectory.boolValue {
                files.append(full)
            }
        }
        return files.sorted()
    }
}
