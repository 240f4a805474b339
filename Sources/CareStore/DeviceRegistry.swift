import Foundation
import GRDB

/// A patient's device enrolled for CareKit sync. The gateway keeps only a hash of its token.
public struct Device: Sendable, Hashable {
    /// A short public id (what `caregate devices` lists and revokes).
    public var id: String
    /// The patient whose data the device may sync, and nothing else.
    public var patientID: String
    /// SHA-256 of the device's token, hex.
    public var tokenHash: String
    /// When the device exchanged its enrollment code.
    public var enrolledAt: Date
    /// When an operator revoked it: its token stops working from then.
    public var revokedAt: Date?
    /// When it last synced (written in the background, within seconds).
    public var lastSyncAt: Date?
    /// The name the device gave itself when it enrolled ("Maria's iPhone"): what the EHR is told
    /// recorded the patient's outcomes (a contained `Device.deviceName`). Said by the device, so
    /// only ever shown as its words, never used to find anything.
    public var name: String?
    /// The app it enrolled from ("Heart Failure Companion 2.3"), said by the device too.
    public var app: String?

    /// A device as the registry keeps it (its token only as a hash).
    public init(id: String, patientID: String, tokenHash: String, enrolledAt: Date, revokedAt: Date? = nil, lastSyncAt: Date? = nil,
                name: String? = nil, app: String? = nil) {
        self.id = id
        self.patientID = patientID
        self.tokenHash = tokenHash
        self.enrolledAt = enrolledAt
        self.revokedAt = revokedAt
        self.lastSyncAt = lastSyncAt
        self.name = name
        self.app = app
    }

    /// The `source` the gateway gives the outcome versions a device pushes: the device's id
    /// (`GatewayOwnedFields` drops whatever source a device sends, so only the gateway writes it).
    public var versionSource: String { Device.versionSourcePrefix + id }
    /// `caregate-device:`.
    public static let versionSourcePrefix = "caregate-device:"

    /// The id of the device that pushed a version, read from its `source`.
    public static func id(fromVersionSource source: String?) -> String? {
        guard let source, source.hasPrefix(versionSourcePrefix) else { return nil }
        return String(source.dropFirst(versionSourcePrefix.count))
    }
}

/// One-time enrollment codes and the devices they enrolled, kept beside the store's versions.
/// Codes and tokens are stored only as hashes: a copy of the database enrolls no one.
public protocol DeviceRegistry: Sendable {
    /// Keeps a code's hash for a patient until `expires`.
    func addEnrollment(codeHash: String, patientID: String, expires: Date) throws(StoreError)
    /// Uses a code once: when it is known and not expired at `now`, it is deleted and `device`
    /// (bound to the code's patient) is stored and returned; otherwise nil. Expired codes go too.
    func redeemEnrollment(codeHash: String, device: Device, now: Date) throws(StoreError) -> Device?
    /// The device holding a token, revoked or not.
    func device(tokenHash: String) throws(StoreError) -> Device?
    /// The device holding a token and, when the store can tell in the same read that the
    /// device already knows all its patient's knowledge (`since` covers it), the empty answer
    /// to its pull: an up-to-date device's sync call (the common case) in one trip to the store.
    /// Nil `upToDate`: the pull reads its versions itself.
    func device(tokenHash: String, since: KnowledgeVector) throws(StoreError) -> (device: Device, upToDate: PatientVersions?)?
    /// Devices, of one patient or all, in enrollment order.
    func devices(patientID: String?) throws(StoreError) -> [Device]
    /// The device with this public id (what an operator names), revoked or not.
    func device(id: String) throws(StoreError) -> Device?
    /// Revokes a device; false when there is no such device.
    func revokeDevice(id: String, at date: Date) throws(StoreError) -> Bool
    /// Writes devices' last sync times, in one transaction.
    func recordSyncs(_ times: [String: Date]) throws(StoreError)
}

