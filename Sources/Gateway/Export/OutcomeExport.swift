import CareStore
import FHIR
import FHIRValidation
import Foundation
import Mapping

/// One outcome version as an Observation, with what had to be approximated.
public struct ExportedObservation: Sendable {
    /// The R4 Observation (or MedicationAdministration).
    public var observation: Element
    /// The outcome version it comes from (what the outbox queues once).
    public var outcomeVersion: UUID
    /// The stable identifier value (`system|value` finds it on a server).
    public var identifier: String
    /// What had to be approximated or left out, in words.
    public var notes: [String]
    /// Why the outcome cannot be sent (a survey's answers its form refuses, naming the outcome
    /// and the linkId): the outbox keeps it as a dead letter for an operator. `observation` is
    /// then an OperationOutcome saying so.
    public var refusal: String?
    /// Why, without the outcome `refusal` names (the rule or profile broken, and where).
    public var refusalReason: String?

    /// Whether a resource is sent as a conditional create (an Observation's first, `final`
    /// version) rather than a conditional update by identifier. A MedicationAdministration has no
    /// `amended` status to tell its versions apart, so it always goes as a conditional update,
    /// which creates it the first time and is as safe to repeat.
    public static func isFirstVersion(_ resource: Element) -> Bool {
        switch resource.resourceType {
        case "Observation": resource.string("status") == "final"
        case "QuestionnaireResponse": resource.string("status") == "completed"
        case "Provenance": true  // each outcome version has its own, created once
        default: false
        }
    }

    /// A resource that carries an outcome's parts (a transaction Bundle: a survey's response and
    /// its extracted Observations, and with a profile target the Provenance, sent together).
    public var isTransaction: Bool { observation.resourceType == "Bundle" }
}

/// Turns the store's outcomes into R4 Observations: the current version of every outcome
/// (`final`, `amended` when it has earlier versions, `entered-in-error` when deleted).
public struct OutcomeExport: Sendable {
    /// The store the outcomes are read from.
    public let store: any CarePlanStore
    /// What turns an outcome into FHIR.
    public let builder: ObservationBuilder

    /// Also export outcomes that came from the EHR (imported Observations), which it already has.
    public var includeImported = false
    /// The profiles what is sent claims and must meet (`ehr.profiles`, `--profiles`); nil: R4
    /// alone, nothing claimed. A resource with an error against them is refused before it is
    /// written or queued, holding the validator's OperationOutcome.
    public var profiles: ProfileTarget?
    /// Whether what is built is validated against `profiles` before it is written or queued.
    /// Always, but to measure what validation costs (`Benchmarks/profile-validation` compares
    /// the same export with and without it); nothing else turns it off.
    public var validatesProfiles = true
    /// Told how many outcomes are exported of how many, before each and once at the end
    /// (the command line's progress bar).
    public var progress: (@Sendable (_ done: Int, _ total: Int) -> Void)?
    /// Where the devices that pushed outcomes are read (their names go to the EHR with a
    /// profile target): the store's own registry.
    public var devices: (any DeviceRegistry)?
    /// The Organization the patients' devices act for in Provenances (`Organization/id` or a
    /// name); nil for CareGate's own name.
    public var organization: String?

    /// An export of `store`'s outcomes through `builder`.
    public init(store: any CarePlanStore, builder: ObservationBuilder) {
        self.store = store
        self.builder = builder
        self.devices = store as? any DeviceRegistry
    }

    /// Whether an outcome was imported from a FHIR Observation rather than recorded in the app.
    public static func isImported(_ outcome: Outcome) -> Bool {
        outcome.version.source == VersionInfo.importedFromEHR && (outcome.version.remoteID?.hasPrefix("Observation/") ?? false)
    }

    /// Finds each outcome's task version and patient through one reader, remembering what it
    /// found (tasks and patients are few beside outcomes). The patient is the one the store
    /// holds the outcome's task under (an outcome is its task's patient's); what the EHR is told
    /// of where things came from (the subject's EHR id, the task's source resource) is read from
    /// the versions the gateway wrote, never from a device's (`GatewayOwnedFields`).
    struct Owners {
        let reader: any CarePlanReader
        var registry: (any DeviceRegistry)?
        var tasks: [UUID: (task: CareTask, patientID: String?)] = [:]
        /// Devices read, by id.
        var devices: [String: Device?] = [:]
        var patients: [String: Patient?] = [:]
        /// Survey forms read, by patient, url, version and hash.
        var forms: [String: Result<Questionnaire, StoredForms.Missing>?] = [:]

