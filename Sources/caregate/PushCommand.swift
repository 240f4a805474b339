import ArgumentParser
import CareStore
import FHIR
import FHIRClient
import Foundation
import Gateway
import Mapping

/// Options for talking to a FHIR server: TLS and authentication (secrets from files or the environment).
struct ServerOptions: ParsableArguments {
    @Option(name: .customLong("ca-bundle"), help: "PEM file of the CAs to trust (default: the system's).", completion: .file())
    var caBundle: String?

    @Option(name: .customLong("client-cert"), help: "PEM client certificate for mutual TLS.", completion: .file())
    var clientCertificate: String?

    @Option(name: .customLong("client-key"), help: "PEM private key of the client certificate.", completion: .file())
    var clientKey: String?

    @Flag(help: "Do not verify the server's certificate (testing only).")
    var insecure = false

    @Option(name: .customLong("token-file"), help: "A file holding a bearer token (first line).", completion: .file())
    var tokenFile: String?

    @Option(name: .customLong("token-env"), help: "An environment variable holding a bearer token.")
    var tokenEnvironment: String?

    @Option(name: .customLong("smart-client-id"), help: "SMART Backend Services: this client's id at the EHR's authorization server.")
    var smartClientID: String?

    @Option(name: .customLong("smart-key"), help: "SMART Backend Services: PEM private key (RSA for RS384, P-384 for ES384).", completion: .file())
    var smartKey: String?

    @Option(name: .customLong("smart-key-env"), help: "SMART Backend Services: an environment variable holding the PEM private key.")
    var smartKeyEnvironment: String?

    @Option(name: .customLong("smart-key-id"), help: "SMART Backend Services: the kid of the registered public key.")
    var smartKeyID: String?

    @Option(name: .customLong("smart-scope"), help: "SMART Backend Services: the scopes to ask for (default: what the command needs).")
    var smartScope: String?

    @Option(name: .customLong("token-endpoint"), help: "SMART Backend Services: the token endpoint (default: from [base]/.well-known/smart-configuration).")
    var tokenEndpoint: String?

    @Option(name: .customLong("max-response-size"), help: "The largest answer read from the server, in bytes once decompressed.")
    var maximumResponseSize = CurlTransport.defaultMaximumResponseSize

    @Option(name: .customLong("retry-attempts"), help: "Tries per request for 408, 429, 5xx and network faults (1: no retry).")
    var retryAttempts = RetryPolicy.standard.maxAttempts

    @Option(name: .customLong("retry-seconds"), help: "No retry starts later than this many seconds after a request's first try.")
    var retrySeconds = RetryPolicy.standard.maxTotal

    func validate() throws {
        if retryAttempts < 1 { throw ValidationError("--retry-attempts must be at least 1") }
        if maximumResponseSize < 1024 { throw ValidationError("--max-response-size must be at least 1024 bytes") }
        let ways = [tokenFile != nil || tokenEnvironment != nil, smartClientID != nil].filter { $0 }.count
        if ways > 1 { throw ValidationError("choose one way to authenticate: a bearer token (--token-file/--token-env) or SMART Backend Services (--smart-client-id)") }
        if tokenFile != nil && tokenEnvironment != nil { throw ValidationError("give --token-file or --token-env, not both") }
        if smartClientID != nil && (smartKey == nil) == (smartKeyEnvironment == nil) {
            throw ValidationError("--smart-client-id needs the private key: --smart-key FILE or --smart-key-env NAME (one of them)")
        }
        if smartClientID == nil && (smartKey != nil || smartKeyEnvironment != nil || smartKeyID != nil || smartScope != nil || tokenEndpoint != nil) {
            throw ValidationError("the --smart-* options and --token-endpoint need --smart-client-id")
        }
    }

    /// The connection these options describe.
    func connection(_ base: String) -> FHIRServerConnection {
        var connection = FHIRServerConnection(base: base)
        connection.retry.maxAttempts = retryAttempts
        connection.retry.maxTotal = retrySeconds
        connection.tls = TLSOptions(verify: !insecure, caBundle: caBundle, clientCertificate: clientCertificate, clientKey: clientKey)
        connection.maximumResponseSize = maximumResponseSize
        if let smartClientID {
            connection.credentials = .smart(.init(clientID: smartClientID, keyFile: smartKey, keyEnvironment: smartKeyEnvironment,
                                                  keyID: smartKeyID, scope: smartScope, tokenEndpoint: tokenEndpoint))
        } else if let tokenFile {
            connection.credentials = .tokenFile(tokenFile)
        } else if let tokenEnvironment {
            connection.credentials = .tokenEnvironment(tokenEnvironment)
        }
        return connection
    }

    func client(_ base: String, defaultScope: String) throws -> FHIRRESTClient {
        do {
            return try connection(base).client(defaultScope: defaultScope) { StandardError.print("warning: \($0)") }
        } catch { throw CommandError.message(error.description) }
    }
}

