import CareStore
import FHIR
import FHIRClient
import Foundation
import Mapping

/// What a push did.
public struct PushReport: Sendable {
    /// Outcome versions queued by this run (new since the last, or dead letters given another try).
    public var newlyQueued = 0
    /// Dead letters taken out of the outbox to be exported and sent again (`retryFailed`).
    public var retriedFailed = 0
    /// Delivered now: identifier and the server's location.
    public var pushed: [(identifier: String, location: String?)] = []
    /// Refused by the server (dead-lettered), with its OperationOutcome.
    public var failed: [(identifier: String, error: String)] = []
    /// Left queued for the next run (the server or the network failed).
    public var deferred: [(identifier: String, error: String)] = []
    /// For a dry run: what would be sent (`create Observation <id>`, `amend ...`).
    public var planned: [String] = []
    /// The Provenance naming the gateway as author of this run's pushes.
    public var provenanceLocation: String?
    /// Each sent or settled item's patient, by identifier: its payload's subject (`Patient/…`).
    public var patients: [String: String] = [:]
    /// The items that are AuditEvents (`ehr.audit`), by identifier: no patient's data, counted
    /// and entered apart from the outcomes.
    public var auditEvents: Set<String> = []

    /// What was delivered of patients' data: the outcomes and survey responses, not AuditEvents.
    public var pushedOutcomes: [(identifier: String, location: String?)] { pushed.filter { !auditEvents.contains($0.identifier) } }
}

/// A push run that stopped partway (the store failed, or a later item is of a type the EHR
/// cannot take): what it had sent and settled before `cause` stopped it, all of it already in
/// the outbox, so that its caller can still record it.
public struct PushInterrupted: Error, CustomStringConvertible {
    /// What the run did before it stopped.
    public var report: PushReport
    /// What stopped it.
    public var cause: any Error

    /// What stopped the run, as its cause says it.
    public var description: String { "\(cause)" }
}

/// Pushes exported Observations through the durable outbox: every current outcome version is
/// queued once with its identifier; each queued item is sent so that the server ends with exactly
/// one Observation per outcome (a conditional create by identifier, which a retry after a lost
/// answer cannot duplicate; amended and entered-in-error ones as conditional updates); refusals go
/// to the dead-letter list with the server's OperationOutcome, transient failures stay queued.
public struct OutcomePush: Sendable {
    /// Where queued items wait (the store's own database, for `SQLiteCarePlanStore`).
    public let outbox: any Outbox
    /// What turns outcomes into FHIR.
    public let export: OutcomeExport
    /// The EHR's client.
    public let client: FHIRRESTClient
    /// Stop after this many transient failures in a row (the server is down: try again later).
    public var maxConsecutiveFailures = 3
    /// Observations per batch Bundle when the server takes batches and conditional writes; 1
    /// sends each on its own. Every entry is conditional, so a batch resent after a lost answer
    /// creates nothing twice.
    public var batchSize = 1
    /// Told how many queued items were sent (or settled) of how many, as the run goes.
    public var progress: (@Sendable (_ done: Int, _ total: Int) -> Void)?
    /// Who this run claims items as (`Outbox.claim`): host, process and a run of its own.
    public var worker = OutcomePush.workerName()
    /// How long a claim holds: it must outlast sending a claimed handful, retries included. A
    /// worker that dies leaves its items to others once this has passed.
    public var lease: TimeInterval = OutcomePush.defaultLease

    /// Ten minutes: a claim is at most `max(batchSize, 10)` items.
    public static let defaultLease: TimeInterval = 600

    /// `host/pid/run`: unique to this run, readable in the outbox.
    public static func workerName() -> String {
        "\(ProcessInfo.processInfo.hostName)/\(ProcessInfo.processInfo.processIdentifier)/\(UUID().uuidString.prefix(8).lowercased())"
    }

    /// A push from `outbox` to the server behind `client`.
    public init(outbox: any Outbox, export: OutcomeExport, client: FHIRRESTClient) {
        self.outbox = outbox
        self.export = export
        self.client = client
    }

