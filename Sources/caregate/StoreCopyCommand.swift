import ArgumentParser
import CareStore
import Foundation

/// `caregate store copy --from A --to B`: a whole store moved between backends.
struct StoreCopy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a whole store into an empty one, SQLite to PostgreSQL or back, and check the copy version by version.",
        discussion: """
            Every version keeps its uuid, patient, device stamp and a sync number no lower than \
            it had, and the copy takes over the source's CareKit process, so enrolled devices go \
            on syncing against it. Devices, the push outbox (what was pushed stays pushed), the \
            import log, Bulk Data fetches and the devices' knowledge come along; enrollment \
            codes, wrong-code counts and dashboard sessions do not (they last minutes). Stop the \
            gateways first: the copy reads one snapshot, and writes made after it are not in it.

            Example:
              caregate store copy --from caregate.sqlite --to postgres://caregate@db.internal/care --to-password-file db.password
            """)

    @Option(help: ArgumentHelp("The store to copy: an SQLite file or a postgres:// URL.", valueName: "path-or-url"))
    var from: String

    @Option(help: ArgumentHelp("The empty store to copy into: an SQLite file (made if missing) or a postgres:// URL.", valueName: "path-or-url"))
    var to: String

    @Option(name: .customLong("from-password-file"), help: ArgumentHelp("The password file of a PostgreSQL --from.", valueName: "path"))
    var fromPasswordFile: String?

    @Option(name: .customLong("to-password-file"), help: ArgumentHelp("The password file of a PostgreSQL --to.", valueName: "path"))
    var toPasswordFile: String?

    func run() throws {
        let (source, target) = try open()
        do {
            let summary = try StoreTransfer(source: source, target: target).run()
            print("copied \(summary.versions) versions, \(summary.rows) rows of the gateway's tables from \(from) to \(to); the copy reads back the same, version by version")
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
    }

    func open() throws -> (any StoreArchive & Outbox & DeviceRegistry, any StoreArchive & Outbox & DeviceRegistry) {
        let source = try StoreOptions.location(from, passwordFile: fromPasswordFile)
        let target = try StoreOptions.location(to, passwordFile: toPasswordFile)
        guard source.description != target.description else { throw CommandError.message("--from and --to are the same store (\(source))") }
        if source.isMissingFile { throw CommandError.message("\(from): no such store") }
        do {
            guard let a = try source.open(.existing) as? any StoreArchive & Outbox & DeviceRegistry,
                  let b = try target.open(.creating) as? any StoreArchive & Outbox & DeviceRegistry else {
                throw CommandError.message("this store cannot be copied")
            }
            return (a, b)
        } catch let error as StoreError {
            throw CommandError.store(error)
        }
    }
}

/// Copies one store into another and checks the copy.
struct StoreTransfer {
    let source: any StoreArchive & Outbox & DeviceRegistry
    let target: any StoreArchive & Outbox & DeviceRegistry

    struct Summary { var versions = 0; var rows = 0 }

    func run() throws -> Summary {
        try refuseUnlessEmpty()
        var summary = Summary()
        if let process = try source.knowledgeVector().first?.id { try target.adoptProcessID(process) }
        var batch: [ArchivedVersion] = []
        try source.forEachArchivedVersion { version in
            batch.append(version)
            if batch.count == 500 { try target.restore(batch); summary.versions += batch.count; batch = [] }
        }
        try target.restore(batch)
        summary.versions += batch.count
        for table in ArchivedTable.allCases {
            let rows = try source.archivedRows(table)
            try target.restore(rows, into: table)
            summary.rows += rows.count
        }
        try verify()
        return summary
    }

    /// The target must hold nothing: a copy never merges two stores.
    func refuseUnlessEmpty() throws {
        let versions = try target.knowledgeVector().first?.clock ?? 0
        let devices = try target.devices(patientID: nil).count
        let outbox = try target.outboxCounts()
        guard versions == 0 && devices == 0 && outbox.queued + outbox.pushed + outbox.failed == 0 else {
            throw StoreError.database(path: "\(target)", message: "the store to copy into is not empty (\(versions) versions, \(devices) devices); copy into a new one")
        }
    }

    /// Both stores read back the same: every version's uuid, patient, stamp and CareKit JSON
    /// (successors included) in writing order, and every row of the gateway's tables.
    func verify() throws {
        let (a, b) = (try fingerprints(source), try fingerprints(target))
        for (n, (x, y)) in zip(a, b).enumerated() where x != y {
            throw StoreError.database(path: "\(target)", message: "version \(n + 1) of the copy differs: \(x.uuid) \(x.patientID ?? "-") against \(y.uuid) \(y.patientID ?? "-")")
        }
        guard a.count == b.count else { throw StoreError.database(path: "\(target)", message: "the copy holds \(b.count) versions, the source \(a.count)") }
        // And as a CareKit app reads them: every version with its successors, kind by kind.
        func record(_ store: any StoreArchive) throws -> [UInt8] { RevisionRecord(entities: try store.allEntities(versions: .history), knowledgeVector: []).bytes() }
        guard try record(source) == record(target) else {
            throw StoreError.database(path: "\(target)", message: "the copy's versions, read back with their successors, differ from the source's")
        }
        for table in ArchivedTable.allCases where try source.archivedRows(table) != target.archivedRows(table) {
            throw StoreError.database(path: "\(target)", message: "the copy's \(table.rawValue) rows differ from the source's")
        }
    }

    struct Fingerprint: Equatable { var uuid: UUID; var patientID: String?; var stamp: String?; var json: [UInt8] }

    func fingerprints(_ store: any StoreArchive) throws -> [Fingerprint] {
        var result: [Fingerprint] = []
        try store.forEachArchivedVersion { v in
            result.append(Fingerprint(uuid: v.entity.version.uuid, patientID: v.patientID, stamp: v.stamp, json: CareKitJSON.bytes(v.entity, version: .v4)))
        }
        return result
    }
}