extension SQLiteCarePlanStore: DeviceRegistry {
    static func registerDevices(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v4-devices") { db in
            try db.execute(sql: """
                CREATE TABLE enrollment_code (code_hash TEXT PRIMARY KEY NOT NULL, patient_id TEXT NOT NULL, expires REAL NOT NULL) WITHOUT ROWID;
                CREATE TABLE device (
                    id TEXT PRIMARY KEY NOT NULL,
                    patient_id TEXT NOT NULL,
                    token_hash TEXT NOT NULL UNIQUE,
                    enrolled_at REAL NOT NULL,
                    revoked_at REAL,
                    last_sync_at REAL
                );
                CREATE INDEX device_patient ON device(patient_id);
                """)
        }
        // What a device calls itself and its app, as it enrolled.
        migrator.registerMigration("v15-device-names") { db in
            try db.execute(sql: "ALTER TABLE device ADD COLUMN name TEXT; ALTER TABLE device ADD COLUMN app TEXT;")
        }
    }

    public func addEnrollment(codeHash: String, patientID: String, expires: Date) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: "INSERT OR REPLACE INTO enrollment_code (code_hash, patient_id, expires) VALUES (?, ?, ?)",
                           arguments: [codeHash, patientID, expires.timeIntervalSinceReferenceDate])
        }
    }

    public func redeemEnrollment(codeHash: String, device: Device, now: Date) throws(StoreError) -> Device? {
        try writeDatabase { db in
            try db.execute(sql: "DELETE FROM enrollment_code WHERE expires <= ?", arguments: [now.timeIntervalSinceReferenceDate])
            guard let patientID = try String.fetchOne(db, sql: "SELECT patient_id FROM enrollment_code WHERE code_hash = ?", arguments: [codeHash]) else {
                return nil
            }
            try db.execute(sql: "DELETE FROM enrollment_code WHERE code_hash = ?", arguments: [codeHash])
            var enrolled = device
            enrolled.patientID = patientID
            try db.execute(sql: "INSERT INTO device (id, patient_id, token_hash, enrolled_at, name, app) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: [enrolled.id, patientID, enrolled.tokenHash, enrolled.enrolledAt.timeIntervalSinceReferenceDate, enrolled.name, enrolled.app])
            return enrolled
        }
    }

    public func device(tokenHash: String) throws(StoreError) -> Device? {
        try readDatabase { db in try Self.device(tokenHash: tokenHash, db: db) }
    }

    public func device(id: String) throws(StoreError) -> Device? {
        try readDatabase { db in try Row.fetchOne(db, sql: "SELECT * FROM device WHERE id = ?", arguments: [id]).map(Self.device) }
    }

    /// The device holding a token, read on `db`. Every sync call asks this: the statement is kept prepared.
    static func device(tokenHash: String, db: Database) throws -> Device? {
        try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM device WHERE token_hash = ?"), arguments: [tokenHash]).map(Self.device)
    }

    /// The device and, when its patient's knowledge is covered by `since`, the empty answer,
    /// read together: an up-to-date device's call holds nothing further (no call slot).
    public func device(tokenHash: String, since: KnowledgeVector) throws(StoreError) -> (device: Device, upToDate: PatientVersions?)? {
        try readDatabase { db in
            guard let device = try Self.device(tokenHash: tokenHash, db: db) else { return nil }
            return (device, try knowledgeAnswer(device.patientID, since: since, upTo: nil, db: db).upToDate)
        }
    }

    /// Whether the device is enrolled for the patient and not revoked, read on `db` (a push's own transaction).
    static func isEnrolled(deviceID: String, patientID: String, db: Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT 1 FROM device WHERE id = ? AND patient_id = ? AND revoked_at IS NULL"),
                          arguments: [deviceID, patientID]) ?? false
    }

    public func devices(patientID: String?) throws(StoreError) -> [Device] {
        try readDatabase { db in
            let rows = if let patientID {
                try Row.fetchAll(db, sql: "SELECT * FROM device WHERE patient_id = ? ORDER BY enrolled_at, id", arguments: [patientID])
            } else {
                try Row.fetchAll(db, sql: "SELECT * FROM device ORDER BY enrolled_at, id")
            }
            return rows.map(Self.device)
        }
    }

    public func revokeDevice(id: String, at date: Date) throws(StoreError) -> Bool {
        try writeDatabase { db in
            try db.execute(sql: "UPDATE device SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?", arguments: [date.timeIntervalSinceReferenceDate, id])
            return db.changesCount > 0
        }
    }

    public func recordSyncs(_ times: [String: Date]) throws(StoreError) {
        try writeDatabase { db in
            let statement = try db.cachedStatement(sql: "UPDATE device SET last_sync_at = ? WHERE id = ?")
            for (deviceID, date) in times { try statement.execute(arguments: [date.timeIntervalSinceReferenceDate, deviceID]) }
        }
    }

    static func device(_ row: Row) -> Device {
        func date(_ column: String) -> Date? { (row[column] as Double?).map(Date.init(timeIntervalSinceReferenceDate:)) }
        return Device(id: row["id"], patientID: row["patient_id"], tokenHash: row["token_hash"], enrolledAt: date("enrolled_at") ?? .distantPast,
                      revokedAt: date("revoked_at"), lastSyncAt: date("last_sync_at"), name: row["name"], app: row["app"])
    }
}
