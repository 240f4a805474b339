import CareStore
import Crypto
import FHIR
import FHIRClient
import Foundation
import JSON
import Mapping

/// Why a Bulk Data fetch stopped.
public struct BulkFetchError: Error, Sendable, CustomStringConvertible {
    /// What was being done: `kick-off`, `status`, a file's URL.
    public var step: String
    /// What the server or the network said.
    public var cause: String
    public var description: String { "bulk export (\(step)): \(cause)" }
}

/// `caregate import --bulk-from`: fetches a Bulk Data export into a directory, resuming an
/// interrupted fetch of the same source (the status URL, the manifest and the files done are
/// kept in the store after each step), then, once the files are imported, remembers the export's
/// transaction time for the next `--since` and deletes the job on the server.
public struct BulkExportFetch: Sendable {
    /// The Bulk Data client.
    public let bulk: BulkDataClient
    /// Where each step is kept, so that a run resumes.
    public let log: any BulkFetchLog
    /// Where each source's files go (a directory of its own), kept until `finish`.
    public let root: String
    /// One line per step (`export: collecting`, `downloaded Patient.ndjson (2.1 MB)`).
    public var progress: (@Sendable (String) -> Void)?

    /// A fetcher writing files under `root`.
    public init(bulk: BulkDataClient, log: any BulkFetchLog, root: String) {
        self.bulk = bulk
        self.log = log
        self.root = root
    }

    /// What a fetch gave: the NDJSON files to import, the server's own errors as notes, and how
    /// long the server's export and the downloads took.
    public struct Fetched: Sendable {
        /// What was asked for (the kick-off URL).
        public var source: String
        /// The server's status URL.
        public var statusURL: String
        /// The finished export's manifest.
        public var manifest: BulkManifest
        /// The directory the files are in.
        public var directory: String
        /// The downloaded NDJSON files, in manifest order.
        public var files: [String]
        /// The errors the manifest lists, as notes.
        public var notes: [ImportNote]
        /// Whether an interrupted fetch was resumed.
        public var resumed: Bool
        /// The request's `_since`: the export holds only what changed after it.
        public var since: String?
        /// Seconds waiting on the server's export, and downloading.
        public var seconds: (export: Double, download: Double)
    }

    /// The source a request is remembered by: its kick-off URL without `_since`.
    public func source(of request: BulkExportRequest) -> String {
        var unsinced = request
        unsinced.since = nil
        return bulk.kickOffURL(unsinced)
    }

    /// The source's directory under `root`: named by a digest of the source (a URL is no file name).
    public func directory(_ source: String) -> String {
        "\(root)/" + TextEncoding.hexadecimal(SHA256.hash(data: Array(source.utf8)).prefix(8))
    }

    /// Fetches the export's files, resuming this source's unfinished fetch if there is one.
    public func fetch(_ request: BulkExportRequest) async throws(BulkFetchError) -> Fetched {
        let source = source(of: request)
        let clock = ContinuousClock()
        var start = clock.now
        var (record, resumed) = try await started(request, source: source)
        let manifest: BulkManifest
        if let kept = record.manifest {
            manifest = try step("status") { () throws(FHIRClientError) in try BulkManifest.read(kept, url: record.statusURL) }
        } else {
            do throws(FHIRClientError) {
                manifest = try await bulk.manifest(record.statusURL, progress: exportProgress)
            } catch {
                guard resumed, case .http(let status, _, _, _) = error, [404, 410].contains(status) else {
                    throw BulkFetchError(step: "status", cause: error.description)
                }
                // The server forgot the job (expired, restarted): a new export.
                progress?("the export at \(record.statusURL) is gone on the server (HTTP \(status)): starting again")
                record = try await kickedOff(request, source: source)
                let statusURL = record.statusURL
                manifest = try await step("status") { () async throws(FHIRClientError) in try await bulk.manifest(statusURL, progress: exportProgress) }
            }
            record.manifest = manifest.bytes
            try keep(record)
        }
        let exportSeconds = (clock.now - start).seconds
        start = clock.now
        let directory = directory(source)
        try makeDirectory(directory)
        var files: [String] = []
        for (i, file) in manifest.output.enumerated() {
            let path = Self.downloadPath(of: file, at: i, in: directory)
            files.append(path)
            if record.downloaded.contains(file.url) && FileManager.default.fileExists(atPath: path) { continue }
            let size = try await step(file.url) { () async throws(FHIRClientError) in try await bulk.download(file, of: manifest, to: path) }
            progress?("downloaded \(file.type) (\(Self.megabytes(size)))")
            record.downloaded.append(file.url)
            try keep(record)
        }
        var notes: [ImportNote] = []
        for (i, file) in manifest.error.enumerated() {
            let path = "\(directory)/error-\(i).ndjson"
            _ = try await step(file.url) { () async throws(FHIRClientError) in try await bulk.download(file, of: manifest, to: path) }
            notes += Self.serverErrors(path, url: file.url)
        }
        return Fetched(source: source, statusURL: record.statusURL, manifest: manifest, directory: directory, files: files, notes: notes, resumed: resumed, since: request.since,
                       seconds: (exportSeconds, (clock.now - start).seconds))
    }

