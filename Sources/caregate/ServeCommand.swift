import ArgumentParser
import CareStore
import Foundation
import GatewayServer
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
        do { loaded = try GatewayConfig.load(path: config) } catch {
            for diagnostic in error.diagnostics { StandardError.print(TerminalText.escaped(diagnostic.description)) }
            throw ExitCode(1)
        }
        if checkConfig {
            StandardError.print("\(config): fine (listen \(loaded.host):\(loaded.port), store \(loaded.store))")
            return
        }
        let store: SQLiteCarePlanStore
        do { store = try SQLiteCarePlanStore(path: loaded.store) } catch { throw CommandError.store(error) }
        let server = GatewayServer(store: store, limits: loaded.limits)
        LoggingSystem.bootstrap { JSONLogHandler(label: $0) }
        let logger = Logger(label: "caregate")
        let host = loaded.host
        let app = server.application(host: host, port: loaded.port, logger: logger) { port in
            StandardError.print("caregate serve: listening on http://\(host):\(port) (store \(loaded.store))")
        }
        try await app.runService()
        StandardError.print("caregate serve: stopped")
    }
}