    /// Queues the current outcome versions not queued yet, each under the identifier its
    /// outcome's earlier versions were queued under when there were any.
    public func enqueue() throws(StoreError) -> Int { try queue().queued }

    /// Outcome versions read per page of what is pending.
    public var pendingPage = 500

    /// Queues what is new: the outcome versions the store noted since the last cycle
    /// (`Outbox.pendingOutcomeVersions`), a page at a time, each page queued and settled in one
    /// transaction; nothing else is read, however many outcomes were pushed before. Returns how
    /// many were queued, and the refusals dead-lettered at once (identifier, why).
    func queue() throws(StoreError) -> (queued: Int, refused: [(identifier: String, error: String)]) {
        var queued = 0
        var refusals: [(identifier: String, error: String)] = []
        let outbox = outbox
        while true {
            let pending = try outbox.pendingOutcomeVersions(limit: pendingPage)
            guard !pending.isEmpty else { break }
            let exported = try export.observations(versions: pending) { versions throws(StoreError) in try outbox.outboxEntities(versions: versions) }
            let items = exported.map { item in
                OutboxItem(versionUUID: item.outcomeVersion, entityID: item.identifier, idempotencyKey: "\(export.builder.identifierSystem)|\(item.identifier)",
                           payload: FHIRJSONWriter(pretty: false).write(item.observation))
            }
            queued += try outbox.enqueue(items, settling: pending)
            // What cannot be sent waits as a dead letter for an operator (its payload says why, so
            // one left queued by a crash here is dead-lettered when claimed).
            let refused = exported.compactMap { item in item.refusal.map { OutboxDelivery.failed(item.outcomeVersion, error: $0, dead: true) } }
            if !refused.isEmpty { try outbox.record(refused) }
            refusals += exported.compactMap { item in item.refusal.map { ("\(export.builder.identifierSystem)|\(item.identifier)", $0) } }
            if pending.count < pendingPage { break }
        }
        return (queued, refusals)
    }

    /// Queues what is new and sends what is queued, a claimed handful at a time (see
    /// `Outbox.claim`): several workers, in this process or others over one database, share the
    /// queue and never send one item at once. With `retryFailed`, the dead letters are exported
    /// again first (after a mapping fix, say) and sent like new ones. A run that stops partway
    /// throws `PushInterrupted`, carrying what it did.
    /// `retryPatient` narrows `retryFailed` to one patient's dead letters (those the store holds
    /// under that patient; another patient's stay where they are).
    public func run(dryRun: Bool = false, retryFailed: Bool = false, retryPatient: String? = nil) async throws -> PushReport {
        var report = PushReport()
        do {
            if retryFailed, !dryRun, let retryPatient {
                report.retriedFailed = try forgetFailed(of: retryPatient)
                try await run(dryRun: dryRun, retryFailed: false, into: &report)
                return report
            }
            try await run(dryRun: dryRun, retryFailed: retryFailed, into: &report)
        } catch {
            throw PushInterrupted(report: report, cause: error)
        }
        return report
    }

    /// Takes one patient's dead letters out of the outbox, so they are exported and sent again.
    func forgetFailed(of patientID: String) throws -> Int {
        let failed = try outbox.outbox(state: .failed, limit: Int.max).map(\.versionUUID)
        guard !failed.isEmpty else { return 0 }
        let scopes = try export.store.scopes(of: failed)
        return try outbox.forgetFailed(versions: failed.filter { scopes[$0]?.patientID == patientID })
    }

