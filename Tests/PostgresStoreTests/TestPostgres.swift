import CareStore
import Foundation
import PostgresStore

/// The scratch PostgreSQL cluster `scripts/test.sh` starts (`scripts/test-postgres.sh`): each
/// test gets a database of its own. Without the cluster (PostgreSQL not installed, or the tests
/// run without the script) tests print a SKIPPED line and pass without running.
enum TestPostgres {
    /// The cluster's administrative URL and password, from the script's exports.
    static var cluster: (location: PostgresLocation, password: String?)? {
        let environment = ProcessInfo.processInfo.environment
        guard let url = environment["CAREGATE_TEST_POSTGRES"], let location = try? PostgresLocation(url: url) else { return nil }
        let password = environment["CAREGATE_TEST_POSTGRES_PASSWORD_FILE"].flatMap { try? location.password(file: $0, environment: [:]) }
        return (location, password)
    }

    /// A new, empty database's location (and the password for it), or nil after a SKIPPED line.
    static func freshLocation(_ test: String = #function) throws -> (location: PostgresLocation, password: String?)? {
        guard let (admin, password) = cluster else {
            print("SKIPPED \(test): no PostgreSQL test cluster (run the tests through scripts/test.sh, which starts one; Debian's postgresql package)")
            return nil
        }
        let name = "caregate_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        try PostgresDatabase(admin, password: password, maximumConnections: 1).withSession { try $0.execute("CREATE DATABASE \(name)") }
        var location = admin
        location.database = String(name)
        return (location, password)
    }

    /// A new, empty database, opened (not migrated).
    static func freshDatabase(_ test: String = #function, maximumConnections: Int = 4) throws -> PostgresDatabase? {
        guard let (location, password) = try freshLocation(test) else { return nil }
        return try PostgresDatabase(location, password: password, maximumConnections: maximumConnections)
    }
}
