import ArgumentParser
import CareStore
import Foundation
import Gateway
import Mapping

/// `caregate test [PATH...] [--update]`
struct TestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run the golden tests of mapping files: inputs imported into an empty store, compared with expected snapshots.",
        discussion: """
            A mapping file lists its tests under 'tests' (input, expect, and optionally time-zone \
            and now). Each input is imported with all the mapping files given into an empty store, \
            and the store's snapshot (readable JSON) is compared with the expected file; a \
            difference prints the lines that differ. --update writes the snapshots instead.

            The tests of the files given run (default: $CAREGATE_MAPPINGS, else the built-in \
            files); the inputs are imported with those files over the built-in ones. A missing \
            input or snapshot fails its test.

            Exit status: 0 when every test passes, 1 when any fails, 2 on usage errors.

            Examples:
              caregate test Mappings/
              caregate test Mappings/ --update
            """)

    @Argument(help: "Mapping files or directories, or builtin: (default: $CAREGATE_MAPPINGS, else builtin:).", completion: .file())
    var paths: [String] = []

    @OptionGroup var readRoot: MappingRootOption

    @Flag(help: "Write the snapshots instead of comparing (after checking the difference is intended).")
    var update = false

    func run() throws {
        let paths = try ValidateCommand.mappingFiles(ValidateCommand.defaulted(self.paths))
        let tested: MappingSet, all: MappingSet
        do {
            tested = try MappingSet.load(paths, root: readRoot.root(for: paths))
            all = try MappingSet.load(site: paths, root: readRoot.root(for: paths))
        } catch {
            for d in error.diagnostics { StandardError.print(d.description) }
            throw CommandError.message("the mapping files have errors")
        }
        let outcomes = GoldenTestRunner(mappings: all, emptyStore: { try SQLiteCarePlanStore(inMemory: ()) }).run(update: update, testsOf: Array(tested.files.values))
        var failed = 0
        for outcome in outcomes {
            if let error = outcome.error {
                failed += 1
                print("FAIL \(outcome.input): \(error)")
            } else if let difference = outcome.difference {
                failed += 1
                print("FAIL \(outcome.input) (expected \(outcome.expect)):")
                for line in difference.prefix(200) { print("  \(line)") }
                if difference.count > 200 { print("  ... \(difference.count - 200) more lines") }
            } else {
                print("\(update ? "wrote" : "ok  ") \(update ? outcome.expect : outcome.input)")
            }
        }
        print("\(outcomes.count) golden test\(outcomes.count == 1 ? "" : "s"): \(outcomes.count - failed) passed, \(failed) failed")
        if failed > 0 { throw ExitCode(1) }
    }
}