    func run(dryRun: Bool, retryFailed: Bool, into report: inout PushReport) async throws {
        if retryFailed && !dryRun { report.retriedFailed = try outbox.forgetFailed() }
        let queued = try queue()
        report.newlyQueued = queued.queued
        report.failed += queued.refused
        if dryRun {
            report.planned = try outbox.queuedOutbox(limit: 100_000).compactMap(plannedAction)
            return
        }
        // Items whose send failed in passing stay leased to this run (tried once per run); the
        // rest of what it holds goes back to the queue however the run ends.
        defer { try? outbox.release(worker: worker) }
        let total = try outbox.queuedCount()
        var sent = 0
        var strategies: [String: Strategy] = [:]
        var capabilities: ServerCapabilities?
        var failuresInARow = 0
        defer { progress?(sent, max(sent, total)) }
        while failuresInARow < maxConsecutiveFailures {
            let claimed = try outbox.claim(limit: max(batchSize, 10), worker: worker, lease: lease, now: Date())
            guard !claimed.isEmpty else { break }
            if capabilities == nil { capabilities = ServerCapabilities(try await client.capabilities()) }
            let ready = try prepare(claimed, capabilities: capabilities!, strategies: &strategies, report: &report)
            try await send(ready, strategies: strategies, done: sent, total: max(total, sent + claimed.count),
                           failuresInARow: &failuresInARow, report: &report)
            sent += claimed.count
        }
        // A profile target sends each outcome's own Provenance in its transaction; else one per run.
        let targets = report.pushedOutcomes.compactMap(\.location)
        if !targets.isEmpty, export.profiles?.sendsProvenance != true {
            report.provenanceLocation = try? await client.create(provenance(targets: targets)).location
        }
    }

    /// What a dry run says of a queued item (`amend: Observation urn:caregate:outcome|…`).
    func plannedAction(_ item: OutboxItem) -> String? {
        guard let resource = try? FHIRJSONReader().read(item.payload).resource else { return nil }
        let type = resource.resourceType ?? "Observation"
        let status = resource.string("status")
        if type == "Bundle" {
            let parts = resource.children(named: "entry").compactMap { $0["resource"]?.resourceType }
            let extracted = parts.dropFirst().filter { $0 == "Observation" }.count
            let provenance = parts.contains("Provenance") ? " with its Provenance" : ""
            let what = parts.first == "QuestionnaireResponse" ? " and \(extracted) extracted Observation\(extracted == 1 ? "" : "s")" : ""
            return "send in one transaction: \(parts.first ?? "QuestionnaireResponse") \(item.idempotencyKey)\(what)\(provenance)"
        }
        let action = ExportedObservation.isFirstVersion(resource) ? "create (unless an \(type) with its identifier exists)"
            : status == "entered-in-error" ? "mark entered-in-error" : status == "amended" ? "amend" : "create or update by identifier"
        return "\(action): \(type) \(item.idempotencyKey)"
    }

    /// Claimed items read back into resources, each type's strategy settled from the server's
    /// CapabilityStatement; a payload that cannot be read, or that the server does not take
    /// (`Strategy.Delivery.refused`), is dead-lettered.
    func prepare(_ claimed: [OutboxItem], capabilities: ServerCapabilities, strategies: inout [String: Strategy],
                 report: inout PushReport) throws -> [(item: OutboxItem, observation: Element)] {
        var ready: [(item: OutboxItem, observation: Element)] = []
        func deadLetter(_ item: OutboxItem, _ why: String) throws {
            try outbox.markAttempt(item.versionUUID, error: why, dead: true)
            report.failed.append((item.idempotencyKey, why))
        }
        for item in claimed {
            do {
                var resource = try FHIRJSONReader().read(item.payload).resource
                let type = resource.resourceType ?? "Observation"
                if type == "OperationOutcome" {
                    // A refused outcome left queued: it stays a dead letter.
                    try deadLetter(item, resource.first("issue.diagnostics")?.value ?? "refused before sending")
                    continue
                }
                if type == "AuditEvent" { report.auditEvents.insert(item.idempotencyKey) }
                for part in Self.types(in: resource) where strategies[part] == nil {
                    strategies[part] = try Strategy(capabilities, type: part, inTransaction: type == "Bundle")
                }
                switch strategies[type]!.delivery {
                case .refused(let why):
                    try deadLetter(item, why)
                    continue
                case .atOwnID:
                    guard resource.string("id") != nil else { try deadLetter(item, "the queued \(type) carries no id to be written at"); continue }
                case .byIdentifier, .transaction:
                    resource.removeChildren(named: "id")
                }
                if type == "Bundle" { resource = try SurveyTransaction.fitted(resource, to: strategies, base: client.base) }
                let subject = type == "Bundle" ? resource.first("entry.resource.subject.reference") : resource.first("subject.reference")
                report.patients[item.idempotencyKey] = subject?.value
                ready.append((item, resource))
            } catch let error as FHIRClientError {
                // The server cannot take this kind of resource at all: stop before sending anything.
                throw error
            } catch {
                // A payload that cannot be read will never go: dead-letter it.
                try deadLetter(item, "the queued payload is not valid FHIR: \(error)")
            }
        }
        return ready
    }

