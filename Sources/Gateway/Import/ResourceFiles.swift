import FHIR
import FHIRPath
import Foundation
import Mapping

/// Reads what `caregate import` is given: files and directories of FHIR JSON, XML and NDJSON;
/// a Bundle of any type gives its entries, with the Bundle kept so references between entries
/// resolve. A file that cannot be read is reported and the others go on.
public struct ResourceFiles: Sendable {
    /// How files are parsed (lenient by default: what can be read is, with a warning).
    public var options: ParseOptions

    /// A reader with these options.
    public init(options: ParseOptions = ParseOptions(lenient: true)) {
        self.options = options
    }

    /// The files at `paths`, directories searched for .json, .xml and .ndjson, in a stable order.
    public func files(_ paths: [String]) -> [String] {
        FolderFiles.expand(paths, suffixes: [".json", ".xml", ".ndjson"])
    }

    /// The Questionnaires in files and folders (`--questionnaires`): forms for survey activities
    /// besides those the imported data holds. Other resources are passed over; a file that
    /// cannot be read, and a folder holding no form, are notes naming them.
    public func questionnaires(_ paths: [String]) -> (catalog: QuestionnaireCatalog, problems: [ImportNote]) {
        var catalog = QuestionnaireCatalog()
        var problems: [ImportNote] = []
        for path in paths {
            let before = catalog.count
            for file in files([path]) { problems += forEach(file) { resource, _ in catalog.add(resource) } }
            if catalog.count == before, problems.isEmpty {
                problems.append(ImportNote(kind: .warning, resource: (path as NSString).lastPathComponent, path: nil, origin: path,
                                           message: "no Questionnaire in it: survey activities will not find their forms here"))
            }
        }
        return (catalog, problems)
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
        for unit in units(path, linesPerUnit: 1) { problems += parse(unit, keepingText: false) { resource, fullURL, _ in body(resource, fullURL) } }
        return problems
    }

    /// A piece of a file read but not yet parsed, so that pieces can be parsed on several cores:
    /// a run of an NDJSON file's lines, a whole JSON or XML file, or what could not be read.
    public enum Unit: Sendable {
        /// A run of an NDJSON file's lines.
        case lines(path: String, [NDJSONReader.Line], options: ParseOptions)
        /// A whole JSON or XML file.
        case file(path: String)
        /// What could not be read, as a note.
        case unreadable(ImportNote)
    }

    /// Cuts one file into units, in order: an NDJSON file into runs of `linesPerUnit` lines (a
    /// line that cannot be read ends its run and becomes a unit of its own), any other file whole.
    public func units(_ path: String, linesPerUnit: Int) -> UnitReader {
        UnitReader(path: path, options: options, linesPerUnit: linesPerUnit)
    }

    /// The units of one file, one at a time (see `units(_:linesPerUnit:)`).
    public final class UnitReader: IteratorProtocol, Sequence {
        let path: String
        let options: ParseOptions
        let linesPerUnit: Int
        /// Open once an NDJSON file's first unit is asked for.
        var reader: NDJSONReader?
        var ended = false
        var held: Unit?

        init(path: String, options: ParseOptions, linesPerUnit: Int) {
            self.path = path
            self.options = options
            self.linesPerUnit = linesPerUnit
        }

        public func next() -> Unit? {
            if let unit = held { held = nil; return unit }
            guard !ended else { return nil }
            guard let reader else { return start() }
            var lines: [NDJSONReader.Line] = []
            while lines.count < linesPerUnit {
                do {
                    guard let line = try reader.nextLine() else { ended = true; break }
                    lines.append(line)
                } catch {
                    let problem = Unit.unreadable(ResourceFiles.problem(error, path: path, "line \(reader.lineNumber)"))
                    if lines.isEmpty { return problem }
                    held = problem
                    break
                }
            }
            return lines.isEmpty ? nil : .lines(path: path, lines, options: reader.readOptions)
        }

        /// The first unit: a whole file, or the first lines of an NDJSON file.
        func start() -> Unit? {
            if FolderFiles.isFolder(path) {
                ended = true
                return .unreadable(ImportNote(kind: .error, resource: (path as NSString).lastPathComponent, path: nil, origin: path,
                                              message: "a folder with no .json, .xml or .ndjson file in it"))
            }
            do {
                guard try FHIRFormat.detect(path: path) == .ndjson else { ended = true; return .file(path: path) }
                reader = try NDJSONReader(path: path, options: options)
                return next()
            } catch {
                ended = true
                return .unreadable(ResourceFiles.problem(error, path: path))
            }
        }
    }

