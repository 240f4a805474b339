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
            the task's group through the observation-codes table (Mappings/shared/observation-codes.yaml), \
            values as Quantity (UCUM), integer, boolean, string or dateTime, several values as \
            components, effective from the occurrence's window, the patient as subject and \
            performer, basedOn the CarePlan or request the task came from, status final, amended \
            or entered-in-error, and a stable identifier that makes pushing it idempotent.

            Formats: ndjson (one Observation per line), bundle (a transaction Bundle that creates \
            each Observation unless its identifier exists and updates amended ones; XML when the \
            output ends in .xml), json or xml (a directory, one file per Observation).

            Examples:
              caregate export -o outcomes.ndjson
              caregate export --format bundle -o push.json
              caregate export --format xml -o observations/
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case ndjson, bundle, json, xml }

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "ndjson, bundle, json or xml.")
    var format: Format = .ndjson

    @Option(name: .shortAndLong, help: "The output file (a directory for json and xml); standard output when absent.", completion: .file())
    var output: String?

    @Option(name: .long, parsing: .singleValue, help: "Mapping files or directories with the observation-codes table (default: Mappings/).", completion: .file())
    var mappings: [String] = []

    @Option(name: .long, help: "The time zone effective times are written in (default: this machine's).")
    var tz: String?

    @Option(name: .customLong("identifier-system"), help: "The system of the Observations' identifiers (the gateway's).")
    var identifierSystem = ObservationBuilder.defaultIdentifierSystem

    @Flag(name: .customLong("include-imported"), help: "Also export outcomes imported from the EHR's own Observations.")
    var includeImported = false

    func run() throws {
        let zone = try tz.map { name throws -> TimeZone in
            guard let z = TimeZone(identifier: name) else { throw ValidationError("unknown time zone '\(name)'") }
            return z
        } ?? .current
        let set: MappingSet
        do {
            set = try MappingSet.load(mappings.isEmpty ? ["Mappings"] : mappings)
        } catch {
            for d in error.diagnostics { Diagnostics.standardError(d.description) }
            throw CommandError.message("the mapping files have errors; nothing was exported")
        }
        let store = try options.open()
        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: set, identifierSystem: identifierSystem, timeZone: zone))
        export.includeImported = includeImported
        func report(_ item: ExportedObservation) {
            for note in item.notes { Diagnostics.standardError("\(item.observation.resourceType ?? "Observation") for outcome \(item.identifier): \(note)") }
        }
        /// Writes to -o FILE (replaced only when everything was written) or standard output.
        func write(_ body: (FHIROutput) throws -> Void) throws {
            let sink = try output.map { path throws(FHIRFormatError) in try FHIROutput(path: path) } ?? .standardOutput()
            do {
                try body(sink)
                try sink.close()
            } catch {
                sink.discard()
                throw error
            }
        }
        var kinds: [String: Int] = [:]
        func count(_ item: ExportedObservation) {
            report(item)
            kinds[item.observation.resourceType ?? "Observation", default: 0] += 1
        }
        do {
            let xml = output?.lowercased().hasSuffix(".xml") == true
            switch format {
            case .ndjson, .bundle where !xml:
                // Streamed: one resource in memory at a time.
                try write { sink in
                    if format == .ndjson {
                        try export.forEach { item in
                            count(item)
                            try sink.write(FHIRJSONWriter(pretty: false).write(item.observation) + [0x0A])
                        }
                    } else {
                        try export.writeBundle(to: sink, each: count)
                        try sink.write([0x0A])
                    }
                }
            case .bundle:
                let exported = try export.observations()
                exported.forEach(count)
                try write { sink in try sink.write(FHIRDocument.write(export.transactionBundle(exported), format: .xml) + [0x0A]) }
            case .json, .xml:
                guard let output else { throw ValidationError("--format \(format.rawValue) writes one file per Observation: give -o DIRECTORY") }
                try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
                try export.forEach { item in
                    count(item)
                    let name = "\(item.observation.resourceType ?? "Observation")-\(item.observation.string("id") ?? item.identifier).\(format.rawValue)"
                    let sink = try FHIROutput(path: (output as NSString).appendingPathComponent(name))
                    try sink.write(FHIRDocument.write(item.observation, format: format == .xml ? .xml : .json) + [0x0A])
                    try sink.close()
                }
            }
        } catch let error as FHIRFormatError {
            throw CommandError.fhir(error)
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
        let administrations = kinds["MedicationAdministration", default: 0]
        let observations = kinds["Observation", default: 0]
        let counts = "\(observations) Observation\(observations == 1 ? "" : "s")" + (administrations > 0 ? " and \(administrations) MedicationAdministration\(administrations == 1 ? "" : "s")" : "")
        Diagnostics.standardError("exported \(counts)\(output.map { " to \($0)" } ?? "")")
    }
}
