import FHIR
import FHIRPath
import Foundation
import Mapping

/// Reads what `caregate import` is given: files and directories of FHIR JSON, XML and NDJSON;
/// a Bundle of any type gives its entries, with the Bundle kept so references between entries
/// resolve. A file that cannot be read is reported and the others go on.
public struct ResourceFiles: Sendable {
    public var options: ParseOptions

    public init(options: ParseOptions = ParseOptions(lenient: true)) {
        self.options = options
    }

    /// The files at `paths`, directories searched for .json, .xml and .ndjson, in a stable order.
    public func files(_ paths: [String]) -> [String] {
        var result: [String] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
                let found = (FileManager.default.enumerator(atPath: path)?.compactMap { $0 as? String } ?? [])
                    .filter { name in [".json", ".xml", ".ndjson"].contains { name.lowercased().hasSuffix($0) } }.sorted()
                result += found.map { (path as NSString).appendingPathComponent($0) }
            } else {
                result.append(path)
            }
        }
        return result
    }

    /// The resources in one file, why any part of it could not be read, and what reading let
    /// through with a warning.
    public func read(_ path: String) -> (resources: [SourcedResource], problems: [ImportNote]) {
        var resources: [SourcedResource] = []
        let problems = forEach(path) { resource, _ in resources.append(resource) }
        return (resources, problems)
    }

    /// Hands each resource of one file to `body` as it is read (an NDJSON file line by line, so
    /// that a file of any size needs memory for one line; a Bundle whole, with each entry's
    /// `fullUrl`), and returns what could not be read and what reading let through with a warning.
    @discardableResult
    public func forEach(_ path: String, _ body: (SourcedResource, _ fullURL: String?) -> Void) -> [ImportNote] {
        var problems: [ImportNote] = []
        /// `Observation.ndjson:98:36: line 98: error: Observation: expected a value, …`: the
        /// place once, in the origin.
        func problem(_ error: FHIRFormatError, _ where_: String? = nil) {
            let first = error.issues.first { $0.severity == .error } ?? error.issues.first
            let location = first?.location
            let origin = location.map { $0.line > 0 ? "\(path):\($0.line):\($0.column)" : path } ?? path
            problems.append(ImportNote(kind: .error, resource: where_ ?? (path as NSString).lastPathComponent, path: location.flatMap { $0.path.isEmpty ? nil : $0.path },
                                       origin: origin, message: first?.message ?? "\(error)"))
        }
        // What a lenient read let through or changed (invalid UTF-8, control characters, unknown
        // elements) is reported where it is, so nothing changes without a word.
        func warning(_ issue: ParseIssue, in resource: Element) {
            let location = issue.location
            let label = [resource.resourceType, resource.string("id")].compactMap { $0 }.joined(separator: "/")
            problems.append(ImportNote(kind: .warning, resource: label.isEmpty ? (path as NSString).lastPathComponent : label,
                                       path: location.path.isEmpty ? nil : location.path,
                                       origin: location.line > 0 ? "\(path):\(location.line):\(location.column)" : path,
                                       message: issue.message))
        }
        do {
            let format = try FHIRFormat.detect(path: path)
            if format == .ndjson {
                let reader = try NDJSONReader(path: path, options: options)
                while true {
                    do {
                        guard let parsed = try reader.next() else { break }
                        parsed.warnings.forEach { warning($0, in: parsed.resource) }
                        body(SourcedResource(resource: parsed.resource, origin: "\(path):\(reader.lineNumber)"), nil)
                    } catch {
                        problem(error, "line \(reader.lineNumber)")
                    }
                }
                return problems
            }
            let parsed = try FHIRDocument.read(contentsOf: path, format: format, options: options)
            parsed.warnings.forEach { warning($0, in: parsed.resource) }
            let resource = parsed.resource
            guard resource.resourceType == "Bundle" else {
                body(SourcedResource(resource: resource, origin: path), nil)
                return problems
            }
            let index = BundleIndex(resource)
            for (i, entry) in resource.children.filter({ $0.name == "entry" }).enumerated() {
                guard let inner = entry["resource"] else { continue }
                body(SourcedResource(resource: inner, container: resource, index: index, origin: "\(path)#entry[\(i)]"), entry.string("fullUrl"))
            }
            return problems
        } catch {
            problem(error)
            return problems
        }
    }
}
