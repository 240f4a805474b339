import ArgumentParser
import CareStore
import Foundation
import Mapping
import PostgresStore

/// The environment variables that set the defaults of every command.
enum Environment {
    /// The store's SQLite file when `--store` is absent.
    static let store = "CAREGATE_STORE"
    /// Site mapping files or folders (separated by ':') when `--mappings` is absent.
    static let mappings = "CAREGATE_MAPPINGS"

    static func value(_ name: String) -> String? {
        ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
    }
}

/// Options every store command takes.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The store: an SQLite file, or postgres://user@host:port/database (default: $\(Environment.store), else caregate.sqlite).",
                                            valueName: "path-or-url"),
            completion: .file())
    var store: String?

    @Option(name: .customLong("store-password-file"),
            help: ArgumentHelp("For a PostgreSQL store: an owner-only file holding the password (default: $\(PostgresLocation.passwordVariable)).", valueName: "path"),
            completion: .file())
    var storePasswordFile: String?

    /// The store in use: `--store`, else `$CAREGATE_STORE`, else caregate.sqlite in the working directory.
    var path: String { store ?? Environment.value(Environment.store) ?? "caregate.sqlite" }

    /// Where the store is, checked (a PostgreSQL URL parsed, its password read).
    func location() throws -> StoreLocation { try Self.location(path, passwordFile: storePasswordFile) }

    static func location(_ text: String, passwordFile: String?) throws -> StoreLocation {
        do { return try StoreLocation(text, passwordFile: passwordFile) } catch { throw CommandError.store(error) }
    }

    /// Opens the store; `use` says whether the command may make it (see `StoreLocation.Use`).
    func open(_ use: StoreLocation.Use) throws -> GatewayStore {
        do { return try location().open(use) } catch let error as StoreError { throw CommandError.store(error) }
    }
}

/// `--mapping-root`: the folder mapping files may read inside (`include`, `extends`, test
/// inputs); unless given, the folder holding each file's own folder
/// (`MappingSource.defaultRoot`), whatever the working directory.
struct MappingRootOption: ParsableArguments {
    @Option(name: .customLong("mapping-root"), help: ArgumentHelp("Mapping files read only inside this folder (default: the folder holding each mapping file's folder).", valueName: "dir"),
            completion: .directory)
    var mappingRoot: String?

    /// The root for these mapping paths: `--mapping-root`, else `MappingSource.defaultRoot`.
    func root(for paths: [String]) -> String { mappingRoot ?? MappingSource.defaultRoot(for: paths) }
}

/// `--mappings`: a site's mapping files over the built-in ones.
struct MappingOptions: ParsableArguments {
    @OptionGroup var readRoot: MappingRootOption

    @Option(name: .long, parsing: .singleValue,
            help: ArgumentHelp("Site mapping files or folders, over the built-in ones (default: $\(Environment.mappings), ':'-separated).", valueName: "path"),
            completion: .file())
    var mappings: [String] = []

    /// `--mappings`, else `$CAREGATE_MAPPINGS`; empty for the built-in files alone.
    var sitePaths: [String] { mappings.isEmpty ? MappingOptions.environmentPaths : mappings }

    /// `$CAREGATE_MAPPINGS`, split at ':'.
    static var environmentPaths: [String] {
        Environment.value(Environment.mappings).map { $0.split(separator: ":").map(String.init) } ?? []
    }

    /// The built-in mappings with the site's over them; errors are printed and end the command.
    func load(whatFails: String) throws -> MappingSet {
        do { return try MappingSet.load(site: sitePaths, root: readRoot.root(for: sitePaths)) } catch {
            for d in error.diagnostics { StandardError.print(d.description) }
            throw CommandError.message("the mapping files have errors; nothing was \(whatFails)")
        }
    }
}

/// `--tz`: an IANA time zone, refused with the same message by every command.
enum TimeZoneArgument {
    static func parse(_ name: String) throws -> TimeZone {
        guard let zone = TimeZone(identifier: name) else {
            throw ValidationError("unknown time zone '\(name)' (use an IANA name such as America/New_York)")
        }
        return zone
    }
}

/// The profiles exported resources claim and must meet, and the packages they come from.
struct ProfileOptions: ParsableArguments {
    @Option(name: .customLong("profiles"),
            help: ArgumentHelp("The profiles to claim and meet: base (R4 alone, the default), us-core-6.1.0, us-core-3.1.1, or a site package's name.", valueName: "target"))
    var target: String?

    @Option(name: .customLong("package"), help: ArgumentHelp("A FHIR package (.tgz or folder), or a folder or file of conformance resources (repeatable).", valueName: "path"),
            completion: .file())
    var packages: [String] = []

    @Option(name: .customLong("organization"),
            help: ArgumentHelp("The Organization the patients' devices act for in Provenances: Organization/<id> on the EHR, or a name.", valueName: "organization"))
    var organization: String?

    func validate() throws {
        if let organization, let problem = PatientSuppliedProvenance.problem(withOrganization: organization) {
            throw ValidationError("--organization: \(problem)")
        }
    }

    /// The target named, over the packages read; nil for none (R4 alone, nothing claimed).
    func profileTarget() throws -> ProfileTarget? {
        do { return try ProfileTarget.named(target, packages: packages) } catch { throw ValidationError("\(error)") }
    }
}