    /// Parses a unit, handing `body` each resource with its entry's `fullUrl` and, when
    /// `keepingText`, its JSON text as the file has it (an NDJSON line; a JSON Bundle's entry),
    /// and returns what could not be read and what reading let through with a warning.
    /// With `skim` (only when keeping text, which a skimmed resource's tree does not hold), the
    /// resources of types it does not read whole are skimmed (`ParseOptions.Skim`). With
    /// `compactingText`, a Bundle entry's text leaves out the whitespace between tokens.
    public func parse(_ unit: Unit, keepingText: Bool, compactingText: Bool = true, skim: ParseOptions.Skim? = nil,
                      _ body: (SourcedResource, _ fullURL: String?, _ json: [UInt8]?) -> Void) -> [ImportNote] {
        var problems: [ImportNote] = []
        let skim = keepingText ? skim : nil
        switch unit {
        case .unreadable(let note):
            return [note]
        case .lines(let path, let lines, var options):
            options.skim = skim?.skimmingRoot(true)
            for line in lines {
                do {
                    let parsed = try line.parse(options: options)
                    problems += parsed.warnings.map { Self.warning($0, in: parsed.resource, path: path) }
                    body(SourcedResource(resource: parsed.resource, origin: "\(path):\(line.number)"), nil, keepingText ? line.bytes : nil)
                } catch {
                    problems.append(Self.problem(error, path: path, "line \(line.number)"))
                }
            }
        case .file(let path):
            do {
                var skimming = options
                skimming.skim = skim?.skimmingRoot(false)
                var (parsed, entryText) = keepingText ? try FHIRDocument.readKeepingEntryText(contentsOf: path, options: skimming, compacting: compactingText)
                    : (try FHIRDocument.read(contentsOf: path, options: options), nil)
                if skim != nil, entryText == nil, parsed.resource.resourceType == "Bundle" {
                    // Entries without their text: read whole, as they will be written from the tree.
                    parsed = try FHIRDocument.read(contentsOf: path, options: options)
                }
                problems += parsed.warnings.map { Self.warning($0, in: parsed.resource, path: path) }
                let resource = parsed.resource
                guard resource.resourceType == "Bundle" else {
                    body(SourcedResource(resource: resource, origin: path), nil, nil)
                    return problems
                }
                let index = BundleIndex(resource)
                for (i, entry) in resource.children.filter({ $0.name == "entry" }).enumerated() {
                    guard let inner = entry["resource"] else { continue }
                    body(SourcedResource(resource: inner, container: resource, index: index, origin: "\(path)#entry[\(i)]"), entry.string("fullUrl"), entryText?[i])
                }
            } catch {
                problems.append(Self.problem(error, path: path))
            }
        }
        return problems
    }

    /// `Observation.ndjson:98:36: line 98: error: Observation: expected a value, …`: the place
    /// once, in the origin.
    static func problem(_ error: FHIRFormatError, path: String, _ where_: String? = nil) -> ImportNote {
        let first = error.issues.first { $0.severity == .error } ?? error.issues.first
        let location = first?.location
        let origin = location.map { $0.line > 0 ? "\(path):\($0.line):\($0.column)" : path } ?? path
        return ImportNote(kind: .error, resource: where_ ?? (path as NSString).lastPathComponent, path: location.flatMap { $0.path.isEmpty ? nil : $0.path },
                          origin: origin, message: first?.message ?? "\(error)")
    }

    /// What a lenient read let through or changed (invalid UTF-8, control characters, unknown
    /// elements) is reported where it is, so nothing changes without a word.
    static func warning(_ issue: ParseIssue, in resource: Element, path: String) -> ImportNote {
        let location = issue.location
        let label = [resource.resourceType, resource.string("id")].compactMap { $0 }.joined(separator: "/")
        return ImportNote(kind: .warning, resource: label.isEmpty ? (path as NSString).lastPathComponent : label,
                          path: location.path.isEmpty ? nil : location.path,
                          origin: location.line > 0 ? "\(path):\(location.line):\(location.column)" : path,
                          message: issue.message)
    }
}
