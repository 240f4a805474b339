import CareStore
import FHIRClient
import Foundation

/// Why a refresh failed, naming the patient by the store's id.
public struct PatientRefreshError: Error, Sendable, CustomStringConvertible {
    /// The patient, by the store's id.
    public var patient: String
    /// The whole cause, the EHR's text and URLs included: for operators, not logs.
    public var cause: String
    /// What went wrong without the EHR's text or URLs (`FHIRClientError.kind`): what logs say.
    public var kind: String
    public var description: String { "refresh of \(patient): \(cause)" }
}

/// Re-pulls enrolled patients' care plans from the EHR and imports them, so that a changed
/// CarePlan reaches the app at its next sync as new task versions (the importer never rewrites
/// history). When the server searches by `_lastUpdated`, a patient with nothing changed since the
/// last refresh costs four one-entry searches instead of a whole pull.
public struct PatientRefresh: Sendable {
    /// The EHR's client.
    public let client: FHIRRESTClient
    /// What imports the pulled resources, as `caregate import` would.
    public let importer: FHIRImporter
    /// Where enrolled patients are found (those with a device not revoked).
    public let devices: any DeviceRegistry
    /// Clocks differ: changes are looked for from this long before the last refresh began.
    public var clockSkew: TimeInterval = 300
    /// Where refreshes that changed something (or failed, or lost data) are logged for operators.
    public var log: (any ImportLog)?

    /// The resource types a pull reads by patient, and their patient search parameter.
    static let patientSearches = [("Patient", "_id"), ("CarePlan", "subject"), ("CareTeam", "subject"), ("MedicationRequest", "subject")]

    /// Refreshes through `client` into `importer`'s store.
    public init(client: FHIRRESTClient, importer: FHIRImporter, devices: any DeviceRegistry) {
        self.client = client
        self.importer = importer
        self.devices = devices
    }

    /// What one refresh did.
    public enum Result: Sendable {
        /// Nothing changed on the EHR since `since`: not pulled.
        case unchanged
        /// Pulled and imported: what changed.
        case imported(ImportReport)
    }

    /// The patients with a device not revoked, with their EHR ids, read from the patient
    /// versions the gateway wrote (a device's never carry them). A patient not imported from a
    /// FHIR Patient (no `caregate.resource`) is left out: there is nothing to refresh from.
    public func enrolledPatients() throws(StoreError) -> [EnrolledPatient] {
        let ids = Set(try devices.devices(patientID: nil).filter { $0.revokedAt == nil }.map(\.patientID)).sorted()
        guard !ids.isEmpty else { return [] }
        return try GatewayOwnedFields.newestWritten(ids: ids, patients: ids, importer.store.fetchPatients).values.compactMap { patient in
            guard let resource = patient.userInfo?["caregate.resource"], resource.hasPrefix("Patient/") else { return nil }
            return EnrolledPatient(storeID: patient.id, ehrID: String(resource.dropFirst("Patient/".count)))
        }.sorted { $0.storeID < $1.storeID }
    }

    /// Pulls and imports one patient, unless the server says nothing of theirs changed since
    /// `since` (nil: always pull). The import runs with the current time as its `now`.
    public func refresh(_ patient: EnrolledPatient, since: Date?) async throws(PatientRefreshError) -> Result {
        do throws(FHIRClientError) {
            let capabilities = ServerCapabilities(try await client.capabilities())
            if let since, try await !changed(patient, since: since.addingTimeInterval(-clockSkew), capabilities) {
                return .unchanged
            }
            var pull = PatientPull(client: client)
            pull.formsAsked = importer.missingQuestionnaires
            let pulled = try await pull.pull(patient: patient.ehrID, capabilities: capabilities)
            return .imported(await importAndLog(pulled, of: patient))
        } catch {
            throw PatientRefreshError(patient: patient.storeID, cause: error.description, kind: error.kind)
        }
    }

    /// Imports what was pulled, with the current time as the import's `now`, off the cooperative
    /// threads (the store blocks), and logs the run when it is worth it.
    func importAndLog(_ pulled: PatientPull.Result, of patient: EnrolledPatient) async -> ImportReport {
        var importer = importer
        importer.now = Date()
        return await Blocking.run { [importer, log] in
            var report = ImportReport()
            report.notes = pulled.notes
            report = importer.run(resources: pulled.resources, report: report)
            if report.isWorthLogging {
                // The import is stored whether or not its log line is.
                _ = try? log?.recordImport(report.importRun(source: "EHR refresh of \(patient.storeID)", startedAt: importer.now))
            }
            return report
        }
    }

    /// Whether any of the patient's resources changed after `date` on the server, asked with a
    /// one-entry search of each type the server can search by the patient and `_lastUpdated`
    /// (a search by a parameter the server ignores would be a search of every patient). A
    /// server that cannot so search CarePlans cannot tell: the patient is pulled.
    func changed(_ patient: EnrolledPatient, since date: Date, _ capabilities: ServerCapabilities) async throws(FHIRClientError) -> Bool {
        guard capabilities.canSearch("CarePlan", by: "subject", "_lastUpdated") else { return true }
        // The instant goes to the second, and `gt` on a value to the second means after that
        // whole second: a second earlier, so that a change in the same second is not missed.
        let instant = Self.instant(date.addingTimeInterval(-1))
        for (type, parameter) in Self.patientSearches where capabilities.canSearch(type, by: parameter, "_lastUpdated") {
            let value = parameter == "_id" ? patient.ehrID : "Patient/\(patient.ehrID)"
            if try await !client.firstPage(type, [(parameter, value), ("_lastUpdated", "gt\(instant)"), ("_count", "1")]).isEmpty {
                return true
            }
        }
        return false
    }

    static func instant(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
