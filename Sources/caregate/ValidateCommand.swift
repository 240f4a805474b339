import Diagnostics
import ArgumentParser
import Foundation
import JSON
import Mapping

/// `caregate validate [PATH...] [--format text|github|json]`
struct ValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check mapping files without any server or data (for CI).",
        discussion: """
            Checks YAML structure and keys, parses and type-checks every FHIRPath expression \
            against the R4 definitions for its context, the type each store field needs, task ids \
            that would collide, tables (clock times, UCUM units, code system URIs) and rules that \
            can never apply. Directories are searched for .yaml files; files of shared tables are \
            checked as tables.

            Without paths, the files of $CAREGATE_MAPPINGS are checked, else the built-in ones \
            (builtin: names them; site files may extend them with 'extends: builtin:careplan.yaml').

            Exit status: 0 when there are no errors (warnings allowed), 1 with errors, 2 on usage errors.

            Examples:
              caregate validate Mappings/
              caregate validate builtin:
              caregate validate Mappings/careplan.yaml site/careplan.yaml --format github
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case text, github, json
    }

    @Argument(help: "Mapping files or directories, or builtin: (default: $CAREGATE_MAPPINGS, else builtin:).", completion: .file())
    var paths: [String] = []

    @OptionGroup var readRoot: MappingRootOption

    @Option(name: .long, help: "text (compiler-style lines), github (workflow annotations) or json.")
    var format: Format = .text

    func run() throws {
        let files = try ValidateCommand.mappingFiles(ValidateCommand.defaulted(paths))
        var all: [Diagnostic] = []
        let validator = MappingValidator(root: readRoot.root(for: paths))
        for file in files { all += validator.check(path: file).diagnostics }
        switch format {
        case .text:
            if !all.isEmpty { print(DiagnosticFormat.text.render(all)) }
            let errors = all.filter { $0.severity == .error }.count
            let warnings = all.count - errors
            FileHandle.standardError.write(Data("\(files.count) mapping file\(files.count == 1 ? "" : "s") checked: \(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s")\n".utf8))
        case .github:
            if !all.isEmpty { print(DiagnosticFormat.github.render(all)) }
        case .json:
            print(JSONValue.object([("files", .init(files)), ("diagnostics", .array(all.map(\.json)))]).serialized(sortedKeys: true))
        }
        if all.contains(where: { $0.severity == .error }) { throw ExitCode(1) }
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