    /// The server's `X-Progress` lines, as progress lines.
    var exportProgress: (@Sendable (String) -> Void)? {
        guard let progress else { return nil }
        return { @Sendable line in progress("export: \(line)") }
    }

    /// After the import: the transaction time is kept for the next `--since`, the job deleted on
    /// the server and the files here. Returns what could not be done (the import stands).
    public func finish(_ fetched: Fetched) async -> [String] {
        var problems: [String] = []
        do { try log.finishBulkFetch(source: fetched.source, transactionTime: fetched.manifest.transactionTime) } catch {
            problems.append("the export's transaction time was not kept: \(error)")
        }
        do { try await bulk.delete(fetched.statusURL) } catch {
            problems.append("the export was not deleted on the server: \(error)")
        }
        try? FileManager.default.removeItem(atPath: fetched.directory)
        return problems
    }

    /// Imports what was fetched: a whole export's files as they are (staged, one patient at a
    /// time); for an incremental one, the
    /// patients it shows changes for, pulled whole (`changedPatients`). The server's own errors
    /// come first among the notes.
    public func importFetched(_ fetched: Fetched, into importer: FHIRImporter, staging: any ImportStaging, dryRun: Bool = false,
                              spill: SpilledNotes? = nil, progress: (@Sendable (ImportProgress) -> Void)? = nil) async throws(BulkFetchError) -> ImportReport {
        var report: ImportReport
        if fetched.since == nil {
            var staged = StagedImport(importer: importer)
            // Forms are no patient's data, so an export leaves them out: the server gives them.
            let pull = PatientPull(client: bulk.client)
            staged.formSource = { await pull.forms($0) }
            do { report = try await staged.run(fetched.files, staging: staging, dryRun: dryRun, spill: spill, progress: progress) } catch {
                throw BulkFetchError(step: "store", cause: error.description)
            }
        } else {
            let changed = Self.changedPatients(fetched)
            self.progress?("changes for \(changed.ids.count) patient\(changed.ids.count == 1 ? "" : "s"): pulling them whole")
            let pulled: PatientPull.Result
            var pull = PatientPull(client: bulk.client)
            pull.formsAsked = importer.missingQuestionnaires
            do { pulled = try await pull.pull(patients: changed.ids) } catch {
                throw BulkFetchError(step: "Patient/\(error.patient)", cause: error.cause.description)
            }
            report = ImportReport()
            report.files = fetched.files.count
            report.notes = changed.notes + pulled.notes
            report = importer.run(resources: pulled.resources, report: report, dryRun: dryRun, progress: progress)
        }
        report.notes = fetched.notes + report.notes
        return report
    }

    /// The ids of the patients an incremental export (`_since`) shows changes for: its Patients,
    /// and the patients its other resources name (`subject`, `patient`, `beneficiary`). Such an export holds only
    /// what changed, so a changed MedicationRequest comes without the CarePlan it belongs in: these
    /// patients are pulled whole (`PatientPull`) and imported in context, as a refresh does.
    public static func changedPatients(_ fetched: Fetched, files: ResourceFiles = ResourceFiles()) -> (ids: [String], notes: [ImportNote]) {
        var ids: Set<String> = []
        var notes: [ImportNote] = []
        for path in fetched.files {
            // Line by line: an incremental export can be large too.
            notes += files.forEach(path) { source, _ in
                let resource = source.resource
                if resource.resourceType == "Patient", let id = resource.string("id") { ids.insert(id) }
                for referencePath in StagedImport.patientReferencePaths {
                    if let id = resource.first(referencePath)?.value.flatMap(RestHookNotification.patientID(in:)) { ids.insert(id) }
                }
            }
        }
        return (ids.sorted(), notes)
    }

