import ArgumentParser
import CareStore
import FHIR
import Foundation
import Gateway
import Mapping

/// `caregate export [--format ndjson|bundle|json|xml] [-o PATH]`
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export the store's outcomes as FHIR R4 Observations.",
        discussion: """
            Each outcome's current version becomes an Observation: the code and category from \
            the task's group through the observation-codes table (builtin:shared/observation-codes.yaml, or a site's), \
            values as Quantity (UCUM), integer, boolean, string or dateTime, several values as \
            components, effective from the occurrence's window, the patient as subject and \
            performer, basedOn the CarePlan or request the task came from, status final, amended \
            or entered-in-error, and a stable identifier that makes pushing it idempotent.

            A survey outcome becomes its QuestionnaireResponse and the Observations its form \
            extracts, as one transaction Bundle (a line of its own in ndjson). An outcome that \
            cannot be sent (answers its form refuses, a form the store lacks) is written nowhere: \
            it is named on standard error, one line each with its task, patient and reason, and \
            the command exits 1 unless --allow-refusals is given.

            With --profiles (us-core-6.1.0, us-core-3.1.1, or a site package's name, its package \
            read with --package), each resource claims the profile the package has for it \
            (meta.profile: an Observation's by its code, the QuestionnaireResponse's), US Core's \
            carry the patient-supplied tag, and every resource is validated against R4, what it \
            claims and the target's profile before it is written: one with an error is refused as \
            above, naming the element, the rule and the profile.

            Formats: ndjson (one Observation per line), bundle (a transaction Bundle that creates \
            each Observation unless its identifier exists and updates amended ones; XML when the \
            output ends in .xml), json or xml (a directory, one file per Observation).

            Examples:
              caregate export -o outcomes.ndjson
              caregate export --format bundle -o push.json
              caregate export --format xml -o observations/
              caregate export --profiles us-core-6.1.0 --package us-core.tgz -o us.ndjson
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case ndjson, bundle, json, xml }

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "ndjson, bundle, json or xml.")
    var format: Format = .ndjson

    @Option(name: .shortAndLong, help: "The output file (a directory for json and xml); standard output when absent.", completion: .file())
    var output: String?

    @OptionGroup var mappings: MappingOptions

    @Option(name: .long, help: "The time zone effective times are written in (default: this machine's).", transform: TimeZoneArgument.parse)
    var tz: TimeZone?

    @Option(name: .customLong("identifier-system"), help: "The system of the Observations' identifiers (the gateway's).")
    var identifierSystem = ObservationBuilder.defaultIdentifierSystem

    @OptionGroup var profiles: ProfileOptions

    @Flag(name: .customLong("include-imported"), help: "Also export outcomes imported from the EHR's own Observations.")
    var includeImported = false

    @Flag(name: .customLong("allow-refusals"), help: "Exit 0 even when outcomes were refused (they are still named on standard error and written nowhere).")
    var allowRefusals = false

    @Flag(name: .long, help: "Print every note; without it, a note said of many outcomes is printed for the first \(ExportCommand.notesShown), then counted.")
    var verbose = false

    /// How many outcomes a note is printed for before it is only counted (a store of a million
    /// outcomes whose tasks have no code would otherwise print a million lines).
    static let notesShown = 20

    /// Where the resources go, decided once from --format and the -o extension.
    enum Destination: Equatable {
        case ndjson
        case jsonBundle
        case xmlBundle
        /// One file per resource in a directory.
        case files(FHIRFormat)
    }

    /// --format and the extension of -o agree, or the command is refused before anything is read.
    static func destination(_ format: Format, output: String?) throws -> Destination {
        let ext = output.map { ($0 as NSString).pathExtension.lowercased() } ?? ""
        switch format {
        case .ndjson:
            guard !["xml", "json"].contains(ext) else {
                throw ValidationError("--format ndjson writes JSON lines, not a .\(ext) file: name the output .ndjson (or choose --format bundle)")
            }
            return .ndjson
        case .bundle:
            guard !["ndjson", "jsonl"].contains(ext) else {
                throw ValidationError("--format bundle writes one Bundle, not .\(ext) lines: name the output .json or .xml (or choose --format ndjson)")
            }
            return ext == "xml" ? .xmlBundle : .jsonBundle
        case .json, .xml:
            guard output != nil else { throw ValidationError("--format \(format.rawValue) writes one file per resource: give -o DIRECTORY") }
            guard !["xml", "json", "ndjson", "jsonl"].contains(ext) else {
                throw ValidationError("--format \(format.rawValue) writes one file per resource into a directory, not into the file \(output!)")
            }
            return .files(format == .xml ? .xml : .json)
        }
    }

    func validate() throws { _ = try ExportCommand.destination(format, output: output) }

    func run() throws {
        let zone = tz ?? .current
        let set = try mappings.load(whatFails: "exported")
        let store = try options.open(.existing)
        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: set, identifierSystem: identifierSystem, timeZone: zone))
        export.includeImported = includeImported
        export.profiles = try profiles.profileTarget()
        export.organization = profiles.organization
        let bar = ProgressBar()
        export.progress = { bar.update("exporting", done: $0, total: $1) }
        defer { bar.finish() }
        var said: [String: Int] = [:]
        func report(_ item: ExportedObservation) {
            for note in item.notes {
                said[note, default: 0] += 1
                guard verbose || said[note]! <= Self.notesShown else { continue }
                StandardError.print("\(item.observation.resourceType ?? "Observation") for outcome \(item.identifier): \(note)")
            }
        }
        /// Writes to -o FILE (replaced only when everything was written) or standard output.
        func write(_ body: (FHIROutput) throws -> Void) throws {
            try FHIROutput.writing(to: output, body)
        }
        var kinds: [String: Int] = [:]
        var perPatient: [String: Int] = [:]
        var refused = 0
        /// Counts what an item writes (a survey's parts one by one); false for a refusal, which
        /// is named on standard error and written nowhere.
        func count(_ item: ExportedObservation) -> Bool {
            if let refusal = item.refusal {
                refused += 1
                StandardError.print("refused: \(refusal)")
                return false
            }
            report(item)
            let written = item.isTransaction ? item.observation.children(named: "entry").compactMap { $0["resource"] } : [item.observation]
            for resource in written {
                kinds[resource.resourceType ?? "Observation", default: 0] += 1
                if let subject = resource.first("subject.reference")?.value { perPatient[subject, default: 0] += 1 }
            }
            return true
        }
        do {
            switch try ExportCommand.destination(format, output: output) {
            case .ndjson:
                // Streamed: one resource in memory at a time.
                try write { sink in
                    try export.forEach { item in
                        guard count(item) else { return }
                        try sink.write(FHIRJSONWriter(pretty: false).write(item.observation) + [0x0A])
                    }
                }
            case .jsonBundle:
                // Streamed too: the Bundle is written entry by entry.
                try write { sink in
                    try export.writeBundle(to: sink) { _ = count($0) }
                    try sink.write([0x0A])
                }
            case .xmlBundle:
                let exported = try export.observations().filter(count)
                try write { sink in try sink.write(FHIRDocument.write(export.transactionBundle(exported), format: .xml) + [0x0A]) }
            case .files(let fileFormat):
                let directory = output!
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                try export.forEach { item in
                    guard count(item) else { return }
                    let name = "\(item.observation.resourceType ?? "Observation")-\(item.observation.string("id") ?? item.identifier).\(fileFormat.rawValue)"
                    try FHIROutput.writing(to: (directory as NSString).appendingPathComponent(name)) { sink in
                        try sink.write(FHIRDocument.write(item.observation, format: fileFormat) + [0x0A])
                    }
                }
            }
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
        if !perPatient.isEmpty {
            try CommandAccess("export", trail: store).record(.read, patients: Array(perPatient.keys)) { "\(perPatient[$0!] ?? 0) resources exported" }
        }
        for (note, n) in said.sorted(by: { $0.key < $1.key }) where n > Self.notesShown && !verbose {
            StandardError.print("... and \(n - Self.notesShown) more outcomes: \(note) (--verbose prints them)")
        }
        StandardError.print("exported \(Self.summary(kinds))\(output.map { " to \($0)" } ?? "")")
        guard refused == 0 else {
            let what = "\(refused) outcome\(refused == 1 ? " was" : "s were") refused (named above) and written nowhere"
            if allowRefusals { return StandardError.print(what) }
            throw CommandError.message("\(what); --allow-refusals accepts that")
        }
    }

    /// What was written, by resource type: Observations always, the others when there are any
    /// (`3 Observations, 1 QuestionnaireResponse`).
    static func summary(_ kinds: [String: Int]) -> String {
        let others = kinds.keys.filter { $0 != "Observation" }.sorted()
        return (["Observation"] + others).map { type in
            let n = kinds[type, default: 0]
            return "\(n) \(type)\(n == 1 ? "" : "s")"
        }.joined(separator: ", ")
    }
}