        mutating func record(_ outcome: Outcome) throws(StoreError) -> OutcomeRecord? {
            guard let (task, patientID) = try task(outcome.taskUUID) else { return nil }
            var patient: Patient?
            if let patientID {
                if let cached = patients[patientID] {
                    patient = cached
                } else {
                    patient = try GatewayOwnedFields.newestWritten(ids: [patientID], patients: [patientID], keepingDeleted: true, reader.fetchPatients)[patientID]
                    patients[patientID] = patient
                }
            }
            var record = OutcomeRecord(outcome: outcome, task: task, patient: patient, patientID: patientID,
                                       amended: !outcome.version.previousVersionUUIDs.isEmpty, deleted: outcome.version.deletedDate != nil)
            record.device = try device(pushed: outcome, patientID: patientID)
            return record
        }

        /// The device that pushed an outcome version (its `source`, which only the gateway
        /// writes), when it is enrolled for the outcome's own patient; never another patient's.
        mutating func device(pushed outcome: Outcome, patientID: String?) throws(StoreError) -> Device? {
            guard let patientID, let id = Device.id(fromVersionSource: outcome.version.source) else { return nil }
            if devices[id] == nil, let registry { devices[id] = .some(try registry.device(id: id)) }
            guard let found = devices[id] ?? nil, found.patientID == patientID else { return nil }
            return found
        }

        /// The form a survey outcome answers (`StoredForms`), read once per task version; nil
        /// when the outcome's task asks no form.
        mutating func form(of record: OutcomeRecord) throws(StoreError) -> Result<Questionnaire, StoredForms.Missing>? {
            let key = "\(record.patientID ?? "")|\(record.task.version.userInfo?[SurveyTask.questionnaireKey] ?? "")|\(record.task.version.userInfo?[SurveyTask.hashKey] ?? "")"
            if let known = forms[key] { return known }
            let found = try StoredForms.form(of: record.task, patientID: record.patientID, in: reader)
            forms[key] = found
            return found
        }

        /// A task version, its patient, and as its `remoteID` the source the gateway recorded for the task.
        mutating func task(_ uuid: UUID) throws(StoreError) -> (CareTask, String?)? {
            if let cached = tasks[uuid] { return cached }
            guard var found = try reader.fetchTasks(EntityQuery(versions: .history, uuids: [uuid])).first else { return nil }
            let patientID = try reader.scopes(of: [uuid])[uuid]?.patientID
            // A task of no patient is the gateway's own (a device's are always its patient's).
            if let patientID {
                let written = try GatewayOwnedFields.newestWritten(ids: [found.id], patients: [patientID], keepingDeleted: true, reader.fetchTasks)[found.id]
                found.version.remoteID = written?.remoteID
                // The form asked: the outcome's own task version's when the gateway wrote it
                // (a device's carries no caregate.* entries), else the newest the gateway wrote.
                if found.version.userInfo?[SurveyTask.questionnaireKey] == nil {
                    let asked = (written?.version.userInfo ?? [:]).filter { $0.key == SurveyTask.questionnaireKey || $0.key == SurveyTask.hashKey }
                    if !asked.isEmpty { found.version.userInfo = (found.version.userInfo ?? [:]).merging(asked) { $1 } }
                }
            }
            tasks[uuid] = (found, patientID)
            return (found, patientID)
        }
    }

    /// Every outcome's current version as FHIR, in memory (tests and small stores; files stream).
    public func observations() throws(StoreError) -> [ExportedObservation] {
        var result: [ExportedObservation] = []
        do {
            try forEach { result.append($0) }
        } catch let error as StoreError {
            throw error
        } catch {
            preconditionFailure("only the store throws here: \(error)")
        }
        return result
    }

    /// Which outcome versions were queued, under which identifiers (the outbox's `outboxEntities(versions:)`).
    public typealias QueuedLookup = @Sendable ([UUID]) throws(StoreError) -> [UUID: String]

    /// The resources of the outcome versions among `versions` that are current and not queued
    /// yet (`queued` says which are, and under which identifiers), in the order of their dates:
    /// what a push cycle exports, reading those versions and nothing else. A later version of an
    /// outcome queued before keeps the identifier it was queued under.
    public func observations(versions: [UUID], queued: @escaping QueuedLookup) throws(StoreError) -> [ExportedObservation] {
        let already = try queued(versions)
        // Each read its own (the outbox is read between them, which a snapshot of SQLite's
        // pool cannot do inside it); versions are only appended, so what a read found stays.
        return try page(versions.filter { already[$0] == nil }, queued: queued, reader: store)
    }

