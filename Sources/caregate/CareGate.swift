import ArgumentParser
import CareStore
import FHIR
import Foundation

/// The `caregate` command: a FHIR R4 gateway for CareKit care-plan stores.
@main
struct CareGate: AsyncParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "caregate",
        abstract: "A FHIR R4 interoperability gateway for CareKit care-plan stores.",
        discussion: """
            CareGate reads FHIR R4 (JSON, XML, NDJSON, Bundles), maps it to a CareKit-compatible \
            care-plan store, and pushes completed outcomes back to the EHR as Observations.

            Examples:
              caregate import FHIRSamples/bundle/maria-lopez-demo-bundle.json
              caregate store events --from 2026-11-02 --to 2026-11-03
              caregate fhirpath "name.given" FHIRSamples/json/Patient-maria-lopez.json
              caregate convert FHIRSamples/json/Patient-maria-lopez.json --to xml
              caregate serve --config gateway.yaml
            """,
        version: "caregate \(CareGate.version) (FHIR R4 4.0.1)",
        subcommands: [Version.self, Convert.self, FHIRPathCommand.self, ValidateCommand.self, MappingsCommand.self, ImportCommand.self, ExportCommand.self, ReportCommand.self, PushCommand.self, StatusCommand.self, TestCommand.self, Store.self, EnrollCommand.self, DevicesCommand.self, ServeCommand.self, SubscribeCommand.self, AuditCommand.self]
    )
}

/// `caregate version`
struct Version: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Print the CareGate version and the FHIR version it speaks.")

    func run() {
        print("caregate \(CareGate.version) (FHIR R4 4.0.1)")
    }
}

/// `caregate convert IN --to FORMAT [-o OUT]`
struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Convert a FHIR resource, Bundle or NDJSON file between JSON, XML and NDJSON.",
        discussion: """
            The input format comes from the file extension (.json, .xml, .ndjson) or its content. \
            A Bundle converted to NDJSON gives one line per entry resource (read entry by entry); \
            NDJSON converted to JSON or XML gives a collection Bundle. Output replaces OUT only \
            when the whole conversion succeeded.

            Examples:
              caregate convert FHIRSamples/json/Patient-maria-lopez.json --to xml
              caregate convert FHIRSamples/bundle/maria-lopez-demo-bundle.xml \\
                --to ndjson -o demo.ndjson
              caregate convert demo.ndjson --to json --compact -o collection.json
            """)

    @Argument(help: "The FHIR file to convert (JSON, XML or NDJSON).", completion: .file())
    var input: String

    @Option(name: .long, help: "The output format: json, xml or ndjson.")
    var to: FHIRFormat

    @Option(name: .shortAndLong, help: "Write to this file instead of standard output.", completion: .file())
    var output: String?

    @Option(name: .long, help: "The input format, when the extension and content do not tell.")
    var from: FHIRFormat?

    @Flag(help: "Write JSON and XML without indentation.")
    var compact = false

    @Flag(help: "Report invalid values, codes and cardinalities as warnings instead of failing.")
    var lenient = false

    @Flag(name: .shortAndLong, help: "Do not print warnings.")
    var quiet = false

    @Option(name: .customLong("max-depth"), help: "Refuse documents nested deeper than this (objects, arrays, elements).")
    var maximumDepth = ParseOptions().maximumDepth

    @Option(name: .customLong("max-size"), help: "Refuse documents (or NDJSON lines, Bundle entries) larger than this many bytes.")
    var maximumSize = ParseOptions().maximumDocumentSize

    func run() throws {
        let options = ParseOptions(maximumDocumentSize: maximumSize, maximumDepth: maximumDepth, lenient: lenient)
        let conversion = FHIRConversion(options: options, pretty: !compact)
        let summary: FHIRConversion.Summary
        do {
            summary = try FHIROutput.writing(to: output) { sink in try conversion.convert(inputPath: input, from: from, to: to, output: sink) }
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        }
        if !quiet { StandardError.printWarnings(summary.warnings) }
        if output != nil && !quiet {
            StandardError.print("converted \(input) to \(to.rawValue): \(summary.resourcesWritten) resource\(summary.resourcesWritten == 1 ? "" : "s") written to \(output!)")
        }
    }
}

extension FHIRFormat: ExpressibleByArgument {}

/// A failed command: its diagnostics are printed like a compiler's, then the exit status is 1.
enum CommandError: Error {
    /// A FHIR document could not be read or written; its issues are printed one per line.
    case fhir(FHIRFormatError)
    /// The care store refused the operation.
    case store(StoreError)
    /// Anything else, with its message.
    case message(String)

    /// The lines printed to standard error.
    var lines: [String] {
        switch self {
        case .fhir(let error):
            let errors = error.issues.filter { $0.severity == .error }
            var lines = errors.prefix(50).map(\.description)
            if errors.count > 50 { lines.append("... and \(errors.count - 50) more errors") }
            return lines
        case .store(let error): return ["error: \(error.description)"]
        case .message(let message): return ["error: \(message)"]
        }
    }
}

/// Text from FHIR files and servers shown on a terminal: control characters other than line
/// feeds and tabs appear as `\u{1B}`, so no data can move the cursor, recolour or rewrite what
/// an operator reads.
enum TerminalText {
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if isControl(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
    }
}

/// Standard output for every command, through `TerminalText`.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(TerminalText.escaped(items.map { "\($0)" }.joined(separator: separator)), terminator: terminator)
}

/// Lines for standard error: failures, warnings and progress (through `TerminalText`).
enum StandardError {
    static func print(_ line: String) {
        var line = TerminalText.escaped(line)
        line += "\n"
        let bytes = Array(line.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    static func printWarnings(_ warnings: [ParseIssue], limit: Int = 20) {
        for warning in warnings.prefix(limit) { print(warning.description) }
        if warnings.count > limit { print("... and \(warnings.count - limit) more warnings") }
    }
}

extension CareGate {
    /// Prints failures as `error:` lines and exits 1, usage errors as argument-parser does.
    static func main() async {
        // Nearly every command reads FHIR: the R4 model is parsed on another core meanwhile
        // (start-up and the command's own set-up run single-threaded).
        Task.detached(priority: .high) { _ = ModelInfo.r4 }
        do {
            var command = try parseAsRoot()
            if var asynchronous = command as? AsyncParsableCommand {
                try await asynchronous.run()
            } else {
                try command.run()
            }
        } catch let failure as CommandError {
            for line in failure.lines { StandardError.print(line) }
            Foundation.exit(1)
        } catch {
            // `validate` is a CI gate: its usage errors exit 2, apart from findings (1).
            if ["validate", "test"].contains(CommandLine.arguments.dropFirst().first), exitCode(for: error) == .validationFailure {
                StandardError.print(fullMessage(for: error))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }
}