    /// This source's unfinished fetch (when its status URL still answers), or a new export.
    func started(_ request: BulkExportRequest, source: String) async throws(BulkFetchError) -> (BulkFetch, resumed: Bool) {
        if let kept = try stored(source) {
            progress?("resuming the export at \(kept.statusURL) (\(kept.downloaded.count) file\(kept.downloaded.count == 1 ? "" : "s") downloaded)")
            return (kept, true)
        }
        return (try await kickedOff(request, source: source), false)
    }

    /// A new export, kept in the store before anything else is asked of it.
    func kickedOff(_ request: BulkExportRequest, source: String) async throws(BulkFetchError) -> BulkFetch {
        let status = try await step("kick-off") { () async throws(FHIRClientError) in try await bulk.kickOff(request) }
        progress?("export started: \(status)")
        let record = BulkFetch(source: source, statusURL: status, startedAt: Date())
        try keep(record)
        return record
    }

    func stored(_ source: String) throws(BulkFetchError) -> BulkFetch? {
        do { return try log.bulkFetch(source: source) } catch { throw BulkFetchError(step: "store", cause: error.description) }
    }

    func keep(_ record: BulkFetch) throws(BulkFetchError) {
        do { try log.saveBulkFetch(record) } catch { throw BulkFetchError(step: "store", cause: error.description) }
    }

    func makeDirectory(_ directory: String) throws(BulkFetchError) {
        do { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) } catch {
            throw BulkFetchError(step: directory, cause: "\(error)")
        }
    }

    func step<T>(_ name: String, _ body: () async throws(FHIRClientError) -> T) async throws(BulkFetchError) -> T {
        do { return try await body() } catch { throw BulkFetchError(step: name, cause: error.description) }
    }

    func step<T>(_ name: String, _ body: () throws(FHIRClientError) -> T) throws(BulkFetchError) -> T {
        do { return try body() } catch { throw BulkFetchError(step: name, cause: error.description) }
    }

    /// The OperationOutcomes of an error file, one warning per issue, naming the file's URL and line.
    static func serverErrors(_ path: String, url: String) -> [ImportNote] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            return [ImportNote(kind: .warning, resource: "OperationOutcome", path: nil, origin: url, message: "the server's error file could not be read")]
        }
        var notes: [ImportNote] = []
        for (i, line) in text.split(separator: "\n").enumerated() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let origin = "\(url):\(i + 1)"
            guard let outcome = try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(Array(line.utf8)).resource,
                  let summary = FHIRRESTClient.outcomeSummary(outcome) else {
                notes.append(ImportNote(kind: .warning, resource: "OperationOutcome", path: nil, origin: origin, message: "the server reported an error that is not an OperationOutcome"))
                continue
            }
            notes.append(ImportNote(kind: .error, resource: "OperationOutcome", path: nil, origin: origin, message: "the server's export: \(summary)"))
        }
        return notes
    }

    /// A resource type as a file name part (a server's manifest is not trusted with paths).
    /// Where the manifest's `i`th output file is downloaded: in `directory`, named by its place
    /// and the letters and digits of its type (a hostile manifest names no path).
    public static func downloadPath(of file: BulkManifest.File, at i: Int, in directory: String) -> String {
        "\(directory)/\(i)-\(safeName(file.type)).ndjson"
    }

    static func safeName(_ type: String) -> String {
        let name = String(type.unicodeScalars.filter { CharacterSet.alphanumerics.contains($0) }.prefix(64).map(Character.init))
        return name.isEmpty ? "resources" : name
    }

    static func megabytes(_ bytes: Int) -> String { String(format: "%.1f MB", Double(bytes) / 1_000_000) }
}
