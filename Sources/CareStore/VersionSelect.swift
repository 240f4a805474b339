import Foundation

/// The SQL of an entity query on one kind, for either backend: the conditions of `EntityQuery`
/// written once, the dialects differing only in how a parameter, a list and "is the same, or
/// both null" are written. Selects `uuid, kind, next_uuids, patient_id` (then `json` when asked)
/// from `entity_version v`, outcomes in event order, the rest by id, patient and effective date.
public struct VersionSelect: Sendable {
    /// How a backend writes parameters and lists.
    public enum Dialect: Sendable {
        /// `?` parameters, `IN (?, ?)` lists.
        case sqlite
        /// `$n` parameters, `= ANY($n)` with an array.
        case postgres
    }

    /// A parameter's value, bound by each backend its own way.
    public enum Value: Sendable, Equatable {
        /// A text parameter.
        case text(String)
        /// A number parameter.
        case double(Double)
        /// A uuid parameter.
        case uuid(UUID)
        /// A list of texts.
        case texts([String])
        /// A list of uuids.
        case uuids([UUID])
    }

    /// The statement.
    public private(set) var sql = ""
    /// Its parameters, in order.
    public private(set) var arguments: [Value] = []
    let dialect: Dialect

    /// The select for versions of `kind` that `query` asks for; `withJSON` adds each version's
    /// CareKit JSON.
    public init(kind: String, _ query: EntityQuery, includeTombstones: Bool = false, withJSON: Bool = false, dialect: Dialect) {
        self.dialect = dialect
        // Versions asked for by uuid are found through the uuid's unique index: SQLite, which
        // keeps no statistics here, otherwise takes the index on kind once a list holds eight
        // uuids or more and reads every version of the kind (a push among a million outcomes
        // read them all for ten). `+` keeps the kind's term off every index.
        let byUUID = query.uuids != nil && dialect == .sqlite
        var conditions = ["\(byUUID ? "+" : "")v.kind = \(kindLiteral(kind))"]
        switch query.versions {
        case .latest:
            conditions.append("v.next_uuids IS NULL AND v.deleted_date IS NULL")
        case .inEffect(let interval):
            if !includeTombstones { conditions.append("v.deleted_date IS NULL") }
            if kind == "outcome" {
                conditions.append("v.next_uuids IS NULL AND v.event_start >= \(parameter(.double(interval.start.timeIntervalSinceReferenceDate)))"
                                  + " AND v.event_start < \(parameter(.double(interval.end.timeIntervalSinceReferenceDate)))")
            } else {
                conditions.append("v.effective_date < \(parameter(.double(interval.end.timeIntervalSinceReferenceDate)))"
                                  + " AND (v.superseded_date IS NULL OR v.superseded_date > \(parameter(.double(interval.start.timeIntervalSinceReferenceDate))))")
            }
        case .history:
            break
        }
        if let ids = query.ids { conditions.append(list("v.id", texts: ids)) }
        if let uuids = query.uuids { conditions.append(list("v.uuid", uuids: uuids)) }
        if let remoteIDs = query.remoteIDs { conditions.append(list("v.remote_id", texts: remoteIDs)) }
        if query.gatewayWrittenOnly { conditions.append("v.stamp IS NULL") }
        if let groups = query.groupIdentifiers { conditions.append(list("v.group_identifier", texts: groups)) }
        if let tags = query.tags { conditions.append("v.uuid IN (SELECT uuid FROM entity_tag WHERE \(list("tag", texts: tags)))") }
        // A version's patient is its parent's, so children of the patient's parents are the patient's.
        if let ids = query.patientIDs { conditions.append(list("v.patient_id", texts: ids)) }
        if let ids = query.carePlanIDs, kind == "task" || kind == "contact" { conditions.append(parent("carePlan", ids)) }
        if let ids = query.taskIDs, kind == "outcome" { conditions.append(parent("task", ids)) }
        sql = "SELECT v.uuid, v.kind, v.next_uuids, v.patient_id\(withJSON ? ", v.json" : "") FROM entity_version v WHERE "
            + conditions.joined(separator: " AND ")
        // Ties go to the order of writing: SQLite's revision numbers the whole store, PostgreSQL's
        // each patient (its `seq` numbers the store).
        // Texts in byte order, and what is missing (no patient, a tombstone's event) first, as
        // SQLite sorts them, whatever the database's collation.
        let (written, id, patient, event) = dialect == .sqlite ? ("v.revision", "v.id", "v.patient_id", "v.event_start")
            : ("v.seq", "v.id COLLATE \"C\"", "v.patient_id COLLATE \"C\" NULLS FIRST", "v.event_start NULLS FIRST")
        sql += kind == "outcome" ? " ORDER BY \(event), \(written)" : " ORDER BY \(id), \(patient), v.effective_date, \(written)"
        if let limit = query.limit { sql += " LIMIT \(max(0, limit))" }
    }

    /// A kind as the statement compares it: a word (every kind the store has) written into the
    /// SQL, anything else bound. SQLite compares a bound kind with the constant of the partial
    /// index `live_outcome_per_occurrence` (`kind = 'outcome'`) and prepares the statement
    /// again each time another kind is bound to it; written in, each kind keeps its statement.
    mutating func kindLiteral(_ kind: String) -> String {
        Self.literal(kind) ?? parameter(.text(kind))
    }

    /// `text` as a quoted SQL literal when it is a word (ASCII letters only, so safe to write into
    /// a statement), or nil when it must be bound. Every query that compares a kind uses this.
    public static func literal(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.allSatisfy({ (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }) else { return nil }
        return "'\(text)'"
    }

    mutating func parameter(_ value: Value) -> String {
        arguments.append(value)
        return dialect == .sqlite ? "?" : "$\(arguments.count)"
    }

    mutating func list(_ column: String, texts: [String]) -> String {
        switch dialect {
        case .sqlite: "\(column) IN (\(texts.map { parameter(.text($0)) }.joined(separator: ",")))"
        case .postgres: "\(column) = ANY(\(parameter(.texts(texts))))"
        }
    }

    mutating func list(_ column: String, uuids: [UUID]) -> String {
        switch dialect {
        case .sqlite: "\(column) IN (\(uuids.map { parameter(.uuid($0)) }.joined(separator: ",")))"
        case .postgres: "\(column) = ANY(\(parameter(.uuids(uuids))))"
        }
    }

    mutating func parent(_ kind: String, _ ids: [String]) -> String {
        "v.parent_uuid IN (SELECT uuid FROM entity_version WHERE kind = '\(kind)' AND \(list("id", texts: ids)))"
    }
}