/// `caregate push --to URL [--dry-run]`
struct PushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push",
        abstract: "Push recorded outcomes to a FHIR server as Observations (or MedicationAdministrations), exactly once.",
        discussion: """
            Every current outcome version is queued once in the store's outbox; each queued item \
            is sent as a conditional create by its identifier (amended and entered-in-error ones as \
            conditional updates), in batch Bundles when the server takes them, so that after any crash, lost answer or 429/503 storm a re-run \
            leaves exactly one Observation per outcome on the server. Refused Observations go to \
            the dead-letter list with the server's OperationOutcome (see caregate status); with \
            --profiles, what breaks the target's profiles is a dead letter before it is sent, \
            holding the validator's OperationOutcome (--retry-failed sends it after a fix); \
            transient failures stay queued for the next run. A Provenance names the gateway as \
            author of each run's pushes.

            Examples:
              caregate push --to https://ehr.example.org/fhir --token-file ehr.token
              caregate push --to http://127.0.0.1:8090/fhir --dry-run
              caregate push --to https://ehr.example.org/fhir --smart-client-id caregate \\
                  --smart-key keys/caregate-rs384.pem --smart-key-id 2026-11
            """)

    @Option(name: .long, help: "The FHIR server's base URL.")
    var to: String

    @OptionGroup var options: StoreOptions
    @OptionGroup var server: ServerOptions

    @OptionGroup var mappings: MappingOptions

    @Option(name: .long, help: "The time zone effective times are written in (default: this machine's).", transform: TimeZoneArgument.parse)
    var tz: TimeZone?

    @OptionGroup var profiles: ProfileOptions

    @Flag(name: .customLong("dry-run"), help: "Queue and show what would be sent, without contacting the server.")
    var dryRun = false

    @Flag(name: .customLong("retry-failed"), help: "Export the dead letters again (after fixing the mappings, say) and send them with the rest.")
    var retryFailed = false

    @Option(name: .customLong("patient"), help: ArgumentHelp("With --retry-failed: only this patient's dead letters (Patient/ID).", valueName: "id"))
    var retryPatient: String?

    @Option(name: .customLong("batch-size"), help: "Observations per batch Bundle when the server takes batches (1: one request each).")
    var batchSize = 50

    @Option(name: .customLong("lease-seconds"),
            help: "How long this run holds the queued items it takes; a run that dies leaves them to others after this (default: 600).")
    var leaseSeconds = Int(OutcomePush.defaultLease)

    func validate() throws {
        if batchSize < 1 { throw ValidationError("--batch-size must be at least 1") }
        if leaseSeconds < 1 { throw ValidationError("--lease-seconds must be at least 1") }
        if retryPatient != nil && !retryFailed { throw ValidationError("--patient narrows --retry-failed: give both") }
    }

    func run() async throws {
        let zone = tz ?? .current
        let set = try mappings.load(whatFails: "pushed")
        let store = try options.open(.existing)
        let bar = ProgressBar()
        var export = OutcomeExport(store: store, builder: ObservationBuilder(mappings: set, timeZone: zone))
        export.profiles = try profiles.profileTarget()
        export.organization = profiles.organization
        export.progress = { bar.update("exporting", done: $0, total: $1) }
        var push = OutcomePush(outbox: store, export: export, client: try server.client(to, defaultScope: SMARTScopes.push))
        push.batchSize = batchSize
        push.lease = TimeInterval(leaseSeconds)
        push.progress = { bar.update("pushing", done: $0, total: $1) }
        /// What a run sent, as this host's OS user's entries.
        func entries(_ report: PushReport) -> [AuditEntry] { report.auditEntries(actor: .osUser, source: ProcessInfo.processInfo.hostName) }
        let report: PushReport
        do { report = try await push.run(dryRun: dryRun, retryFailed: retryFailed, retryPatient: retryPatient) } catch {
            bar.finish()
            // What the run sent before it failed is in the outbox, and entered in the trail with the failed run.
            let sent = ((error as? PushInterrupted)?.report).map(entries) ?? []
            try? store.record(sent + [CommandAudit(command: "push").entry(.create, patientID: nil, outcome: .failed, detail: "\(error)")])
            throw CommandError.message("\(error)")
        }
        bar.finish()
        do { try store.record(entries(report)) } catch {
            StandardError.print("warning: the push is done, and was not recorded in the audit trail: \(error)")
        }
        for line in report.planned { print("would \(line)") }
        for item in report.pushed { print("pushed \(item.identifier)\(item.location.map { " → \($0)" } ?? "")") }
        for item in report.failed { print("refused \(item.identifier): \(item.error)") }
        for item in report.deferred { print("deferred \(item.identifier): \(item.error)") }
        let counts = try store.outboxCounts()
        if report.retriedFailed > 0 { print("\(report.retriedFailed) dead letter\(report.retriedFailed == 1 ? "" : "s") exported again") }
        print("\(dryRun ? "dry run: " : "")\(report.newlyQueued) newly queued, \(report.pushed.count) pushed, \(report.failed.count) refused, \(report.deferred.count) deferred; outbox: \(counts.queued) queued, \(counts.pushed) pushed, \(counts.failed) failed")
        if !report.failed.isEmpty || !report.deferred.isEmpty { throw ExitCode(1) }
    }
}

/// `caregate status`
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the push outbox: queued, pushed and failed outcomes, with the failures' reasons.")

    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.open(.existing)
        let counts = try store.outboxCounts()
        print("outbox: \(counts.queued) queued, \(counts.pushed) pushed, \(counts.failed) failed")
        for item in try store.outbox(state: .failed) { print("failed \(item.idempotencyKey) after \(item.attempts) attempt(s): \(item.lastError ?? "")") }
        for item in try store.outbox(state: .queued) where item.attempts > 0 {
            print("queued \(item.idempotencyKey), \(item.attempts) attempt(s) so far: \(item.lastError ?? "")")
        }
    }
}
