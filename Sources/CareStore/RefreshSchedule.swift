import Foundation
import GRDB

/// A patient whose devices sync with the gateway, refreshed from the EHR: the store's id and
/// the EHR's id for them.
public struct EnrolledPatient: Sendable, Hashable {
    /// The store patient's id (`Patient/maria-lopez`), as devices are enrolled with.
    public var storeID: String
    /// The patient's id on the EHR (`maria-lopez`), from the resource the patient was imported from.
    public var ehrID: String

    /// A patient known by both ids.
    public init(storeID: String, ehrID: String) {
        self.storeID = storeID
        self.ehrID = ehrID
    }
}

/// A patient's refresh as a worker claimed it.
public struct RefreshClaim: Sendable, Hashable {
    /// The patient to refresh.
    public var patient: EnrolledPatient
    /// When the patient's last successful refresh began: the EHR is asked what changed since
    /// then. Nil when there was none, or when a notification came since (the patient is pulled whole).
    public var since: Date?
    /// When it was claimed (its `now`).
    public var claimedAt: Date

    /// A claim as the schedule hands it out.
    public init(patient: EnrolledPatient, since: Date?, claimedAt: Date) {
        self.patient = patient
        self.since = since
        self.claimedAt = claimedAt
    }

    /// A claim's `since` as every backend's `refresh_schedule` works it out: the last success's
    /// start, unless a notification came at or after it.
    public static let sinceSQL = "CASE WHEN last_success IS NULL OR requested_at >= last_success THEN NULL ELSE last_success END"
}

/// Each enrolled patient's next refresh from the EHR, kept in the store so that several
/// gateways over one store share the patients: a patient is claimed by one worker at a time,
/// under a lease, so no two refresh it at once and a dead worker's patient comes back when its
/// lease ends. A notification makes its patients due at once on every instance; one claims each.
public protocol RefreshSchedule: Sendable {
    /// Makes the schedule these patients: those not on it are added, due at `now`; those on it
    /// and not given (no device left) are taken off. Returns how many were added.
    @discardableResult
    func scheduleRefreshes(_ patients: [EnrolledPatient], now: Date) throws(StoreError) -> Int
    /// Claims the patient due longest (due at or before `now`, no lease running) for `worker`
    /// until `now + lease`; nil when none is due.
    func claimRefresh(worker: String, lease: TimeInterval, now: Date) throws(StoreError) -> RefreshClaim?
    /// Ends `worker`'s claim: the patient is next due at `next` (sooner when a notification came
    /// during the claim: at once, and pulled whole), and, when the refresh succeeded, changes
    /// are next looked for from the claim's time. A claim another worker took over after its
    /// lease ended is left alone.
    func finishRefresh(_ claim: RefreshClaim, worker: String, next: Date, succeeded: Bool) throws(StoreError)
    /// A notification: these EHR patients (every scheduled one when nil) are due at `now` and
    /// pulled whole whatever the EHR says changed. Returns how many scheduled patients it named.
    @discardableResult
    func requestRefresh(ehrIDs: Set<String>?, now: Date) throws(StoreError) -> Int
    /// When the next refresh falls due (a claimed patient's lease end counts as its due time);
    /// nil when nobody is scheduled.
    func nextRefreshDue() throws(StoreError) -> Date?
}