    /// The types a payload writes: its own, or a transaction's entries' and the transaction itself.
    static func types(in payload: Element) -> [String] {
        guard payload.resourceType == "Bundle" else { return [payload.resourceType ?? "Observation"] }
        return ["Bundle"] + Set(payload.children(named: "entry").compactMap { $0["resource"]?.resourceType }).sorted()
    }

    /// Sends prepared items, in batches when the server takes conditional batches, else one by
    /// one; a survey's transaction always goes on its own.
    func send(_ ready: [(item: OutboxItem, observation: Element)], strategies: [String: Strategy], done: Int, total: Int,
              failuresInARow: inout Int, report: inout PushReport) async throws {
        // A survey's transaction, and an AuditEvent (written at its id), each go on their own.
        let isAlone = { (resource: Element) in strategies[resource.resourceType ?? "Observation"]?.sentAlone == true }
        let separate = ready.filter { isAlone($0.observation) }
        if !separate.isEmpty {
            try await sendEach(separate, strategies: strategies, done: done, total: total, failuresInARow: &failuresInARow, report: &report)
            try await send(ready.filter { !isAlone($0.observation) }, strategies: strategies.filter { !$0.value.sentAlone }, done: done + separate.count,
                           total: total, failuresInARow: &failuresInARow, report: &report)
            return
        }
        if batchSize > 1 && strategies.values.allSatisfy({ $0.batch && $0.conditionalCreate && $0.conditionalUpdate }) {
            var start = 0
            while start < ready.count && failuresInARow < maxConsecutiveFailures {
                progress?(done + start, total)
                let chunk = Array(ready[start..<min(start + batchSize, ready.count)])
                start += chunk.count
                if try await pushBatch(chunk, report: &report) { failuresInARow = 0 } else { failuresInARow += 1 }
            }
            return
        }
        try await sendEach(ready, strategies: strategies, done: done, total: total, failuresInARow: &failuresInARow, report: &report)
    }

    /// Sends prepared items one at a time.
    func sendEach(_ ready: [(item: OutboxItem, observation: Element)], strategies: [String: Strategy], done: Int, total: Int,
                  failuresInARow: inout Int, report: inout PushReport) async throws {
        for (i, (item, observation)) in ready.enumerated() where failuresInARow < maxConsecutiveFailures {
            progress?(done + i, total)
            let identifier = item.idempotencyKey
            do {
                let location = try await deliver(observation, key: identifier, strategy: strategies[observation.resourceType ?? "Observation"]!)
                try outbox.markPushed(item.versionUUID, location: location)
                report.pushed.append((identifier, location))
                failuresInARow = 0
            } catch let error as FHIRClientError where !error.isTransient && !isGaveUp(error) {
                try outbox.markAttempt(item.versionUUID, error: error.description, dead: true)
                report.failed.append((identifier, error.description))
            } catch {
                try outbox.markAttempt(item.versionUUID, error: "\(error)", dead: false)
                report.deferred.append((identifier, "\(error)"))
                failuresInARow += 1
            }
        }
    }