    /// The current ones among `versions`, exported in the order of their dates.
    func page(_ versions: [UUID], queued: @escaping QueuedLookup, reader: any CarePlanReader) throws(StoreError) -> [ExportedObservation] {
        let tips = try reader.fetchOutcomes(EntityQuery(versions: .history, uuids: versions))
            .filter { $0.version.nextVersionUUIDs.isEmpty }
            .sorted { ($0.effectiveDate, $0.id, $0.uuid.uuidString) < ($1.effectiveDate, $1.id, $1.uuid.uuidString) }
        var owners = Owners(reader: reader, registry: devices)
        var result: [ExportedObservation] = []
        for outcome in tips {
            if let item = try exported(outcome, owners: &owners, queued: queued, reader: reader) { result.append(item) }
        }
        return result
    }

    /// A transaction Bundle that creates each Observation unless one with its identifier exists
    /// (`If-None-Exist`), and updates amended and entered-in-error ones by identifier: posting it
    /// twice changes nothing the second time.
    public func transactionBundle(_ exported: [ExportedObservation]) -> Element {
        bundle(exported, type: "transaction")
    }

    /// The same requests as a `transaction` (all or nothing) or a `batch` (each entry on its own,
    /// with its own outcome in the answer).
    public func bundle(_ exported: [ExportedObservation], type: String) -> Element {
        var bundle = Element(resourceType: "Bundle")
        bundle.append(Element(name: "id", type: "id", value: ObservationBuilder.resourceID(UUID().uuidString.lowercased())))
        bundle.append(Element(name: "type", type: "code", value: type))
        for item in exported { for entry in bundleEntries(item) { bundle.append(entry) } }
        return bundle
    }

    /// An exported item's entries: its own, or a survey's parts; none for a refusal.
    public func bundleEntries(_ item: ExportedObservation) -> [Element] {
        if item.refusal != nil { return [] }
        return item.isTransaction ? item.observation.children(named: "entry") : [bundleEntry(item)]
    }

    /// One entry of such a Bundle: the resource (without its id), a `urn:uuid` fullUrl, and the
    /// conditional request (POST with `ifNoneExist`, or PUT by identifier).
    public func bundleEntry(_ item: ExportedObservation) -> Element {
        let query = PatientSuppliedProvenance.conditionalQuery(of: item.observation)
            ?? "identifier=\(percentEncoded(builder.identifierSystem))%7C\(percentEncoded(item.identifier))"
        let type = item.observation.resourceType ?? "Observation"
        var request = Element(name: "request", type: "Bundle.entry.request")
        if ExportedObservation.isFirstVersion(item.observation) {
            request.append(Element(name: "method", type: "code", value: "POST"))
            request.append(Element(name: "url", type: "uri", value: type))
            request.append(Element(name: "ifNoneExist", type: "string", value: query))
        } else {
            request.append(Element(name: "method", type: "code", value: "PUT"))
            request.append(Element(name: "url", type: "uri", value: "\(type)?\(query)"))
        }
        var resource = item.observation
        resource.name = "resource"
        resource.removeChildren(named: "id")
        var entry = Element(name: "entry", type: "Bundle.entry")
        entry.append(Element(name: "fullUrl", type: "uri", value: "urn:uuid:\(item.outcomeVersion.uuidString.lowercased())"))
        entry.append(resource)
        entry.append(request)
        return entry
    }

    /// Builds the exported resources of every current outcome version one at a time and hands
    /// each to `body`, in the order of the outcomes' dates (then ids), so that exports of any
    /// size need memory for one resource, not all of them: the outcomes come through the store's
    /// cursor, in one read.
    public func forEach(_ body: (ExportedObservation) throws -> Void) throws {
        // The devices are read first: the registry cannot be read inside the store's read.
        let known = try devices?.devices(patientID: nil) ?? []
        try store.read { reader in
            let total = try reader.currentOutcomeCount()
            var owners = Owners(reader: reader, registry: nil)
            for device in known { owners.devices[device.id] = device }
            var seen = 0
            try reader.forEachCurrentOutcome { outcome in
                seen += 1
                progress?(seen - 1, total)
                if let item = try exported(outcome, owners: &owners, queued: nil, reader: reader) { try body(item) }
            }
            progress?(total, total)
        }
    }

