import Foundation
import Testing

/// The package's own rules, read from its manifest and sources: every module a target imports is
/// one it declares, the modules follow the data's order, and platform calls are guarded.
@Suite("package structure")
struct PackageStructureTests {
    let cli = CommandLineTests()

    /// Target name to its declared dependencies, from `swift package dump-package`.
    func manifest() async throws -> [String: Set<String>] {
        // A scratch path of its own: the running `swift test` holds the lock of .build.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-manifest-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let run = try await cli.run(["/usr/bin/env", "swift", "package", "--scratch-path", scratch.path, "dump-package"])
        #expect(run.status == 0, "\(run.stderr)")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        var targets: [String: Set<String>] = [:]
        for target in json["targets"] as? [[String: Any]] ?? [] {
            let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap { entry in
                entry.values.compactMap { ($0 as? [Any])?.first as? String }.first
            }
            targets[target["name"] as! String] = Set(dependencies)
        }
        return targets
    }

    /// The modules `import`ed by the Swift files under a folder.
    func imports(under folder: URL) throws -> Set<String> {
        var found: Set<String> = []
        for case let relative as String in FileManager.default.enumerator(atPath: folder.path) ?? NSEnumerator() where relative.hasSuffix(".swift") {
            let text = try String(contentsOf: folder.appendingPathComponent(relative), encoding: .utf8)
            for line in text.split(separator: "\n") {
                let words = line.split(separator: " ")
                if let i = words.firstIndex(of: "import"), i + 1 < words.count, words[..<i].allSatisfy({ ["@testable", "internal", "public", "@_exported"].contains($0) }) {
                    found.insert(String(words[i + 1]))
                }
            }
        }
        return found
    }

    @Test("every project module a target imports is a dependency it declares")
    func importsAreDeclared() async throws {
        let targets = try await manifest()
        let projectModules = Set(targets.keys)
        for (name, dependencies) in targets {
            let folder = CommandLineTests.projectRoot.appendingPathComponent(name.hasSuffix("Tests") ? "Tests/\(name)" : "Sources/\(name)")
            let undeclared = try imports(under: folder).intersection(projectModules).subtracting(dependencies).subtracting([name])
            #expect(undeclared.isEmpty, "\(name) imports \(undeclared.sorted()) without declaring it in Package.swift")
        }
    }

    @Test("the modules follow the data's way: each depends only on those before it")
    func layering() async throws {
        let order = ["JSON", "Diagnostics", "CareCharts", "CLibXML2", "CLibCurl", "CMalloc", "FHIR", "FHIRPath", "CZlib", "FHIRPackages", "FHIRValidation", "CareStore", "Mapping", "CarePages", "FHIRClient", "Gateway", "GatewayServer", "caregate"]
        let targets = try await manifest()
        for (i, name) in order.enumerated() {
            let later = Set(order[(i + 1)...])
            #expect(targets[name]?.isDisjoint(with: later) == true, "\(name) depends on a later module: \(targets[name]?.intersection(later).sorted() ?? [])")
        }
        #expect(targets["CareStore"]?.contains("FHIR") == false, "CareStore knows nothing of FHIR")
        // FHIRClient only for the EHR connection's settings (read from the configuration), as the command line does.
        #expect(targets["GatewayServer"]?.contains("FHIR") == false, "the server is thin: it reads and writes FHIR only through Gateway's use cases")
    }

    @Test("calls qualified by Glibc sit inside #if canImport(Glibc), so the macOS claim in Package.swift holds")
    func platformGuards() throws {
        let sources = CommandLineTests.projectRoot.appendingPathComponent("Sources")
        for case let relative as String in FileManager.default.enumerator(atPath: sources.path) ?? NSEnumerator() where relative.hasSuffix(".swift") {
            let lines = try String(contentsOf: sources.appendingPathComponent(relative), encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            var depth = 0, guardedDepth: Int?
            for (n, line) in lines.enumerated() {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("#if") {
                    depth += 1
                    if text.contains("canImport(Glibc)") && guardedDepth == nil { guardedDepth = depth }
                } else if text.hasPrefix("#else") || text.hasPrefix("#elseif") {
                    if guardedDepth == depth { guardedDepth = nil }
                } else if text.hasPrefix("#endif") {
                    if guardedDepth == depth { guardedDepth = nil }
                    depth -= 1
                } else if guardedDepth == nil, text.contains("Glibc") {
                    Issue.record("Sources/\(relative):\(n + 1): Glibc outside #if canImport(Glibc): \(text)")
                }
            }
        }
    }

    @Test("Gateway and the server work through the store's protocols: their code never names the SQLite store")
    func gatewayUsesTheProtocols() throws {
        for module in ["Gateway", "GatewayServer"] {
            let folder = CommandLineTests.projectRoot.appendingPathComponent("Sources/\(module)")
            for case let relative as String in FileManager.default.enumerator(atPath: folder.path) ?? NSEnumerator() where relative.hasSuffix(".swift") {
                let lines = try String(contentsOf: folder.appendingPathComponent(relative), encoding: .utf8).split(separator: "\n")
                for (n, line) in lines.enumerated() where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    #expect(!line.contains("SQLiteCarePlanStore") && !line.contains("import GRDB"), "Sources/\(module)/\(relative):\(n + 1): \(line)")
                }
            }
        }
    }

    @Test("the store and the library modules take no settings from the environment (no debug switches); only the command line reads it")
    func noEnvironmentSwitches() throws {
        let sources = CommandLineTests.projectRoot.appendingPathComponent("Sources")
        for module in ["JSON", "Diagnostics", "FHIR", "FHIRPath", "FHIRPackages", "FHIRValidation", "CareStore", "PostgresStore", "Mapping", "Gateway", "GatewayServer"] {
            let folder = sources.appendingPathComponent(module)
            for case let relative as String in FileManager.default.enumerator(atPath: folder.path) ?? NSEnumerator() where relative.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appendingPathComponent(relative), encoding: .utf8)
                #expect(!text.contains("getenv(") && !text.contains("ProcessInfo.processInfo.environment"), "Sources/\(module)/\(relative) reads the environment")
            }
        }
    }
}
