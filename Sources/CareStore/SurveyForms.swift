import Foundation
import GRDB

/// A form a patient's survey tasks ask, kept beside the care plan: one row per patient, url and
/// content, so a new version of the form is a new row and what was answered to the old one
/// still finds it. The resource is kept as the gateway read it (FHIR JSON); the store knows
/// nothing of FHIR.
public struct StoredQuestionnaire: Sendable, Hashable {
    /// The patient whose tasks ask it.
    public var patientID: String
    /// The form's canonical url.
    public var url: String
    /// Its business version, when it has one.
    public var version: String?
    /// The content hash of the resource, as the task's `userInfo` names it.
    public var digest: String
    /// The form's title.
    public var title: String?
    /// The resource, compact FHIR JSON.
    public var resource: [UInt8]
    /// When the store first kept this content.
    public var storedAt: Date

    /// A form to keep for a patient.
    public init(patientID: String, url: String, version: String?, digest: String, title: String?, resource: [UInt8], storedAt: Date) {
        self.patientID = patientID
        self.url = url
        self.version = version
        self.digest = digest
        self.title = title
        self.resource = resource
        self.storedAt = storedAt
    }
}

/// Reads the forms a patient's survey tasks ask.
public protocol QuestionnaireReader {
    /// The patient's forms with this url (of `version` only, when given), newest first; another
    /// patient's are never among them.
    func questionnaires(of patientID: String, url: String, version: String?) throws(StoreError) -> [StoredQuestionnaire]
}

/// Keeps the forms a patient's survey tasks ask.
public protocol QuestionnaireWriter {
    /// Keeps each form; one the patient has already (same url and content) is left as it was.
    func keep(_ questionnaires: [StoredQuestionnaire]) throws(StoreError)
}

extension SQLiteCarePlanStore {
    static func registerQuestionnaires(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("v11-questionnaire") { db in
            try db.execute(sql: """
                CREATE TABLE questionnaire (
                    stored_at REAL NOT NULL,
                    patient_id TEXT NOT NULL,
                    url TEXT NOT NULL,
                    version TEXT,
                    digest TEXT NOT NULL,
                    title TEXT,
                    resource BLOB NOT NULL,
                    PRIMARY KEY (patient_id, url, digest)
                ) WITHOUT ROWID;
                """)
        }
    }

    static func questionnaires(of patientID: String, url: String, version: String?, db: Database) throws -> [StoredQuestionnaire] {
        var sql = "SELECT * FROM questionnaire WHERE patient_id = ? AND url = ?"
        var arguments: StatementArguments = [patientID, url]
        if let version {
            sql += " AND version = ?"
            arguments += [version]
        }
        return try Row.fetchAll(db, sql: sql + " ORDER BY stored_at DESC, digest", arguments: arguments).map { row in
            let resource: Data = row["resource"]
            return StoredQuestionnaire(patientID: row["patient_id"], url: row["url"], version: row["version"], digest: row["digest"], title: row["title"],
                                       resource: [UInt8](resource), storedAt: Date(timeIntervalSinceReferenceDate: row["stored_at"]))
        }
    }

    static func keep(_ questionnaires: [StoredQuestionnaire], db: Database) throws {
        for form in questionnaires {
            try db.execute(sql: """
                INSERT INTO questionnaire (stored_at, patient_id, url, version, digest, title, resource) VALUES (?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (patient_id, url, digest) DO NOTHING
                """, arguments: [form.storedAt.timeIntervalSinceReferenceDate, form.patientID, form.url, form.version, form.digest, form.title, Data(form.resource)])
        }
    }
}
