import ArgumentParser
import CareStore
import Foundation
import Gateway
import GatewayServer
import Mapping
import Hummingbird
import Logging

/// `caregate serve`: the gateway as a service for CareKit apps.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve CareKit's sync API (enrollment, pull, push) and health checks over HTTP.",
        discussion: """
            Everything comes from one YAML file (see README, "Serving CareKit apps"); --check-config \
            checks it and exits, printing every finding with its line and column. SIGTERM or \
            SIGINT stops accepting connections, finishes the requests in flight and exits 0. Logs go \
            to standard error, one JSON object per line.

            Examples:
              caregate serve --config gateway.yaml --check-config
              caregate serve --config gateway.yaml
            """)

    @Option(help: ArgumentHelp("The configuration file.", valueName: "path"), completion: .file())
    var config: String

    @Flag(name: .customLong("check-config"), help: "Check the configuration and exit (0 when it is fine).")
    var checkConfig = false

    func run() async throws {
        let loaded: GatewayConfig
        do { loaded = try GatewayConfig.load(path: config, environment: ProcessInfo.processInfo.environment) } catch {
            for diagnostic in error.diagnostics { StandardError.print(TerminalText.escaped(diagnostic.description)) }
            throw ExitCode(1)
        }
        let location: StoreLocation
        do { location = try StoreLocation(loaded.store, passwordFile: loaded.storePasswordFile) } catch { throw CommandError.store(error) }
        let store: GatewayStore
        if checkConfig {
            // The EHR part is checked by building it (mappings, keys, tokens) over a store in memory.
            if let ehr = loaded.ehr { _ = try Self.link(ehr, store: try SQLiteCarePlanStore(inMemory: ()), config: config) }
            let ehr = loaded.ehr.map { ", EHR \($0.connection.base)" } ?? ""
            let tls = loaded.tls == nil ? "" : ", TLS"
            StandardError.print("\(config): fine (listen \(loaded.host):\(loaded.port)\(tls), store \(location)\(ehr))")
            return
        }
        do { store = try location.open(.creating, maximumConnections: loaded.storeConnections) } catch { throw CommandError.store(error) }
        let link = try loaded.ehr.map { try Self.link($0, store: store, config: config) }
        // Cookies are Secure unless served as plain HTTP on loopback.
        let dashboard = loaded.adminToken?.read(environment: ProcessInfo.processInfo.environment).map {
            DashboardAccess(adminToken: $0, secureCookie: loaded.tls != nil || loaded.allowPlainHTTP)
        }
        if let instance = Environment.value("CAREGATE_INSTANCE") { GatewayMetrics.name(instance: instance) }
        var server = GatewayServer(store: store, limits: loaded.limits, ehr: link, dashboard: dashboard)
        if loaded.ehr?.audit == true {
            server.audit = AuditRecorder(trail: store, queueing: AuditEventResource(observer: GatewayMetrics.instance).outboxItem)
        }
        server.auditRetention = loaded.auditRetention.map {
            AuditRetention(trail: store, keepDays: $0.keepDays, archive: $0.archive, observer: GatewayMetrics.instance)
        }
        LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
        let logger = Logger(label: "caregate")
        let host = loaded.host
        let tls = try loaded.tls.map { files in
            do { return try GatewayServer.tlsConfiguration(certificate: files.certificate, key: files.key) } catch {
                throw CommandError.message("tls: \(error)")
            }
        }
        let scheme = tls == nil ? "http" : "https"
        let app = try server.application(host: host, port: loaded.port, tls: tls, logger: logger) { port in
            let ui = dashboard == nil ? "" : ", dashboard at \(scheme)://\(host):\(port)/ui"
            StandardError.print("caregate serve: listening on \(scheme)://\(host):\(port) (store \(location)\(ui))")
        }
        try await app.runService()
        StandardError.print("caregate serve: stopped")
    }

    /// The EHR link of a configuration, its errors printed as the command's.
    static func link(_ ehr: GatewayConfig.EHR, store: GatewayServer.Store, config: String) throws -> EHRLink {
        let root = URL(fileURLWithPath: config).deletingLastPathComponent().path
        do {
            return try ehr.link(store: store, root: root, environment: ProcessInfo.processInfo.environment) { StandardError.print("warning: \($0)") }
        } catch let error as MappingError {
            for diagnostic in error.diagnostics { StandardError.print(TerminalText.escaped(diagnostic.description)) }
            throw CommandError.message("the mapping files in ehr.mappings have errors")
        } catch {
            throw CommandError.message("ehr: \(error)")
        }
    }
}

/// `caregate subscribe --config gateway.yaml`
struct SubscribeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "subscribe",
        abstract: "Create the EHR Subscriptions that notify `caregate serve` when an enrolled patient's CarePlan changes.",
        discussion: """
            One R4 rest-hook Subscription per enrolled patient (criteria CarePlan?subject=Patient/ID), \
            sending the changed plan to ehr.notify.endpoint with the token from ehr.notify. Run it \
            again after enrolling patients: the Subscriptions already on the EHR are found and kept.

            Example:
              caregate subscribe --config gateway.yaml
            """)

    @Option(help: ArgumentHelp("The configuration file (with ehr and ehr.notify).", valueName: "path"), completion: .file())
    var config: String

    func run() async throws {
        let loaded: GatewayConfig
        do { loaded = try GatewayConfig.load(path: config, environment: ProcessInfo.processInfo.environment) } catch {
            for diagnostic in error.diagnostics { StandardError.print(TerminalText.escaped(diagnostic.description)) }
            throw ExitCode(1)
        }
        guard let ehr = loaded.ehr, let endpoint = ehr.notifyEndpoint else {
            throw CommandError.message("\(config): subscribing needs ehr.base and ehr.notify.endpoint")
        }
        guard let token = ehr.notifyToken?.read() else { throw CommandError.message("\(config): no notification token in ehr.notify") }
        let store: GatewayStore
        do { store = try StoreLocation(loaded.store, passwordFile: loaded.storePasswordFile).open(.existing) } catch { throw CommandError.store(error) }
        let link = try ServeCommand.link(ehr, store: store, config: config)
        let patients: [EnrolledPatient]
        do { patients = try link.refresh.enrolledPatients() } catch { throw CommandError.store(error) }
        if patients.isEmpty { print("no enrolled patients: nothing to subscribe to (caregate enroll first)"); return }
        do {
            for outcome in try await CarePlanSubscription(endpoint: endpoint, token: token).ensure(on: link.refresh.client, patients: patients) {
                print("\(outcome.created ? "created" : "kept") \(outcome.location ?? "Subscription") for \(TerminalText.escaped(outcome.patient.storeID)): \(outcome.criteria)")
            }
        } catch { throw CommandError.message("\(ehr.connection.base): \(error)") }
    }
}
