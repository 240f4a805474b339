import CareStore
import Foundation
import Testing
@testable import PostgresStore

@Suite("Where a PostgreSQL store lives: the URL, its password and TLS")
struct PostgresLocationTests {
    @Test("a postgres:// URL gives host, port, user and database; TLS is verify-full off loopback unless disabled by name")
    func parsing() throws {
        let remote = try PostgresLocation(url: "postgres://caregate@db.internal:6543/care?sslrootcert=/etc/caregate/db-ca.pem")
        #expect(remote.host == "db.internal" && remote.port == 6543 && remote.user == "caregate" && remote.database == "care")
        #expect(remote.tls == .verifyFull && remote.caBundle == "/etc/caregate/db-ca.pem")
        #expect(remote.description == "postgres://caregate@db.internal:6543/care")
        let local = try PostgresLocation(url: "postgresql://gw@127.0.0.1/care")
        #expect(local.port == 5432 && local.tls == .disable)
        #expect(try PostgresLocation(url: "postgres://gw@db/care?sslmode=disable").tls == .disable)
        #expect(try PostgresLocation(url: "postgres://gw@localhost/care?sslmode=verify-full").tls == .verifyFull)
        #expect(PostgresLocation.names("postgres://x@y/z") && !PostgresLocation.names("caregate.sqlite") && !PostgresLocation.names("./postgres:x"))
    }

    @Test("a password in the URL, no user, no database, an unknown parameter or a TLS mode that checks nothing is refused, and the refusal never shows the password",
          arguments: [
            ("postgres://gw:s3cret-pw@db/care", "holds a password"),
            ("postgres://db/care", "names no user"),
            ("postgres://gw@db", "names no database"),
            ("postgres://gw@db/care?sslmode=require", "sslmode 'require'"),
            ("postgres://gw@db/care?sslmode=prefer", "sslmode 'prefer'"),
            ("postgres://gw@db/care?connect_timeout=3", "unknown parameter 'connect_timeout'"),
            ("postgres://gw@db/care?sslmode=disable&sslrootcert=/ca.pem", "sslrootcert is given but sslmode is disable"),
            ("mysql://gw@db/care", "not a postgres://"),
          ])
    func refusals(url: String, reason: String) {
        #expect {
            _ = try PostgresLocation(url: url)
        } throws: { error in
            let text = "\(error)"
            return text.contains(reason) && !text.contains("s3cret-pw")
        }
    }

    @Test("the password comes from an owner-only file or $CAREGATE_STORE_PASSWORD; a file others can read is refused naming the fix")
    func password() throws {
        let location = try PostgresLocation(url: "postgres://gw@db/care")
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-pw-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        FileManager.default.createFile(atPath: file, contents: Data("from-the-file\n".utf8), attributes: [.posixPermissions: 0o600])
        #expect(try location.password(file: file, environment: [:]) == "from-the-file")
        #expect(try location.password(file: nil, environment: ["CAREGATE_STORE_PASSWORD": "from-env"]) == "from-env")
        #expect(try location.password(file: nil, environment: [:]) == nil)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        #expect { _ = try location.password(file: file, environment: [:]) } throws: { "\($0)".contains("chmod 600") }
        #expect { _ = try location.password(file: file + ".missing", environment: [:]) } throws: { "\($0)".contains("cannot be read") }
    }
}

@Suite("The PostgreSQL schema: migrations at open, once, whoever starts first", .serialized)
struct PostgresSchemaTests {
    @Test("six gateways opening one new database at once migrate it once: each migration is applied by exactly one of them, and all find the same schema")
    func concurrentMigration() async throws {
        guard let (location, password) = try TestPostgres.freshLocation() else { return }
        let applied = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<6 {
                group.addTask {
                    try await Task.detached {
                        try PostgresSchema.migrate(PostgresDatabase(location, password: password, maximumConnections: 1))
                    }.value
                }
            }
            var all: [String] = []
            for try await names in group { all += names }
            return all
        }
        #expect(applied.sorted() == PostgresSchema.migrations.map(\.name).sorted())
        let database = try PostgresDatabase(location, password: password)
        #expect(try PostgresSchema.applied(database) == PostgresSchema.migrations.map(\.name))
        #expect(try PostgresSchema.migrate(database).isEmpty)
    }

    @Test("a wrong password and an unreachable server are refused naming the database, never the password")
    func connectionFailures() throws {
        guard let (location, _) = try TestPostgres.freshLocation() else { return }
        let wrong = try PostgresDatabase(location, password: "not-the-password-123", maximumConnections: 1)
        #expect { try PostgresSchema.migrate(wrong) } throws: { error in
            let text = "\(error)"
            return text.contains(location.description) && text.contains("28P01") && !text.contains("not-the-password-123")
        }
        var closed = location
        closed.port = 9
        #expect { try PostgresSchema.migrate(PostgresDatabase(closed, password: nil, maximumConnections: 1)) } throws: { error in
            "\(error)".contains("127.0.0.1:9") && "\(error)".contains("connecting")
        }
    }

    @Test("a statement the server refuses leaves the connection usable and the transaction rolled back")
    func refusedStatement() throws {
        guard let database = try TestPostgres.freshDatabase() else { return }
        try PostgresSchema.migrate(database)
        #expect(throws: StoreError.self) {
            try database.transaction { session in
                try session.query("INSERT INTO store_meta (key, value) VALUES ('a', '1')")
                try session.query("INSERT INTO store_meta (key, value) VALUES ('a', '2')")
            }
        }
        let rows = try database.withSession { try $0.query("SELECT count(*) FROM store_meta").map { try $0.decode(Int.self) } }
        #expect(rows == [0])
    }
}

@Suite("TLS to PostgreSQL", .serialized)
struct PostgresTLSTests {
    /// The test cluster's location over TLS, or nil after a SKIPPED line.
    func verifiedLocation(caBundle: String?, _ test: String = #function) throws -> (PostgresLocation, String?)? {
        guard let (location, password) = try TestPostgres.freshLocation(test) else { return nil }
        guard let ca = ProcessInfo.processInfo.environment["CAREGATE_TEST_POSTGRES_CA"] else {
            print("SKIPPED \(test): the test cluster has no TLS certificate (scripts/test-postgres.sh makes one)")
            return nil
        }
        var tls = location
        tls.tls = .verifyFull
        tls.caBundle = caBundle == "the cluster's" ? ca : caBundle
        return (tls, password)
    }

    @Test("sslmode=verify-full with the server's CA connects over TLS (the server says so)")
    func verified() throws {
        guard let (location, password) = try verifiedLocation(caBundle: "the cluster's") else { return }
        let database = try PostgresDatabase(location, password: password, maximumConnections: 1)
        let ssl = try database.withSession { try $0.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").map { try $0.decode(Bool.self) } }
        #expect(ssl == [true])
        #expect(try PostgresCarePlanStore(database).outboxCounts() == OutboxCounts())
    }

    @Test("a server whose certificate the CAs do not vouch for is refused, and so is a CA bundle that cannot be read")
    func untrusted() throws {
        guard let (location, password) = try verifiedLocation(caBundle: nil) else { return }
        #expect {
            try PostgresDatabase(location, password: password, maximumConnections: 1).withSession { try $0.execute("SELECT 1") }
        } throws: { error in
            "\(error)".contains(location.description) && "\(error)".lowercased().contains("certificate")
        }
        var unreadable = location
        unreadable.caBundle = "/nonexistent/ca.pem"
        #expect { _ = try PostgresDatabase(unreadable, password: password) } throws: { "\($0)".contains("sslrootcert /nonexistent/ca.pem cannot be read") }
    }
}