    /// Sends one batch and files each entry by its own outcome: pushed, dead-lettered (refused)
    /// or left queued (408, 429, 5xx). Returns false when the whole batch failed in transit.
    func pushBatch(_ chunk: [(item: OutboxItem, observation: Element)], report: inout PushReport) async throws -> Bool {
        let bundle = export.bundle(chunk.map { ExportedObservation(observation: $0.observation, outcomeVersion: $0.item.versionUUID,
                                                                   identifier: $0.item.entityID, notes: []) }, type: "batch")
        let outcomes: [FHIRRESTClient.EntryOutcome]
        do {
            outcomes = try await client.batch(bundle)
        } catch {
            try outbox.record(chunk.map { .failed($0.item.versionUUID, error: error.description, dead: false) })
            for (item, _) in chunk { report.deferred.append((item.idempotencyKey, error.description)) }
            return false
        }
        var deliveries: [OutboxDelivery] = []
        for ((item, _), outcome) in zip(chunk, outcomes) {
            let identifier = item.idempotencyKey
            if outcome.succeeded {
                deliveries.append(.pushed(item.versionUUID, location: outcome.location))
                report.pushed.append((identifier, outcome.location))
            } else {
                let reason = "HTTP \(outcome.status)\(outcome.outcome.map { ": \($0)" } ?? "")"
                deliveries.append(.failed(item.versionUUID, error: reason, dead: !outcome.isTransient))
                if outcome.isTransient { report.deferred.append((identifier, reason)) } else { report.failed.append((identifier, reason)) }
            }
        }
        try outbox.record(deliveries)
        return true
    }

    func isGaveUp(_ error: FHIRClientError) -> Bool {
        if case .gaveUp = error { return true }
        return false
    }

    /// How the server lets us write idempotently, read from its CapabilityStatement.
    struct Strategy {
        var conditionalCreate: Bool
        var conditionalUpdate: Bool
        /// The server takes batch Bundles.
        var batch: Bool
        /// Updates may create at the id the gateway picks.
        var updateCreate = false
        /// The server finds the type by identifier (what a conditional write asks it).
        var searchable = true
        /// How an item of the type is written.
        var delivery = Delivery.byIdentifier

        /// How an item is written, and whether it can be.
        enum Delivery {
            /// Found or written by its identifier: a conditional create or update, or a search first.
            case byIdentifier
            /// A survey's transaction Bundle: its entries are conditional; sent on its own.
            case transaction
            /// At the id its payload carries (`PUT Type/<id>`, the server creating it), so a resend
            /// writes the same resource; sent on its own. An AuditEvent of `ehr.audit`.
            case atOwnID
            /// The server does not take it: each such item is dead-lettered with this reason, and
            /// the rest of the run goes on (the outcomes do not wait for the trail).
            case refused(String)
        }

        /// Sent one at a time, never in a batch with others.
        var sentAlone: Bool {
            switch delivery {
            case .transaction, .atOwnID: true
            case .byIdentifier, .refused: false
            }
        }

        init(conditionalCreate: Bool, conditionalUpdate: Bool, batch: Bool, updateCreate: Bool, searchable: Bool, delivery: Delivery = .byIdentifier) {
            (self.conditionalCreate, self.conditionalUpdate, self.batch, self.updateCreate, self.searchable) = (conditionalCreate, conditionalUpdate, batch, updateCreate, searchable)
            self.delivery = delivery
        }

        /// In a survey's transaction, a type the statement does not list (some servers list only the
        /// types they search) can be written only where the gateway picks its id, when the server
        /// lets updates create as it does for Observations; the transaction is all or nothing. An
        /// AuditEvent is written at its own id, or refused when the server cannot.
        init(_ capabilities: ServerCapabilities, type: String, inTransaction: Bool) throws(FHIRClientError) {
            if type == "AuditEvent" {
                // Written at its id (from its entry's hash); an EHR that cannot is told, and outcomes go on.
                let atID = capabilities.resources["AuditEvent"]?.updateCreate == true
                self.init(conditionalCreate: false, conditionalUpdate: false, batch: false, updateCreate: atID, searchable: false,
                          delivery: atID ? .atOwnID : .refused("the EHR does not take AuditEvents at the gateway's ids (PUT AuditEvent/<id>, update as create): turn ehr.audit off or enable it on the EHR"))
                return
            }
            if inTransaction, type != "Bundle", capabilities.resources[type] == nil, let observations = capabilities.resources["Observation"] {
                self.init(conditionalCreate: false, conditionalUpdate: false, batch: false, updateCreate: observations.updateCreate, searchable: false)
                return
            }
            try self.init(capabilities, type: type)
        }

