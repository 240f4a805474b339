import Diagnostics
import ArgumentParser
import CareStore
import FHIR
import FHIRPackages
import FHIRValidation
import Gateway
import Foundation
import JSON
import Mapping

/// `caregate validate [PATH...] [--package PATH]... [--profile URL]... [--format text|github|json]`
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check mapping files, and FHIR resources against their profiles, without any server (for CI).",
        discussion: """
            Checks YAML structure and keys, parses and type-checks every FHIRPath expression \
            against the R4 definitions for its context, the type each store field needs, task ids \
            that would collide, tables (clock times, UCUM units, code system URIs) and rules that \
            can never apply. Directories are searched for .yaml files; files of shared tables are \
            checked as tables.

            Without paths, the files of $CAREGATE_MAPPINGS are checked, else the built-in ones \
            (builtin: names them; site files may extend them with 'extends: builtin:careplan.yaml').

            FHIR files (.json, .xml, .ndjson; a Bundle with its entries; folders without mapping \
            files) are validated against the R4 definitions, the profiles each resource claims in \
            meta.profile, and every --profile. --package loads profiles, extensions, value sets and \
            code systems: a FHIR package (.tgz or an unpacked folder), or a folder or file of loose \
            conformance resources (a site's StructureDefinitions, JSON or XML); the R4 core is built \
            in. With --format json, resources give their OperationOutcome (a Bundle of them for \
            several).

            Exit status: 0 when there are no errors (warnings allowed), 1 with errors, 2 on usage errors.

            Examples:
              caregate validate Mappings/
              caregate validate builtin:
              caregate validate Mappings/careplan.yaml site/careplan.yaml --format github
              caregate validate weight.json --package hl7.fhir.us.core-6.1.0.tgz
              caregate validate outcomes.ndjson --package us-core.tgz --profile \\
                  http://hl7.org/fhir/us/core/StructureDefinition/us-core-body-weight
              caregate validate site-outcomes/ --package us-core.tgz --package site/
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, github, json
    }

    @Argument(help: "Mapping files or directories, builtin:, or FHIR files and folders (default: $CAREGATE_MAPPINGS, else builtin:).", completion: .file())
    var paths: [String] = []

    @Option(name: .customLong("package"), help: ArgumentHelp("A FHIR package (.tgz or folder), or a folder or file of conformance resources (repeatable).", valueName: "path"),
            completion: .file())
    var packages: [String] = []

    @Option(name: .customLong("profile"), help: ArgumentHelp("A profile every resource must meet too, by canonical url (repeatable).", valueName: "url"))
    var profiles: [String] = []

    @OptionGroup var readRoot: MappingRootOption

    @Option(name: .long, help: "text (compiler-style lines), github (workflow annotations) or json.")
    var format: Format = .text

    func run() throws {
        let (mappingPaths, resourceFiles) = try ValidateCommand.partition(paths)
        if resourceFiles.isEmpty && !profiles.isEmpty {
            StandardError.print("error: --profile applies to FHIR resources, and no FHIR file was named")
            throw ExitCode(2)
        }
        let files = mappingPaths.isEmpty ? [] : try ValidateCommand.mappingFiles(mappingPaths)
        var all: [Diagnostic] = []
        let validator = MappingValidator(root: readRoot.root(for: paths))
        for file in files { all += validator.check(path: file).diagnostics }
        // The profiles the mapping files name: what their golden tests make, exported and checked.
        let exportProfiles = files.isEmpty || all.contains { $0.severity == .error } ? nil : try exportChecks(mappingPaths)
        all += exportProfiles ?? []
        if resourceFiles.isEmpty && !packages.isEmpty && exportProfiles == nil {
            StandardError.print("error: --package applies to FHIR resources and to mapping folders that name export-profiles, and neither was named")
            throw ExitCode(2)
        }
        let resources = resourceFiles.isEmpty ? [] : try validateResources(resourceFiles)
        all += resources.flatMap(\.diagnostics)
        switch format {
        case .text:
            // Written at once (not through print's buffer): the findings come before the
            // summary on standard error when both go to one terminal or file.
            if !all.isEmpty { FileHandle.standardOutput.write(Data((DiagnosticFormat.text.render(all) + "\n").utf8)) }
            let errors = all.filter { $0.severity == .error }.count
            let warnings = all.filter { $0.severity == .warning }.count
            var checked: [String] = []
            if !files.isEmpty || resourceFiles.isEmpty { checked.append(Self.count(files.count, "mapping file")) }
            if !resourceFiles.isEmpty { checked.append(Self.count(resources.count, "resource") + " in " + Self.count(resourceFiles.count, "file")) }
            StandardError.print("\(checked.joined(separator: " and ")) checked: \(Self.count(errors, "error")), \(Self.count(warnings, "warning"))")
        case .github:
            if !all.isEmpty { print(DiagnosticFormat.github.render(all)) }
        case .json:
            if files.isEmpty && !resources.isEmpty {
                print(String(decoding: FHIRDocument.write(Self.outcome(of: resources), format: .json), as: UTF8.self))
            } else {
                var members: [(String, JSONValue)] = [("files", .init(files)), ("diagnostics", .array(all.map(\.json)))]
                if !resources.isEmpty {
                    let outcome = FHIRDocument.write(Self.outcome(of: resources), format: .json, pretty: false)
                    members.append(("outcomes", (try? JSONValue.parse(outcome)) ?? .null))
                }
                print(JSONValue.object(members).serialized(sortedKeys: true))
            }
        }
        if all.contains(where: { $0.severity == .error }) { throw ExitCode(1) }
    }

    /// When the mapping files name `export-profiles`: what their golden tests make, exported
    /// through them claiming each target (`GoldenExportCheck`), each refusal an error at the
    /// mapping entry that made it; nil when they name none.
    func exportChecks(_ paths: [String]) throws -> [Diagnostic]? {
        let set: MappingSet
        do { set = try MappingSet.load(site: paths, root: readRoot.root(for: paths)) } catch { return error.diagnostics }
        guard !set.sharedTables.exportProfiles.isEmpty else { return nil }
        let loaded: [FHIRPackage]
        do { loaded = try FHIRPackage.load(paths: packages) } catch {
            StandardError.print("error: \(error)")
            throw ExitCode(2)
        }
        var found: [Diagnostic] = []
        var targets: [ProfileTarget] = []
        for claim in set.sharedTables.exportProfiles {
            do { targets.append(try ProfileTarget(name: claim.name, packages: loaded)) } catch { found.append(Diagnostic(.error, claim.location, "\(error)")) }
        }
        return found + GoldenExportCheck(mappings: set, targets: targets, emptyStore: { try SQLiteCarePlanStore(inMemory: ()) }).run()
    }

    /// Loads the packages, then validates every resource of the files named.
    func validateResources(_ files: [String]) throws -> [ResourceFileValidation.Result] {
        let loaded: [FHIRPackage]
        do { loaded = try FHIRPackage.load(paths: packages) } catch {
            StandardError.print("error: \(error)")
            throw ExitCode(2)
        }
        let conformance = ConformanceSet(packages: loaded)
        for (package, missing) in Self.missingByPackage(conformance) {
            StandardError.print("note: \(package) depends on packages not loaded here: \(missing.joined(separator: ", ")); what they define (value sets, extensions, profiles) is not checked")
        }
        let validator = ProfileValidator(conformance: conformance)
        for profile in profiles where validator.profile(profile) == nil {
            let why = validator.unusableReason(profile) ?? "no StructureDefinition with this url in the R4 core\(packages.isEmpty ? "" : " or the packages loaded")"
            StandardError.print("error: --profile \(profile): \(why)")
            throw ExitCode(2)
        }
        let validation = ResourceFileValidation(validator: validator, profiles: profiles)
        return files.flatMap { validation.validate(file: $0) }
    }

    /// One resource's OperationOutcome, or a collection Bundle of them (each naming its file
    /// and resource in `OperationOutcome.issue.location`).
    static func outcome(of results: [ResourceFileValidation.Result]) -> Element {
        func outcome(_ result: ResourceFileValidation.Result) -> Element {
            var outcome = result.report.operationOutcome
            let place = result.line > 0 ? "\(result.file):\(result.line)" : result.file
            outcome.children = outcome.children.map { child in
                guard child.name == "issue" else { return child }
                var issue = child
                issue.append(Element(name: "location", type: "string", value: "\(place) \(result.resource)"))
                return issue
            }
            return outcome
        }
        if results.count == 1 { return outcome(results[0]) }
        var bundle = Element(resourceType: "Bundle")
        bundle.setValue("collection", for: "type")
        for result in results {
            var entry = Element(name: "entry", type: "Bundle.entry")
            var resource = outcome(result)
            resource.name = "resource"
            entry.append(resource)
            bundle.append(entry)
        }
        return bundle
    }

    /// The dependencies not loaded, by the package that needs them, in load order: one note each.
    static func missingByPackage(_ conformance: ConformanceSet) -> [(String, [String])] {
        var order: [String] = []
        var missing: [String: [String]] = [:]
        for dependency in conformance.missingDependencies {
            for package in dependency.neededBy {
                if missing[package] == nil { order.append(package) }
                missing[package, default: []].append("\(dependency.name)#\(dependency.version)")
            }
        }
        return order.map { ($0, missing[$0]!) }
    }

    static func count(_ n: Int, _ noun: String) -> String { "\(n) \(noun)\(n == 1 ? "" : "s")" }

    /// The paths split into mapping paths (YAML files, `builtin:`, folders holding YAML) and
    /// FHIR files (named, or found in folders without YAML); no paths: the default mappings.
    static func partition(_ paths: [String]) throws -> (mappings: [String], resources: [String]) {
        if paths.isEmpty { return (defaulted(paths), []) }
        var mappings: [String] = []
        var resources: [String] = []
        for path in paths {
            if path.hasPrefix(MappingSource.builtInPrefix) { mappings.append(path); continue }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                StandardError.print("error: no such file or directory: \(path)")
                throw ExitCode(2)
            }
            if !isDirectory.boolValue {
                if isFHIRFile(path) { resources.append(path) } else { mappings.append(path) }
                continue
            }
            var found: [String] = []
            var holdsMappings = false
            let walker = FileManager.default.enumerator(atPath: path)
            while let relative = walker?.nextObject() as? String {
                if isFHIRFile(relative) { found.append(path + "/" + relative) }
                if relative.hasSuffix(".yaml") || relative.hasSuffix(".yml") { holdsMappings = true }
            }
            // A folder with mapping files, or with nothing FHIR in it, is a mapping folder (the
            // mapping checker reports one without mapping files).
            if holdsMappings || found.isEmpty { mappings.append(path) } else { resources += found.sorted() }
        }
        return (mappings, resources)
    }

    static func isFHIRFile(_ path: String) -> Bool {
        [".json", ".xml", ".ndjson"].contains { path.lowercased().hasSuffix($0) }
    }

    /// The paths given, else `$CAREGATE_MAPPINGS`, else the built-in files.
    static func defaulted(_ paths: [String]) -> [String] {
        if !paths.isEmpty { return paths }
        let site = MappingOptions.environmentPaths
        return site.isEmpty ? [MappingSource.builtInPrefix] : site
    }

    /// The .yaml files named or found under the directories named, in a stable order; a path
    /// that does not exist is a usage error (exit 2).
    static func mappingFiles(_ paths: [String]) throws -> [String] {
        for path in paths where path != MappingSource.builtInPrefix && !MappingSource.exists(path) {
            StandardError.print("error: no such file or directory: \(path)")
            throw ExitCode(2)
        }
        return MappingSet.yamlFiles(paths)
    }
}
