import CareStore
import Foundation
import PostgresNIO

/// The refresh schedule on PostgreSQL: a claim takes the longest-due row with `FOR UPDATE SKIP
/// LOCKED`, so instances claiming at once take different patients.
extension PostgresCarePlanStore: RefreshSchedule {
    public func scheduleRefreshes(_ patients: [EnrolledPatient], now: Date) throws(StoreError) -> Int {
        var given: [String: String] = [:]
        for patient in patients where given[patient.storeID] == nil { given[patient.storeID] = patient.ehrID }
        let ids = Array(given.keys), ehrIDs = ids.map { given[$0]! }
        return try transaction { session in
            try session.run("""
                DELETE FROM refresh_schedule WHERE (patient_id, ehr_id) NOT IN (SELECT * FROM unnest(\(ids)::text[], \(ehrIDs)::text[]))
                """)
            return try session.run("""
                INSERT INTO refresh_schedule (patient_id, ehr_id, next_at)
                SELECT p, e, \(now.storeSeconds) FROM unnest(\(ids)::text[], \(ehrIDs)::text[]) AS given(p, e)
                ON CONFLICT (patient_id) DO NOTHING
                """)
        }
    }

    public func claimRefresh(worker: String, lease: TimeInterval, now: Date) throws(StoreError) -> RefreshClaim? {
        let at = now.storeSeconds
        return try session { session in
            try session.query("""
                UPDATE refresh_schedule SET claimed_by = \(worker), claimed_at = \(at), lease_until = \(at + lease)
                WHERE patient_id = (
                    SELECT patient_id FROM refresh_schedule WHERE next_at <= \(at) AND (lease_until IS NULL OR lease_until <= \(at))
                    ORDER BY next_at, patient_id LIMIT 1 FOR UPDATE SKIP LOCKED)
                RETURNING patient_id, ehr_id, \(unescaped: RefreshClaim.sinceSQL)
                """).first.map { row in
                let (patient, ehrID, since) = try row.decode((String, String, Double?).self)
                return RefreshClaim(patient: EnrolledPatient(storeID: patient, ehrID: ehrID), since: Date(storeSeconds: since), claimedAt: now)
            }
        }
    }

    public func finishRefresh(_ claim: RefreshClaim, worker: String, next: Date, succeeded: Bool) throws(StoreError) {
        let claimed = claim.claimedAt.storeSeconds
        try session { session in
            try session.run("""
                UPDATE refresh_schedule SET
                    next_at = CASE WHEN requested_at > claimed_at THEN requested_at ELSE \(next.storeSeconds) END,
                    last_success = CASE WHEN \(succeeded) THEN \(claimed) ELSE last_success END,
                    claimed_by = NULL, claimed_at = NULL, lease_until = NULL
                WHERE patient_id = \(claim.patient.storeID) AND claimed_by = \(worker) AND claimed_at = \(claimed)
                """)
        }
    }

    public func requestRefresh(ehrIDs: Set<String>?, now: Date) throws(StoreError) -> Int {
        let at = now.storeSeconds
        return try session { session in
            if let ehrIDs {
                return try session.run("""
                    UPDATE refresh_schedule SET requested_at = \(at), next_at = least(next_at, \(at)) WHERE ehr_id = ANY(\(Array(ehrIDs)))
                    """)
            }
            return try session.run("UPDATE refresh_schedule SET requested_at = \(at), next_at = least(next_at, \(at))")
        }
    }

    public func nextRefreshDue() throws(StoreError) -> Date? {
        try session { session in
            try session.query("SELECT min(greatest(next_at, lease_until)) FROM refresh_schedule").first.flatMap { row in
                Date(storeSeconds: try row.decode(Double?.self))
            }
        }
    }
}