extension SQLiteCarePlanStore: RefreshSchedule {
    static func registerRefreshSchedule(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v10-refresh-schedule") { db in
            try db.execute(sql: """
                CREATE TABLE refresh_schedule (
                    patient_id TEXT PRIMARY KEY NOT NULL,
                    ehr_id TEXT NOT NULL,
                    next_at REAL NOT NULL,
                    last_success REAL,
                    requested_at REAL,
                    claimed_by TEXT,
                    claimed_at REAL,
                    lease_until REAL
                );
                CREATE INDEX refresh_schedule_ehr ON refresh_schedule(ehr_id);
                CREATE INDEX refresh_schedule_due ON refresh_schedule(next_at);
                """)
        }
    }

    public func scheduleRefreshes(_ patients: [EnrolledPatient], now: Date) throws(StoreError) -> Int {
        try writeDatabase { db in
            let given = Dictionary(patients.map { ($0.storeID, $0.ehrID) }, uniquingKeysWith: { first, _ in first })
            let have = try Dictionary(uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT patient_id, ehr_id FROM refresh_schedule").map {
                (($0[0] as String), ($0[1] as String))
            })
            for (patient, ehrID) in have where given[patient] != ehrID {
                try db.execute(sql: "DELETE FROM refresh_schedule WHERE patient_id = ?", arguments: [patient])
            }
            var added = 0
            for (patient, ehrID) in given where have[patient] != ehrID {
                try db.execute(sql: "INSERT INTO refresh_schedule (patient_id, ehr_id, next_at) VALUES (?, ?, ?)",
                               arguments: [patient, ehrID, now.timeIntervalSinceReferenceDate])
                added += 1
            }
            return added
        }
    }

    public func claimRefresh(worker: String, lease: TimeInterval, now: Date) throws(StoreError) -> RefreshClaim? {
        try writeDatabase { db in
            let at = now.timeIntervalSinceReferenceDate
            guard let row = try Row.fetchOne(db, sql: """
                SELECT patient_id, ehr_id, \(RefreshClaim.sinceSQL)
                FROM refresh_schedule WHERE next_at <= ? AND (lease_until IS NULL OR lease_until <= ?) ORDER BY next_at, patient_id LIMIT 1
                """, arguments: [at, at]) else { return nil }
            let patient = EnrolledPatient(storeID: row[0], ehrID: row[1])
            try db.execute(sql: "UPDATE refresh_schedule SET claimed_by = ?, claimed_at = ?, lease_until = ? WHERE patient_id = ?",
                           arguments: [worker, at, at + lease, patient.storeID])
            return RefreshClaim(patient: patient, since: (row[2] as Double?).map(Date.init(timeIntervalSinceReferenceDate:)), claimedAt: now)
        }
    }

    public func finishRefresh(_ claim: RefreshClaim, worker: String, next: Date, succeeded: Bool) throws(StoreError) {
        try writeDatabase { db in
            try db.execute(sql: Self.finishSQL, arguments: [next.timeIntervalSinceReferenceDate, succeeded, claim.claimedAt.timeIntervalSinceReferenceDate,
                                                            claim.patient.storeID, worker, claim.claimedAt.timeIntervalSinceReferenceDate])
        }
    }

    /// A notification after the claim began (`requested_at > claimed_at`) keeps the patient due.
    static let finishSQL = """
        UPDATE refresh_schedule SET
            next_at = CASE WHEN requested_at > claimed_at THEN requested_at ELSE ?1 END,
            last_success = CASE WHEN ?2 THEN ?3 ELSE last_success END,
            claimed_by = NULL, claimed_at = NULL, lease_until = NULL
        WHERE patient_id = ?4 AND claimed_by = ?5 AND claimed_at = ?6
        """

    public func requestRefresh(ehrIDs: Set<String>?, now: Date) throws(StoreError) -> Int {
        try writeDatabase { db in
            let at = now.timeIntervalSinceReferenceDate
            guard let ehrIDs else {
                try db.execute(sql: "UPDATE refresh_schedule SET requested_at = ?, next_at = MIN(next_at, ?)", arguments: [at, at])
                return db.changesCount
            }
            var named = 0
            for id in ehrIDs {
                try db.execute(sql: "UPDATE refresh_schedule SET requested_at = ?, next_at = MIN(next_at, ?) WHERE ehr_id = ?", arguments: [at, at, id])
                named += db.changesCount
            }
            return named
        }
    }

    public func nextRefreshDue() throws(StoreError) -> Date? {
        try readDatabase { db in
            try Double.fetchOne(db, sql: "SELECT MIN(MAX(next_at, COALESCE(lease_until, next_at))) FROM refresh_schedule")
                .map(Date.init(timeIntervalSinceReferenceDate:))
        }
    }
}
