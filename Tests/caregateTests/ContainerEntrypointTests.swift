import Foundation
import Testing

/// The container's entrypoint (docker/entrypoint.sh) run without Docker, with the image's paths
/// under a folder of the test's own: the same script, the same user switch (setpriv), the same
/// default store in the data folder.
@Suite("container entrypoint")
struct ContainerEntrypointTests {
    let cli = CommandLineTests()
    static let nobody = "nobody"

    /// A world-readable folder holding a copy of the binary and the demo Bundle, so that the
    /// unprivileged user can reach them wherever the clone is.
    func container() throws -> URL {
        let root = URL(fileURLWithPath: "/tmp").appendingPathComponent("caregate-entrypoint-\(UUID().uuidString)")
        let bin = root.appendingPathComponent("bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: CommandLineTests.binary, toPath: bin.appendingPathComponent("caregate").path)
        try FileManager.default.copyItem(at: CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/bundle/maria-lopez-demo-bundle.json"),
                                         to: root.appendingPathComponent("demo.json"))
        for path in [root.path, bin.path] { try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path) }
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: root.appendingPathComponent("demo.json").path)
        return root
    }

    func entrypoint(_ arguments: [String], in root: URL, prefix: [String] = []) async throws -> CommandLineTests.Run {
        let script = CommandLineTests.projectRoot.appendingPathComponent("docker/entrypoint.sh").path
        let environment = ["CAREGATE_DATA": root.appendingPathComponent("data").path, "CAREGATE_USER": Self.nobody,
                           "PATH": root.appendingPathComponent("bin").path + ":/usr/sbin:/usr/bin:/sbin:/bin", "CAREGATE_STORE": ""]
        return try await cli.run(prefix + ["/bin/sh", script] + arguments, environment: environment, directory: root)
    }

    @Test("started as root: the data folder becomes the unprivileged user's, the default store is written there by that user")
    func asRoot() async throws {
        guard getuid() == 0 else {
            print("SKIPPED the container entrypoint test as root: these tests do not run as root, so no user switch can be tried")
            return
        }
        let root = try container()
        defer { try? FileManager.default.removeItem(at: root) }
        let run = try await entrypoint(["import", root.appendingPathComponent("demo.json").path, "--tz", "America/New_York"], in: root)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stdout.contains("15 created"))
        let store = root.appendingPathComponent("data/caregate.sqlite").path
        let attributes = try FileManager.default.attributesOfItem(atPath: store)
        #expect(attributes[.ownerAccountName] as? String == Self.nobody, "written by the switched user, not root")
        #expect((try FileManager.default.attributesOfItem(atPath: root.appendingPathComponent("data").path))[.ownerAccountName] as? String == Self.nobody)
        // --exec runs another program as that user, in the data folder.
        let whoami = try await entrypoint(["--exec", "/bin/sh", "-c", "id -un; pwd; echo $CAREGATE_STORE"], in: root)
        #expect(whoami.stdout == "\(Self.nobody)\n\(root.path)/data\n\(store)\n")
        let status = try await entrypoint(["status"], in: root)
        #expect(status.status == 0 && status.stdout.contains("outbox: 0 queued"))
    }

    @Test("started as an unprivileged user who cannot write the data folder: a clear error, nothing run")
    func readOnlyData() async throws {
        guard getuid() == 0 else {
            print("SKIPPED the read-only data folder test: it switches to an unprivileged user, which needs root")
            return
        }
        let root = try container()
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root.appendingPathComponent("data"), withIntermediateDirectories: true)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root.appendingPathComponent("data").path)
        let prefix = ["/usr/bin/setpriv", "--reuid=\(Self.nobody)", "--regid=nogroup", "--clear-groups", "--"]
        let run = try await entrypoint(["status"], in: root, prefix: prefix)
        #expect(run.status == 1)
        #expect(run.stderr.contains("caregate: cannot write \(root.path)/data, where the store lives: mount a volume that user 65534 can write, or start the container as root"))
        #expect(!FileManager.default.fileExists(atPath: root.appendingPathComponent("data/caregate.sqlite").path))
    }
}
