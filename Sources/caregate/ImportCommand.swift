import ArgumentParser
import CareStore
import Diagnostics
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

            With --bulk-from, the resources come from a FHIR Bulk Data export: of every patient \
            (Patient/$export), of a Group's members (--group), or of the whole server \
            (--system-level); --type narrows it, --since asks only for what changed after an \
            instant (--since last: after the last export of the same request imported into this \
            store). The files are downloaded next to the store (--download-dir), then imported; \
            an interrupted run resumes when run again (the export's status URL and the files \
            done are kept in the store). When the import is done, the export's transaction time \
            is kept for --since last, and the export is deleted on the server.

            Exit status: 0 when everything imported, 1 when any resource or patient failed \
            (the others are imported), the server could not be read, or the mappings have errors.

            Examples:
              caregate import FHIRSamples/bundle/maria-lopez-demo-bundle.json
              caregate import exports/ --tz America/New_York --dry-run
              caregate import bundle.xml --mappings site-mappings/ --format json
              caregate import --from https://ehr.example.org/fhir --patient maria-lopez \\
                  --smart-client-id caregate --smart-key keys/caregate-es384.pem
              caregate import --bulk-from https://ehr.example.org/fhir \\
                  --group heart-failure-cohort --since last --token-file ehr.token
            """)

    @Argument(help: "FHIR files or directories.", completion: .file())
    var paths: [String] = []

    @Option(name: .long, help: "Read from this FHIR server's base URL instead of files (with --patient).")
    var from: String?

    @Option(name: .long, parsing: .singleValue, help: "The id of a Patient on the --from server (repeatable).")
    var patient: [String] = []

    @Option(name: .customLong("bulk-from"), help: "Import a Bulk Data export of this FHIR server (base URL).")
    var bulkFrom: String?

    @Option(name: .long, help: "With --bulk-from: export the members of this Group (its id).")
    var group: String?

    @Flag(name: .customLong("system-level"), help: "With --bulk-from: export every resource of the server ($export), not the patients' compartments.")
    var systemLevel = false

    @Option(name: .long, help: "With --bulk-from: only resources changed after this instant (2026-11-01T00:00:00Z), or 'last': after the last imported export of the same request.")
    var since: String?

    @Option(name: .long, help: "With --bulk-from: only these resource types (Patient,CarePlan,...).")
    var type: String?

    @Option(name: .customLong("download-dir"), help: "With --bulk-from: where the export's files go until imported (default: the store's path + .bulk).", completion: .directory)
    var downloadDirectory: String?

    @Option(name: .long, parsing: .singleValue, help: "Also find survey activities' Questionnaires in this folder or file (repeatable).", completion: .directory)
    var questionnaires: [String] = []

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
        if bulkFrom != nil {
            if from != nil || !paths.isEmpty || !patient.isEmpty { throw ValidationError("--bulk-from imports an export: give no files, --from or --patient with it") }
            if group != nil && systemLevel { throw ValidationError("give either --group or --system-level, not both") }
            if let since, since != "last", !Self.isInstant(since) { throw ValidationError("--since must be an instant with a time zone (2026-11-01T00:00:00Z) or 'last'") }
            return
        }
        if group != nil || systemLevel || since != nil || type != nil || downloadDirectory != nil {
            throw ValidationError("--group, --system-level, --since, --type and --download-dir go with --bulk-from")
        }
        if from == nil && paths.isEmpty { throw ValidationError("give FHIR files or directories, --from URL --patient ID, or --bulk-from URL") }
        if from != nil && !paths.isEmpty { throw ValidationError("give either files or --from, not both") }
        if from != nil && patient.isEmpty { throw ValidationError("--from needs --patient ID (the Patient's id on that server)") }
        if from == nil && !patient.isEmpty { throw ValidationError("--patient needs --from URL") }
    }

    func run() async throws {
        let zone = tz ?? .current
        // The built-in mapping files load without fail (their tests check them): the store opens
        // meanwhile, on another thread (a new store's schema takes as long as the load). Site
        // files may be refused, and then no store is made: it opens once they have loaded.
        let location = try options.location()
        let dryRun = dryRun
        let opening = mappings.sitePaths.isEmpty ? Task.detached { try Self.open(location, dryRun: dryRun) } : nil
        let set: MappingSet
        do { set = try mappings.load(whatFails: "imported") } catch {
            _ = try? await opening?.value
            throw error
        }
        let store = try await opening?.value ?? Self.open(location, dryRun: dryRun)
        let bar = ProgressBar(plainLines: true)
        let started = Date()
        var importer = FHIRImporter(mappings: set, store: store, timeZone: zone)
        let forms = importer.files.questionnaires(questionnaires)
        importer.questionnaires = forms.catalog
        let update: @Sendable (ImportProgress) -> Void = { progress in bar.update(progress.stage.rawValue, done: progress.done, total: progress.total) }
        var result: ImportReport
        if let from {
            result = try await pullImport(from, importer: importer, started: started, progress: update)
        } else if let bulkFrom {
            result = try await bulkImport(bulkFrom, importer: importer, store: store, progress: update)
        } else {
            let files = importer.files.files(paths)
            let staging = try staging(holding: files)
            do { result = try await StagedImport(importer: importer).run(files: files, staging: staging, dryRun: dryRun, spill: spill(), progress: update) } catch {
                throw CommandError.store(error)
            }
        }
        bar.finish()
        result.notes.insert(contentsOf: forms.problems, at: 0)
        let json = result.json(dryRun: dryRun)
        if !dryRun, let log = store as? any ImportLog {
            let source = from.map { "\($0) (Patient \(patient.joined(separator: ", ")))" } ?? bulkFrom.map { "Bulk Data export of \($0)" } ?? paths.joined(separator: ", ")
            do { try log.recordImport(result.importRun(source: source, startedAt: started, json: json)) } catch {
                StandardError.print("warning: the import is stored, but its run was not logged: \(error)")
            }
        }
        if !dryRun, let trail = store as? any AuditTrail {
            try CommandAccess("import", trail: trail).recordImport(result)
        }
        if let report {
            // The report names patients and their resources: owner-only, like the store.
            do {
                try FHIROutput.writing(to: report) { sink in
                    try result.writeJSON(dryRun: dryRun, withSpilledNotes: true) { try sink.write($0) }
                    try sink.write([0x0A])
                }
            } catch let error as FHIRFormatError { throw CommandError.fhir(error) }
        }
        if format == .json {
            result.writeJSON(dryRun: dryRun, withSpilledNotes: true) { print(String(decoding: $0, as: UTF8.self), terminator: "") }
            print()
        } else {
            var shown: [ImportNote.Kind: Int] = [:]
            for note in result.notes {
                let quiet = [.skipped, .ended, .deleted].contains(note.kind) && !verbose
                shown[note.kind, default: 0] += 1
                if !quiet || shown[note.kind]! <= 20 { print(note) }
            }
            if verbose { try result.spilled?.forEach { print($0) } }
            let noteCounts = result.noteCounts
            for kind in [ImportNote.Kind.skipped, .ended, .deleted] where !verbose && noteCounts[kind, default: 0] > 20 {
                let n = noteCounts[kind, default: 0]
                print("... and \(n - 20) more \(kind.rawValue) (--verbose prints them, --report FILE keeps them)")
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
            let source = (from ?? bulkFrom).map { "\($0): " } ?? "\(result.files) file\(result.files == 1 ? "" : "s"), "
            let repeated = result.repeated > 0 ? " (and \(result.repeated) repeated cop\(result.repeated == 1 ? "y" : "ies"))" : ""
            print("\(dryRun ? "dry run: " : "")\(source)\(result.resources) resources\(repeated), \(result.patients.count) patient\(result.patients.count == 1 ? "" : "s"): "
                + (summary.isEmpty ? "nothing to do" : summary.joined(separator: ", ")))
        }
        if !result.failedPatients.isEmpty || result.notes.contains(where: { $0.kind == .error }) { throw ExitCode(1) }
    }

    /// The store to import into. A dry run against a store that does not exist yet compares with
    /// an empty one and leaves no file behind.
    static func open(_ location: StoreLocation, dryRun: Bool) throws -> any CarePlanStore {
        do throws(StoreError) {
            if dryRun && location.isMissingFile { return try SQLiteCarePlanStore(inMemory: ()) }
            return try location.open(.creating)
        } catch {
            throw CommandError.store(error)
        }
    }

    /// `--from`: the patients pulled from the server, imported as files would be.
    func pullImport(_ from: String, importer: FHIRImporter, started: Date, progress: @escaping @Sendable (ImportProgress) -> Void) async throws -> ImportReport {
        var pull = PatientPull(client: try server.client(from, defaultScope: SMARTScopes.pull))
        pull.formsAsked = importer.missingQuestionnaires
        let pulled: PatientPull.Result
        do { pulled = try await pull.pull(patients: patient) } catch {
            throw CommandError.message("\(error); nothing was imported")
        }
        var report = ImportReport()
        report.notes = pulled.notes
        report.seconds.reading = Date().timeIntervalSince(started)
        return importer.run(resources: pulled.resources, report: report, dryRun: dryRun, progress: progress)
    }

    /// `--bulk-from`: the export fetched (or its fetch resumed), imported, then finished.
    func bulkImport(_ base: String, importer: FHIRImporter, store: any CarePlanStore, progress: @escaping @Sendable (ImportProgress) -> Void) async throws -> ImportReport {
        let fetch = try bulkFetch(base, store: store)
        let request = try bulkRequest(fetch)
        let staging = try staging()
        let fetched: BulkExportFetch.Fetched
        let report: ImportReport
        do throws(BulkFetchError) {
            fetched = try await fetch.fetch(request)
            report = try await fetch.importFetched(fetched, into: importer, staging: staging, dryRun: dryRun, spill: spill(), progress: progress)
        } catch {
            throw CommandError.message("\(error); nothing was imported (run the same command again to resume)")
        }
        let importing = report.seconds.reading + report.seconds.mapping + report.seconds.storing
        StandardError.print("bulk export: \(Self.seconds(fetched.seconds.export)) on the server, \(Self.seconds(fetched.seconds.download)) downloading, \(Self.seconds(importing)) importing")
        if !dryRun {
            let problems = await fetch.finish(fetched)
            for problem in problems { StandardError.print("warning: \(problem)") }
        }
        return report
    }

    /// Where a large import's quiet notes wait for the report: beside the store, as the staging.
    func spill() -> SpilledNotes { SpilledNotes(directory: scratchDirectory) }

    /// Where files are staged before they are mapped: a scratch database beside the store (as
    /// large as what is imported; not the temporary directory, often memory).
    func staging() throws -> any ImportStaging {
        do { return try SQLiteImportStaging(directory: scratchDirectory) } catch { throw CommandError.store(error) }
    }

    /// Where these files are staged: in memory when they hold at most `InMemoryImportStaging.limit`
    /// bytes in all (writing them to a scratch file and reading them back would be most of a
    /// small import's work), else `staging()`.
    func staging(holding files: [String]) throws -> any ImportStaging {
        var bytes = 0
        for file in files {
            guard let size = FileBytes.size(file) else { continue }
            bytes += size
            if bytes > InMemoryImportStaging.limit { return try staging() }
        }
        return InMemoryImportStaging()
    }

    /// The store's folder (the working directory for a PostgreSQL store), where an import's scratch files go.
    var scratchDirectory: String { (try? options.location().localFolder) ?? FilePath.folder(of: options.path) }

    /// The fetch of `--bulk-from`'s export, its state kept in the store.
    func bulkFetch(_ base: String, store: any CarePlanStore) throws -> BulkExportFetch {
        guard let log = store as? any BulkFetchLog else { throw CommandError.message("this store cannot keep a Bulk Data fetch") }
        let client = try server.client(base, defaultScope: "system/*.rs")
        var fetch = BulkExportFetch(bulk: BulkDataClient(client: client), log: log, root: try downloadDirectory ?? options.location().localName + ".bulk")
        fetch.progress = { StandardError.print($0) }
        return fetch
    }

    /// The export the options ask for; `--since last` looks up the request's last transaction time.
    func bulkRequest(_ fetch: BulkExportFetch) throws -> BulkExportRequest {
        let level: BulkExportRequest.Level = group.map { .group($0) } ?? (systemLevel ? .system : .patients)
        var request = BulkExportRequest(level: level, types: (type ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        if since == "last" {
            do { request.since = try fetch.log.lastTransactionTime(source: fetch.source(of: request)) } catch { throw CommandError.store(error) }
            if request.since == nil { StandardError.print("--since last: no earlier export of this request in the store; exporting everything") }
        } else {
            request.since = since
        }
        return request
    }

    /// `2026-11-01T00:00:00Z`, `2026-11-01T00:00:00.5+01:00`: a FHIR instant.
    static func isInstant(_ text: String) -> Bool {
        text.range(of: #"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:[0-9]{2})$"#, options: .regularExpression) != nil
    }

    static func seconds(_ value: Double) -> String { String(format: "%.1f s", value) }

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
