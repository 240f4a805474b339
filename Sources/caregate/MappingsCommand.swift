import ArgumentParser
import Mapping

/// `caregate mappings dump DIR`: the built-in mapping files, written out for a site to edit.
struct MappingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mappings",
        abstract: "Work with the mapping files built into CareGate.",
        subcommands: [Dump.self])

    struct Dump: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write the built-in mapping files (with their README and golden snapshots) into a folder.",
            discussion: """
                Every command uses the built-in files unless --mappings (or $CAREGATE_MAPPINGS) \
                names site files, which replace the built-in file for the same resource type or \
                build on it with 'extends: builtin:careplan.yaml'. Dump the files to start a \
                site's own, or to read them.

                Examples:
                  caregate mappings dump site-mappings/
                  caregate import bundle.json --mappings site-mappings/
                """)

        @Argument(help: "The folder to write into (created when missing).", completion: .directory)
        var directory: String

        @Flag(help: "Replace files that are there already.")
        var force = false

        func run() throws {
            let written: [String]
            do { written = try BuiltInMappings.dump(to: directory, overwrite: force) } catch {
                for d in error.diagnostics { StandardError.print(d.description) }
                throw ExitCode(1)
            }
            StandardError.print("wrote \(written.count) built-in mapping files to \(directory)")
        }
    }
}
