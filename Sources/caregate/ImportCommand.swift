import ArgumentParser
import CareStore
import FHIR
import FHIRClient
import Foundation
import Gateway
import JSON
import Mapping

/// `caregate import PATH... | --from URL --patient ID [--mappings DIR] [--store PATH] [--tz ZONE] [--dry-run] [--format text|json]`
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import FHIR resources into the care store through the mapping files.",
        discussion: """
            Reads files and directories of FHIR JSON, XML and NDJSON (Bundles of any type give \
            their entries), resolves references (contained, Bundle fullUrl and urn:uuid, relative), \
            applies the mappings and writes the store, one transaction per patient. Importing the \
            same data again changes nothing; a changed CarePlan adds task versions that take effect \
            after the newest recorded outcome. Skips, ends, schedule approximations (the loss \
            report) and errors are printed, and written with --report.

            With --from and --patient, the resources come from an EHR's FHIR endpoint instead: \
            the Patient, the patient's CarePlans with the resources their activities reference \
            (MedicationRequests, ServiceRequests...), the CareTeams and their Practitioners and \
            PractitionerRoles. They are imported exactly as the same files would be.

            Exit status: 0 when everything imported, 1 when any resource or patient failed \
            (the others are imported), the server could not be read, or the mappings have errors.

            Examples:
              caregate import FHIRSamples/bundle/maria-lopez-demo-bundle.json
              caregate import exports/ --tz America/New_York --dry-run
              caregate import bundle.xml --mappings site-mappings/ --format json
              caregate import --from https://ehr.example.org/fhir --patient maria-lopez \\
                  --smart-client-id caregate --smart-key keys/caregate-es384.pem
            """)

    @Argument(help: "FHIR files or directories.", completion: .file())
    var paths: [String] = []

    @Option(name: .long, help: "Read from this FHIR server's base URL instead of files (with --patient).")
    var from: String?

    @Option(name: .long, parsing: .singleValue, help: "The id of a Patient on the --from server (repeatable).")
    var patient: [String] = []

    @OptionGroup var server: ServerOptions

    @OptionGroup var mappings: MappingOptions

    @OptionGroup var options: StoreOptions

    @Option(name: .long, help: "The patients' time zone: clock times in Timings are in it (default: this machine's).", transform: TimeZoneArgument.parse)
    var tz: TimeZone?

    @Flag(name: .customLong("dry-run"), help: "Print what would be created, changed and ended, without writing.")
    var dryRun = false

    @Option(name: .long, help: "text or json.")
    var format: ValidateCommand.Format = .text

    @Option(name: .long, help: "Also write the report (every note and change) to this file as JSON.", completion: .file())
    var report: String?

    @Flag(name: .shortAndLong, help: "Print every skip and end (by default the first 20 of each kind; errors, warnings and losses always).")
    var verbose = false

    func validate() throws {
        if from == nil && paths.isEmpty { throw ValidationError("give FHIR files or directories, or --from URL --patient ID") }
        if from != nil && !paths.isEmpty { throw ValidationError("give either files or --from, not both") }
        if from != nil && patient.isEmpty { throw ValidationError("--from needs --patient ID (the Patient's id on that server)") }
        if from == nil && !patient.isEmpty { throw ValidationError("--patient needs --from URL") }
    }

    func run() async throws {
        let zone = tz ?? .current
        let set = try mappings.load(whatFails: "imported")
        // A dry run against a store that does not exist yet compares with an empty one and
        // leaves no file behind.
        let store: any CarePlanStore = dryRun && !FileManager.default.fileExists(atPath: options.path)
            ? try SQLiteCarePlanStore(inMemory: ()) : try options.open()
        let bar = ProgressBar(plainLines: true)
        let started = Date()
        let importer = FHIRImporter(mappings: set, store: store, timeZone: zone)
        let result: ImportReport
        if let from {
            let pull = PatientPull(client: try server.client(from, defaultScope: "system/Patient.rs system/CarePlan.rs system/CareTeam.rs system/MedicationRequest.rs system/ServiceRequest.rs system/Practitioner.rs system/PractitionerRole.rs"))
            let pulled: PatientPull.Result
            do { pulled = try await pull.pull(patients: patient) } catch {
                throw CommandError.message("\(error); nothing was imported")
            }
            var report = ImportReport()
            report.notes = pulled.notes
            report.seconds.reading = Date().timeIntervalSince(started)
            result = importer.run(resources: pulled.resources, report: report, dryRun: dryRun) { progress in
                bar.update(progress.stage.rawValue, done: progress.done, total: progress.total)
            }
        } else {
            result = importer.run(paths, dryRun: dryRun) { progress in
                bar.update(progress.stage.rawValue, done: progress.done, total: progress.total)
            }
        }
        bar.finish()
        let json = result.json(dryRun: dryRun)
        if !dryRun, let log = store as? any ImportLog {
            let source = from.map { "\($0) (Patient \(patient.joined(separator: ", ")))" } ?? paths.joined(separator: ", ")
            do { try log.recordImport(result.importRun(source: source, startedAt: started, json: json)) } catch {
                StandardError.print("warning: the import is stored, but its run was not logged: \(error)")
            }
        }
        if let report {
            // The report names patients and their resources: owner-only, like the store.
            do {
                let sink = try FHIROutput(path: report)
                try sink.write(Array(json.utf8) + [0x0A])
                try sink.close()
            } catch { throw CommandError.fhir(error) }
        }
        if format == .json {
            print(json)
        } else {
            var shown: [ImportNote.Kind: Int] = [:]
            for note in result.notes {
                let quiet = [.skipped, .ended, .deleted].contains(note.kind) && !verbose
                shown[note.kind, default: 0] += 1
                if !quiet || shown[note.kind]! <= 20 { print(note) }
            }
            for kind in [ImportNote.Kind.skipped, .ended, .deleted] where !verbose && shown[kind, default: 0] > 20 {
                print("... and \(shown[kind]! - 20) more \(kind.rawValue) (--verbose prints them, --report FILE keeps them)")
            }
            for patient in result.patients {
                if let failure = patient.failure {
                    print("\(patient.patientID): error: nothing written for this patient: \(failure)")
                } else if dryRun {
                    for change in patient.changes where change.action != .unchanged { print("\(patient.patientID): would \(change)") }
                }
            }
            let counts = result.counts
            let summary = ImportChange.Action.allCasesInOrder.compactMap { a in counts[a].map { "\($0) \(dryRun ? "to \(a.rawValue)" : ImportCommand.pastTense(a))" } }
            let source = from.map { "\($0): " } ?? "\(result.files) file\(result.files == 1 ? "" : "s"), "
            let repeated = result.repeated > 0 ? " (and \(result.repeated) repeated cop\(result.repeated == 1 ? "y" : "ies"))" : ""
            print("\(dryRun ? "dry run: " : "")\(source)\(result.resources) resources\(repeated), \(result.patients.count) patient\(result.patients.count == 1 ? "" : "s"): "
                + (summary.isEmpty ? "nothing to do" : summary.joined(separator: ", ")))
        }
        if !result.failedPatients.isEmpty || result.notes.contains(where: { $0.kind == .error }) { throw ExitCode(1) }
    }

    static func pastTense(_ action: ImportChange.Action) -> String {
        switch action {
        case .create: "created"
        case .update: "updated"
        case .unchanged: "unchanged"
        case .end: "ended"
        case .delete: "deleted"
        }
    }
}

extension ImportChange.Action {
    static let allCasesInOrder: [ImportChange.Action] = [.create, .update, .unchanged, .end, .delete]
}