        init(_ capabilities: ServerCapabilities, type: String) throws(FHIRClientError) {
            batch = capabilities.interactions.contains("batch")
            if type == "Bundle" {
                // A survey's response and Observations go together, or not at all.
                guard capabilities.interactions.contains("transaction") else {
                    throw .unsupported("take transaction Bundles (a survey's QuestionnaireResponse and its Observations are sent in one)")
                }
                conditionalCreate = true
                conditionalUpdate = true
                delivery = .transaction
                return
            }

            guard let listed = capabilities.resources[type] else { throw .unsupported("store \(type)s (its CapabilityStatement does not list them)") }
            guard listed.interactions.contains("create") || listed.interactions.isEmpty else { throw .unsupported("create \(type)s") }
            conditionalCreate = listed.conditionalCreate
            conditionalUpdate = listed.conditionalUpdate
            updateCreate = listed.updateCreate
            searchable = listed.searchParameters.isEmpty || listed.searchParameters.contains("identifier") || capabilities.searchParameters.contains("identifier")
            // A Provenance has no identifier: it is created once, found by its tag.
            if type != "Provenance" && !conditionalCreate && !listed.searchParameters.isEmpty && !listed.searchParameters.contains("identifier") {
                throw .unsupported("find \(type)s by identifier (neither conditional create nor an identifier search)")
            }
        }
    }

    /// Sends one resource; returns where the server keeps it.
    func deliver(_ observation: Element, key: String, strategy: Strategy) async throws(FHIRClientError) -> String? {
        let type = observation.resourceType ?? "Observation"
        switch strategy.delivery {
        case .atOwnID:
            let at = "\(type)/\(observation.string("id") ?? "")"
            return try await client.update(observation, at: at).location ?? at
        case .transaction:
            // Every entry is conditional: a transaction resent after a lost answer creates nothing twice.
            return FHIRRESTClient.entryOutcomes(try await client.transaction(observation)).first?.location
        case .byIdentifier, .refused:
            break
        }
        let query = "identifier=" + (key.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charactersIn: "|&=+"))) ?? key)
        if ExportedObservation.isFirstVersion(observation) {
            if strategy.conditionalCreate {
                return try await client.create(observation, ifNoneExist: query).location
            }
            if let existing = try await client.search(type, [("identifier", key)]).first, let id = existing.string("id") {
                return "\(type)/\(id)"
            }
            return try await client.create(observation).location
        }
        if strategy.conditionalUpdate {
            return try await client.update(observation, at: "\(type)?\(query)").location
        }
        guard let existing = try await client.search(type, [("identifier", key)]).first, let id = existing.string("id") else {
            return try await client.create(observation).location
        }
        var updated = observation
        updated.append(Element(name: "id", type: "id", value: id))
        return try await client.update(updated, at: "\(type)/\(id)").location ?? "\(type)/\(id)"
    }

    /// A Provenance naming the gateway as author of the pushed Observations.
    func provenance(targets: [String]) -> Element {
        var p = Element(resourceType: "Provenance")
        for target in targets {
            let reference = target.components(separatedBy: "/_history/").first ?? target
            let relative = ["Observation/", "MedicationAdministration/", "QuestionnaireResponse/"].lazy.compactMap { reference.range(of: $0) }.first
                .map { String(reference[$0.lowerBound...]) } ?? reference
            p.append(.reference("target", to: relative))
        }
        p.append(Element(name: "recorded", type: "instant", value: FHIRDateTime.instant(Date())))
        var agent = Element(name: "agent", type: "Provenance.agent")
        agent.append(.concept("type", ExportCoding(system: "http://terminology.hl7.org/CodeSystem/provenance-participant-type", code: "author")))
        agent.append(Element(name: "who", type: "Reference", children: [Element(name: "display", type: "string", value: "CareGate (patient-reported outcomes from a CareKit app)")]))
        p.append(agent)
        return p
    }
}