    /// One current outcome version as what is sent for it; nil for one imported from the EHR
    /// (unless `includeImported`) or whose task the store lacks.
    func exported(_ outcome: Outcome, owners: inout Owners, queued: QueuedLookup?, reader: any CarePlanReader) throws(StoreError) -> ExportedObservation? {
        guard includeImported || !OutcomeExport.isImported(outcome), var record = try owners.record(outcome) else { return nil }
        if let queued { record.sentIdentifier = try OutcomeExport.sentIdentifier(of: record, queued: queued, reader: reader) }
        if let form = try owners.form(of: record) { return survey(record, form: form) }
        let (observation, notes) = builder.resource(record)
        if let profiles, profiles.sendsProvenance {
            return together(record, [ExportedPart(resource: observation, identifier: builder.identifierValue(record))], notes: notes, profiles: profiles)
        }
        var claimed = [observation]
        if let refusal = builder.siteRules.apply(to: &claimed) { return refused(record, "\(refusal)") }
        if let profiles {
            profiles.claim(&claimed[0])
            if let refusal = refusal(record, breaking: claimed, profiles) { return refusal }
        }
        return ExportedObservation(observation: claimed[0], outcomeVersion: record.outcome.uuid, identifier: builder.identifierValue(record), notes: notes)
    }

    /// A refusal naming the outcome: what an operator reads in the dead letter and on standard error.
    func refused(_ record: OutcomeRecord, _ why: String, outcome: Element? = nil) -> ExportedObservation {
        let patient = record.patientID.map { ", patient \($0)" } ?? ""
        let reason = "outcome \(record.outcome.id) (occurrence \(record.outcome.taskOccurrenceIndex) of task \(record.task.id)\(patient)): \(why)"
        return ExportedObservation(observation: outcome ?? Self.operationOutcome(reason), outcomeVersion: record.outcome.uuid,
                                   identifier: builder.identifierValue(record), notes: [], refusal: reason, refusalReason: why)
    }

    /// The refusal of resources that break the target's profiles (the first error in words,
    /// every issue in the OperationOutcome kept), or nil when they meet them.
    func refusal(_ record: OutcomeRecord, breaking resources: [Element], _ profiles: ProfileTarget) -> ExportedObservation? {
        guard validatesProfiles else { return nil }
        var issues: [ValidationIssue] = []
        for resource in resources { issues += profiles.validate(resource).issues }
        let errors = issues.filter { $0.severity <= .error }
        guard let first = errors.first else { return nil }
        let more = errors.count > 1 ? " (and \(errors.count - 1) more error\(errors.count == 2 ? "" : "s"))" : ""
        return refused(record, "breaks the profiles of \(profiles.name): \(first)\(more)", outcome: ValidationReport(issues: issues).operationOutcome)
    }

    /// A survey outcome as one transaction of its parts (the QuestionnaireResponse first, whose
    /// `fullUrl` is the outcome version's `urn:uuid`, then the extracted Observations); answers
    /// the form refuses, or a form the store lacks, give a refusal naming the outcome.
    func survey(_ record: OutcomeRecord, form: Result<Questionnaire, StoredForms.Missing>) -> ExportedObservation {
        do {
            let (parts, notes) = try builder.surveyResponse(record, form: form.get())
            return together(record, parts, notes: notes, profiles: profiles)
        } catch {
            return refused(record, "\(error)")
        }
    }

