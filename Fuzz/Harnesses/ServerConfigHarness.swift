import Diagnostics
import GatewayServer

/// `caregate serve`'s configuration files: any bytes give a configuration or findings, each
/// with a line and column inside the file, never a crash.
public enum ServerConfigHarness: FuzzHarness {
    public static let name = "server-config"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let file = try ScratchFile(input, name: "gateway.yaml")
        defer { file.remove() }
        let lines = MappingHarness.yamlLines(input)
        let config: GatewayConfig
        do { config = try GatewayConfig.load(path: file.path) } catch {
            for diagnostic in error.diagnostics where diagnostic.location.line < 1 || diagnostic.location.line > lines + 1 {
                throw PropertyFailure("a finding outside the file's \(lines) lines: \(diagnostic)")
            }
            return
        }
        guard (0...65_535).contains(config.port), config.pageSize >= 1 else { throw PropertyFailure("a configuration out of range was accepted: \(config)") }
    }
}
