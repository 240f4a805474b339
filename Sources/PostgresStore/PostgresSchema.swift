import CareStore
import Foundation
import PostgresNIO

/// The store's schema on PostgreSQL: numbered migrations, each applied once, in order, at open.
/// Several gateways starting together migrate once: the migrations run in one transaction that
/// first takes a transaction-scoped advisory lock, so the others wait, then find them applied.
/// Times are `double precision` seconds since 2001-01-01 (Foundation's reference date, as the
/// SQLite store keeps them), uuids PostgreSQL's 16-byte `uuid`.
public enum PostgresSchema {
    /// A migration's statements run one by one (the driver's extended protocol takes one
    /// statement at a time), all in the migrating transaction.
    struct Migration: Sendable {
        let name: String
        let sql: String

        var statements: [String] {
            sql.components(separatedBy: ";\n").map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }.filter { !$0.isEmpty }
        }
    }

    /// The advisory lock key the migrations take (any fixed number; "CGmigrat" in ASCII).
    static let lockKey: Int64 = 0x4347_6d69_6772_6174
    /// The first half of the two-key advisory locks a client's attempt reservations take (the
    /// second is the client's hash).
    static let attemptLockSpace: Int32 = 0x4347_6174
    /// The advisory lock every audit append takes: one chain in one order across instances.
    static let auditLockKey: Int64 = 0x4347_6175_6469_7400

    static let migrations: [Migration] = [
        Migration(name: "v1-gateway-tables", sql: """
            CREATE TABLE store_meta (key text PRIMARY KEY, value text NOT NULL);
            CREATE TABLE enrollment_code (code_hash text PRIMARY KEY, patient_id text NOT NULL, expires double precision NOT NULL);
            CREATE TABLE device (
                id text PRIMARY KEY,
                patient_id text NOT NULL,
                token_hash text NOT NULL UNIQUE,
                enrolled_at double precision NOT NULL,
                revoked_at double precision,
                last_sync_at double precision
            );
            CREATE INDEX device_patient ON device (patient_id);
            CREATE TABLE import_run (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                started_at double precision NOT NULL,
                source text NOT NULL,
                counts text NOT NULL,
                report bytea NOT NULL
            );
            CREATE TABLE bulk_fetch (
                source text PRIMARY KEY,
                status_url text NOT NULL,
                started_at double precision NOT NULL,
                manifest bytea,
                downloaded text NOT NULL
            );
            CREATE TABLE bulk_since (source text PRIMARY KEY, transaction_time text NOT NULL);
            CREATE TABLE push_outbox (
                version_uuid uuid PRIMARY KEY,
                seq bigint GENERATED ALWAYS AS IDENTITY,
                entity_id text NOT NULL,
                idempotency_key text NOT NULL,
                payload bytea NOT NULL,
                state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'pushed', 'failed')),
                attempts integer NOT NULL DEFAULT 0,
                last_error text,
                remote_location text,
                queued_at double precision NOT NULL,
                finished_at double precision,
                claimed_by text,
                lease_until double precision
            );
            CREATE INDEX push_outbox_queued ON push_outbox (queued_at, seq) WHERE state = 'queued';
            CREATE INDEX push_outbox_finished ON push_outbox (state, (COALESCE(finished_at, queued_at)) DESC, seq DESC);
            CREATE INDEX push_outbox_entity ON push_outbox (entity_id) WHERE state = 'pushed'
            """),
        Migration(name: "v2-access-ledger", sql: """
            CREATE TABLE access_attempt (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, client text NOT NULL, at double precision NOT NULL);
            CREATE INDEX access_attempt_client ON access_attempt (client, at);
            CREATE INDEX access_attempt_at ON access_attempt (at);
            CREATE TABLE dashboard_session (id_hash text PRIMARY KEY, csrf text NOT NULL, last_used double precision NOT NULL)
            """),
        // The care-plan versions. `revision` is the version's number on its patient's clock
        // (`patient_clock`, '' for versions of no patient), taken under the clock row's lock
        // until commit, so a patient's numbers follow the order in which its writes commit;
        // `seq` orders the whole store.
        Migration(name: "v3-entity-versions", sql: """
            CREATE TABLE entity_version (
                seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                uuid uuid NOT NULL UNIQUE,
                kind text NOT NULL,
                id text NOT NULL,
                patient_id text,
                revision bigint NOT NULL,
                effective_date double precision NOT NULL,
                deleted_date double precision,
                next_uuids uuid[],
                superseded_date double precision,
                remote_id text,
                group_identifier text,
                parent_uuid uuid,
                occurrence integer,
                event_start double precision,
                stamp text,
                json bytea NOT NULL
            );
            CREATE INDEX entity_version_identity ON entity_version (kind, id, patient_id, effective_date);
            CREATE INDEX entity_version_parent ON entity_version (parent_uuid, event_start) WHERE parent_uuid IS NOT NULL;
            CREATE INDEX entity_version_remote ON entity_version (kind, remote_id) WHERE remote_id IS NOT NULL;
            CREATE INDEX entity_version_group ON entity_version (kind, group_identifier) WHERE group_identifier IS NOT NULL;
            CREATE UNIQUE INDEX live_outcome_per_occurrence ON entity_version (parent_uuid, occurrence)
                WHERE kind = 'outcome' AND next_uuids IS NULL AND deleted_date IS NULL;
            CREATE INDEX entity_version_patient ON entity_version (patient_id, revision);
            CREATE TABLE entity_tag (tag text NOT NULL, uuid uuid NOT NULL, PRIMARY KEY (tag, uuid));
            CREATE TABLE patient_clock (patient_id text PRIMARY KEY, clock bigint NOT NULL);
            CREATE TABLE sync_process (process uuid PRIMARY KEY, patient_id text NOT NULL);
            CREATE TABLE patient_knowledge (patient_id text PRIMARY KEY, vector text NOT NULL)
            """),
        // The patient's newest version the gateway wrote (not a device), kept on the clock row
        // as each is numbered: a patient's knowledge is read from its row instead of searched
        // for under the device versions above it (which a year of outcomes made milliseconds).
        Migration(name: "v4-gateway-revision", sql: """
            ALTER TABLE patient_clock ADD COLUMN gateway_revision bigint NOT NULL DEFAULT 0;
            UPDATE patient_clock c SET gateway_revision = COALESCE(
                (SELECT max(revision) FROM entity_version v WHERE v.patient_id IS NOT DISTINCT FROM NULLIF(c.patient_id, '') AND v.stamp IS NULL), 0)
            """),
        // Each enrolled patient's next refresh from the EHR, claimed per patient (`RefreshSchedule`).
        Migration(name: "v5-refresh-schedule", sql: """
            CREATE TABLE refresh_schedule (
                patient_id text PRIMARY KEY,
                ehr_id text NOT NULL,
                next_at double precision NOT NULL,
                last_success double precision,
                requested_at double precision,
                claimed_by text,
                claimed_at double precision,
                lease_until double precision
            );
            CREATE INDEX refresh_schedule_ehr ON refresh_schedule (ehr_id);
            CREATE INDEX refresh_schedule_due ON refresh_schedule (next_at)
            """),
        // A device's sync calls in flight, counted across instances (`AccessLedger.enterCall`).
        Migration(name: "v6-call-slots", sql: """
            CREATE TABLE call_slot (key text NOT NULL, slot integer NOT NULL, holder uuid NOT NULL, lease_until double precision NOT NULL,
                                    PRIMARY KEY (key, slot))
            """),
        // The forms survey tasks ask, per patient and content (`QuestionnaireReader`).
        Migration(name: "v7-questionnaire", sql: """
            CREATE TABLE questionnaire (
                stored_at double precision NOT NULL,
                patient_id text NOT NULL,
                url text NOT NULL,
                version text,
                digest text NOT NULL,
                title text,
                resource bytea NOT NULL,
                PRIMARY KEY (patient_id, url, digest)
            )
            """),
        // Every access to a patient's data, chained by hash (`AuditTrail`), and the last append.
        Migration(name: "v8-audit-trail", sql: """
            CREATE TABLE audit_entry (
                sequence bigint PRIMARY KEY,
                recorded double precision NOT NULL,
                actor_kind text NOT NULL,
                actor_id text NOT NULL,
                action text NOT NULL,
                event text NOT NULL,
                patient_id text,
                entities text NOT NULL,
                source text,
                outcome text NOT NULL,
                detail text,
                previous_hash text NOT NULL,
                hash text NOT NULL
            );
            CREATE INDEX audit_entry_patient ON audit_entry (patient_id, sequence);
            CREATE TABLE audit_head (one integer PRIMARY KEY CHECK (one = 1), sequence bigint NOT NULL, hash text NOT NULL);
            CREATE TABLE audit_anchor (one integer PRIMARY KEY CHECK (one = 1), sequence bigint NOT NULL, hash text NOT NULL)
            """),
        // An item whose payload is its only copy is queued again by a retry, not taken out.
        Migration(name: "v9-outbox-sole-copy", sql: """
            ALTER TABLE push_outbox ADD COLUMN sole_copy boolean NOT NULL DEFAULT false;
            UPDATE push_outbox SET sole_copy = true WHERE idempotency_key LIKE 'urn:caregate:audit|%'
            """),
        // Outcome versions noted as the store takes them (a statement trigger over the rows each
        // insert made), until a push settles them: a push cycle reads what is new. What a store
        // held before is pending once: its current outcome versions not queued yet.
        Migration(name: "v10-push-pending", sql: """
            CREATE TABLE push_pending (seq bigint GENERATED ALWAYS AS IDENTITY, version_uuid uuid PRIMARY KEY);
            CREATE INDEX push_pending_seq ON push_pending (seq);
            CREATE FUNCTION push_pending_note() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO push_pending (version_uuid) SELECT uuid FROM taken WHERE kind = 'outcome' ORDER BY seq ON CONFLICT DO NOTHING; RETURN NULL; END $$;
            CREATE TRIGGER push_pending_outcome AFTER INSERT ON entity_version REFERENCING NEW TABLE AS taken FOR EACH STATEMENT EXECUTE FUNCTION push_pending_note();
            INSERT INTO push_pending (version_uuid)
                SELECT uuid FROM entity_version v WHERE kind = 'outcome' AND next_uuids IS NULL
                AND NOT EXISTS (SELECT 1 FROM push_outbox o WHERE o.version_uuid = v.uuid) ORDER BY seq
            """),
        // What a device calls itself and its app, as it enrolled.
        Migration(name: "v11-device-names", sql: """
            ALTER TABLE device ADD COLUMN name text;
            ALTER TABLE device ADD COLUMN app text
            """),
    ]

    /// Applies the migrations this database has not had; returns the names applied (none when
    /// another instance got there first).
    @discardableResult
    public static func migrate(_ database: PostgresDatabase) throws -> [String] {
        try migrate(database, upTo: migrations.count)
    }

    /// The first `count` migrations only: a store as an earlier CareGate left it (upgrade tests).
    static func migrate(_ database: PostgresDatabase, upTo count: Int) throws -> [String] {
        try database.transaction { session in
            try session.query("SELECT pg_advisory_xact_lock(\(lockKey))")
            try session.execute("CREATE TABLE IF NOT EXISTS caregate_migration (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())")
            let done = Set(try session.query("SELECT name FROM caregate_migration").map { try $0.decode(String.self) })
            var applied: [String] = []
            for migration in migrations.prefix(count) where !done.contains(migration.name) {
                for statement in migration.statements {
                    do {
                        try session.execute(statement)
                    } catch let error as StoreError {
                        guard case .database(let path, let message) = error else { throw error }
                        throw StoreError.database(path: path, message: "migration \(migration.name): \(message)")
                    }
                }
                try session.query("INSERT INTO caregate_migration (name) VALUES (\(migration.name))")
                applied.append(migration.name)
            }
            return applied
        }
    }

    /// Whether the database holds a CareGate store (its migrations table): a command that only
    /// reads refuses a database without one rather than making one.
    public static func isPresent(_ database: PostgresDatabase) throws(StoreError) -> Bool {
        do {
            return try database.withSession { session in
                try session.query("SELECT to_regclass('caregate_migration') IS NOT NULL").first?.decode(Bool.self) ?? false
            }
        } catch {
            throw PostgresCarePlanStore.storeError(error, database)
        }
    }

    /// The migrations applied to this database, in the order they ran.
    public static func applied(_ database: PostgresDatabase) throws -> [String] {
        try database.withSession { session in
            // Those applied in one transaction share a time: in the order they are listed (names
            // sort `v10` before `v2`).
            let rows = try session.query("SELECT name, extract(epoch FROM applied_at)::float8 FROM caregate_migration").map { try $0.decode((String, Double).self) }
            let position = Dictionary(uniqueKeysWithValues: migrations.enumerated().map { ($1.name, $0) })
            return rows.sorted { ($0.1, position[$0.0] ?? Int.max, $0.0) < ($1.1, position[$1.0] ?? Int.max, $1.0) }.map(\.0)
        }
    }
}