    /// An outcome's parts as one transaction (the first part's `fullUrl` is the outcome
    /// version's `urn:uuid`). The site's rules (`SiteRule`) add their codings and may refuse
    /// the outcome, naming the rule and its place. With a profile target each part claims its profile, an Observation
    /// contains the device that pushed the outcome, and a Provenance of all the parts closes the
    /// transaction (`PatientSuppliedProvenance`); parts that break the profiles give a refusal.
    func together(_ record: OutcomeRecord, _ parts: [ExportedPart], notes: [String], profiles: ProfileTarget?) -> ExportedObservation {
        var parts = parts
        // The EHR's own rules first: their codings are part of what the profiles check.
        var resources = parts.map(\.resource)
        if let refusal = builder.siteRules.apply(to: &resources) { return refused(record, "\(refusal)") }
        for i in parts.indices { parts[i].resource = resources[i] }
        let places = parts.indices.map { $0 == 0 ? record.outcome.uuid : UUID() }
        if let profiles {
            let healthKit = record.task.healthKitLinkage != nil
            for i in parts.indices {
                if profiles.sendsProvenance { PatientSuppliedProvenance.attach(record.device, healthKit: healthKit, to: &parts[i].resource) }
                profiles.claim(&parts[i].resource)
            }
            if profiles.sendsProvenance {
                var made = PatientSuppliedProvenance(
                    targets: places.map { "urn:uuid:\($0.uuidString.lowercased())" }, patient: parts.first?.resource.first("subject.reference")?.value,
                    recorded: record.outcome.version.createdDate ?? record.outcome.effectiveDate, device: record.device, healthKit: healthKit,
                    versionUUID: record.outcome.uuid)
                made.deviceAsAgent = profiles.provenanceAgentDevices
                made.organization = organization
                var provenance = made.resource
                profiles.claim(&provenance)
                parts.append(ExportedPart(resource: provenance, identifier: builder.identifierValue(record) + "/provenance"))
            }
            if let refusal = refusal(record, breaking: parts.map(\.resource), profiles) { return refusal }
        }
        var bundle = Element(resourceType: "Bundle")
        bundle.append(Element(name: "type", type: "code", value: "transaction"))
        for (i, part) in parts.enumerated() {
            bundle.append(bundleEntry(ExportedObservation(observation: part.resource, outcomeVersion: i < places.count ? places[i] : UUID(),
                                                          identifier: part.identifier, notes: [])))
        }
        return ExportedObservation(observation: bundle, outcomeVersion: record.outcome.uuid, identifier: builder.identifierValue(record), notes: notes)
    }

    /// An OperationOutcome with one error: what a refused outcome's dead letter holds.
    static func operationOutcome(_ message: String) -> Element {
        var outcome = Element(resourceType: "OperationOutcome")
        outcome.append(Element(name: "issue", type: "OperationOutcome.issue", children: [
            Element(name: "severity", type: "code", value: "error"),
            Element(name: "code", type: "code", value: "invalid"),
            Element(name: "diagnostics", type: "string", value: message),
        ]))
        return outcome
    }

    /// The identifier an outcome's earlier versions were queued under when it is not the one
    /// the gateway makes now: outcomes first pushed before identifiers named their patient
    /// (`<outcome id>` then, `Outcome.scopedID` now) are amended and voided under the identifier
    /// the EHR already holds, never given a second resource. Only the outcome's own history,
    /// within its patient, is looked at.
    static func sentIdentifier(of record: OutcomeRecord, queued: QueuedLookup, reader: any CarePlanReader) throws(StoreError) -> String? {
        guard record.amended, let patientID = record.patientID else { return nil }
        let current = Outcome.scopedID(patientID: patientID, outcomeID: record.outcome.id)
        let history = try reader.fetchOutcomes(EntityQuery(versions: .history, ids: [record.outcome.id], patientIDs: [patientID]))
        let identifiers = try queued(history.map(\.uuid))
        let earlier = history.sorted { ($0.version.createdDate ?? .distantPast) < ($1.version.createdDate ?? .distantPast) }.compactMap { identifiers[$0.uuid] }
        return earlier.first { $0 != current }
    }

    /// Streams a transaction (or batch) Bundle as compact JSON to `output`, entry by entry; the
    /// same Bundle as `bundle(_:type:)` builds in memory. Returns the exported resources' count
    /// and calls `each` with every one (for notes and progress).
    @discardableResult
    public func writeBundle(type: String = "transaction", to output: FHIROutput, each: (ExportedObservation) -> Void = { _ in }) throws -> Int {
        let id = ObservationBuilder.resourceID(UUID().uuidString.lowercased())
        try output.write(Array(#"{"resourceType":"Bundle","id":"\#(id)","type":"\#(type)""#.utf8))
        let writer = FHIRJSONWriter(pretty: false)
        var count = 0
        try forEach { item in
            each(item)
            for entry in bundleEntries(item) {
                try output.write(Array((count == 0 ? #","entry":["# : ",").utf8) + writer.writeValue(entry))
                count += 1
            }
        }
        try output.write(Array((count == 0 ? "}" : "]}").utf8))
        return count
    }

    func percentEncoded(_ text: String) -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        allowed.insert(charactersIn: "-._~:/")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
