import CareStore
import FHIR
import FHIRPath
import Foundation

/// One resource to map, with the Bundle it came in (where its references resolve) and its origin.
public struct SourcedResource: Sendable {
    /// The resource.
    public var resource: Element
    /// The Bundle holding it, when it came in one.
    public var container: Element?
    /// An index of `container`'s entries, for `resolve()`.
    public var index: BundleIndex?
    /// The file (and entry) or server it was read from.
    public var origin: String

    /// A resource read from `origin`.
    public init(resource: Element, container: Element? = nil, index: BundleIndex? = nil, origin: String) {
        self.resource = resource
        self.container = container
        self.index = index
        self.origin = origin
    }
}

/// Applies mapping files to FHIR resources: store entries per patient, and a note for every
/// skip, end, approximation and error. Knows no SQL and no HTTP: the Gateway writes the batches.
public struct MappingEngine: Sendable {
    /// The mapping files, by resource type.
    public var mappings: MappingSet
    /// The patients' time zone (clock times in Timings are in it).
    public var timeZone: TimeZone
    /// The import time: where schedules without a start begin, and the version dates.
    public var now: Date
    /// Leaves an outcome's date and values unworked (`MappedOutcome.isComplete` false) when no
    /// task mapped before it records its groups: an import completes only those it finds a task
    /// for, and most results an EHR holds match none. Off, every outcome is complete.
    public var defersUnrecordedOutcomes = false
    /// Forms read beside the mapped resources (a `--questionnaires` folder, the EHR), where
    /// survey activities find their Questionnaire when the run holds none.
    public var questionnaires = QuestionnaireCatalog()

    /// An engine mapping in `timeZone` as of `now`.
    public init(mappings: MappingSet, timeZone: TimeZone, now: Date = Date()) {
        self.mappings = mappings
        self.timeZone = timeZone
        self.now = now
    }

    /// Maps `resources` in order: each through the file for its type, into per-patient batches and
    /// notes.
    public func map(_ resources: [SourcedResource]) -> MappingOutput {
        var run = Run(mappings: mappings, scope: MappingScope(now: now, timeZone: timeZone, sources: resources, questionnaires: questionnaires), resources: resources)
        run.defersUnrecordedOutcomes = defersUnrecordedOutcomes
        return run.mapAll()
    }

    /// One mapping run: the resources in order, each through the file for its type, into
    /// per-patient batches; what the rules make comes from one mapper per store entity.
    struct Run {
        let mappings: MappingSet
        let scope: MappingScope
        let resources: [SourcedResource]
        var notes = MappingNotes()
        var output = MappingOutput()
        var batches: [String: PatientBatch] = [:]
        var order: [String] = []
        /// Task and contact ids already made, per patient (a repeated one is numbered).
        var madeIDs: [String: Set<String>] = [:]
        /// Each resource's content hash, computed once (by `Type/id`, else origin).
        var hashes: [String: String] = [:]
        var defersUnrecordedOutcomes = false
        /// Each outcome rule's share of the outcomes left unworked, by file and rule.
        var outcomeRuleScopes: [String: OutcomeRuleScope] = [:]
        /// Patients' keys by the `urn:` reference that named them and the Bundle it was resolved
        /// in: a patient's hundreds of Observations name it alike, and its key is made once.
        var patientKeys: [PatientReference: String] = [:]

        struct PatientReference: Hashable {
            let reference: String
            let bundle: ObjectIdentifier?
        }

        init(mappings: MappingSet, scope: MappingScope, resources: [SourcedResource]) {
            self.mappings = mappings
            self.scope = scope
            self.resources = resources
        }

        /// The context for a resource itself, with the run's variables.
        func context(_ source: SourcedResource, _ file: MappingFile, patientID: String = "", plan: String? = nil) -> MappingContext {
            var variables: [String: [FHIRPathValue]] = ["patient": [.string(patientID)], "index": [.integer(0)]]
            if let plan { variables["plan"] = [.string(plan)] }
            return MappingContext(scope: scope, source: source, file: file, item: source.resource, variables: variables)
        }

        /// Changes the patient's batch in place (made on first use, in first-seen order): no
        /// copy of its growing arrays per resource.
        mutating func updateBatch<T>(_ patientID: String, _ body: (inout PatientBatch) -> T) -> T {
            if batches[patientID] == nil {
                order.append(patientID)
                batches[patientID] = PatientBatch(patientID: patientID)
            }
            return body(&batches[patientID]!)
        }

        /// Where an entry came from, for its provenance; the resource is hashed once per run.
        mutating func sourceRecord(_ source: SourcedResource, _ file: MappingFile, rule: String) -> SourceRecord {
            let key = source.key ?? source.origin
            let hash: String
            if let known = hashes[key] {
                hash = known
            } else {
                hash = SourceRecord.contentHash(of: source.resource)
                hashes[key] = hash
            }
            return SourceRecord(reference: source.reference, origin: source.origin, versionID: source.resource.first("meta.versionId")?.value,
                                contentHash: hash, rule: "\(file.fileName)#\(rule)")
        }

        // MARK: Resources

        mutating func mapAll() -> MappingOutput {
            let delegated = delegatedResources()
            for source in resources {
                guard let type = source.resource.resourceType else { continue }
                guard let file = mappings.files[type] else {
                    // A Questionnaire is a survey task's form (`QuestionnaireCatalog`), not left over; so is a ValueSet of its answers.
                    if !QuestionnaireCatalog.types.contains(type) { output.unmapped[type, default: 0] += 1 }
                    continue
                }
                if let key = source.key, delegated.contains(key) { continue }
                if type == "Patient" {
                    mapPatient(source, file)
                } else {
                    mapResource(source, file, carePlanID: nil, patientID: nil, inheritedEnd: nil)
                }
            }
            output.batches = order.compactMap { batches[$0] }
            output.notes = notes.all
            return output
        }

        /// Resources a delegating rule maps inside another resource (not again on their own).
        func delegatedResources() -> Set<String> {
            var result: Set<String> = []
            for source in resources {
                guard let type = source.resource.resourceType, let file = mappings.files[type] else { continue }
                let context = context(source, file)
                for rule in file.tasks + file.contacts where rule.delegate {
                    guard let items = try? context.evaluate(rule.each) else { continue }
                    for case .element(let e) in items {
                        let target = e.isResource ? e : context.resolve(.element(e))
                        if let target, let key = target.relativeReference { result.insert(key) }
                    }
                }
            }
            return result
        }

        /// Stops a resource holding a modifierExtension the mapping does not know (FHIR forbids ignoring it).
        mutating func unknownModifier(_ source: SourcedResource, _ file: MappingFile) -> Bool {
            // The walk looks at every element of every mapped resource: the path is spelled only
            // for the modifier found.
            func find(_ e: Element, _ trail: inout [Int]) -> String? {
                for (i, child) in e.children.enumerated() {
                    if child.name == "modifierExtension", let url = child.string("url"), !file.knownModifiers.contains(url) {
                        trail.append(i)
                        return url
                    }
                    guard !child.isResource, !child.children.isEmpty else { continue }
                    trail.append(i)
                    if let url = find(child, &trail) { return url }
                    trail.removeLast()
                }
                return nil
            }
            var trail: [Int] = []
            guard let url = find(source.resource, &trail) else { return false }
            var path = source.resource.resourceType ?? source.resource.name
            var element = source.resource
            for i in trail {
                let child = element.children[i]
                let n = element.children[..<i].count { $0.name == child.name }
                path += ".\(child.name)[\(n)]"
                element = child
            }
            notes.add(.error, source, path, "a modifierExtension CareGate does not know (\(url)) may change what the resource means; the resource is not imported (list the url under known-modifiers once the mapping handles it)")
            return true
        }

        mutating func mapPatient(_ source: SourcedResource, _ file: MappingFile) {
            if unknownModifier(source, file) { return }
            let context = context(source, file)
            if let skip = context.firstMatch(file.skip, path: nil, notes: &notes) {
                notes.add(.skipped, source, nil, skip.reason ?? "a skip rule matched")
                return
            }
            // A record replaced by another: the other is the patient.
            for link in source.resource.children(named: "link") where link.string("type") == "replaced-by" {
                notes.add(.warning, source, "link", "this record is replaced by \(link.first("other.reference")?.value ?? "another"); import that record instead")
                return
            }
            let record = sourceRecord(source, file, rule: "patient-fields")
            guard let patient = PatientMapper(context: context).make(record: record, notes: &notes) else { return }
            updateBatch(patient.id) { $0.patient = patient }
        }

        /// The store id of the patient a resource belongs to.
        mutating func patientID(_ context: MappingContext) -> String? {
            let source = context.source
            guard let expression = context.file.patient else { return nil }
            do {
                guard let first = try context.evaluate(expression).first else {
                    notes.add(.error, source, nil, "no patient: \(expression.text) is empty")
                    return nil
                }
                var reference: String?
                if case .element(let e) = first {
                    if e.resourceType == "Patient" { return patientKey(e, source) }
                    reference = e.isPrimitive ? e.value : e.string("reference")
                } else if case .string(let s) = first {
                    reference = s
                }
                guard let reference else {
                    notes.add(.error, source, nil, "no patient: \(expression.text) has no reference")
                    return nil
                }
                // A `urn:` reference names the same resource wherever in its Bundle it is written.
                let known = reference.hasPrefix("urn:") ? PatientReference(reference: reference, bundle: source.index.map(ObjectIdentifier.init)) : nil
                if let known, let key = patientKeys[known] { return key }
                if let resolved = context.resolve(.string(reference)), resolved.resourceType == "Patient" {
                    let key = patientKey(resolved, source)
                    if let known, let key { patientKeys[known] = key }
                    return key
                }
                if let key = Element.relativeReference(of: reference), key.hasPrefix("Patient/") { return key }
                notes.add(.error, source, nil, "the patient \(reference) is not in the imported data, and the reference names no Patient id")
                return nil
            } catch {
                notes.failed(source, nil, "patient", error)
                return nil
            }
        }

        /// The store id the Patient mapping gives a Patient resource.
        /// The store id of a Patient resource, as the Patient mapping makes it; nil, with a note,
        /// for a Patient without an id (see `PatientMapper.namesOne`).
        mutating func patientKey(_ patient: Element, _ source: SourcedResource) -> String? {
            var key = patient.string("id").map { "Patient/\($0)" } ?? "Patient/"
            if let file = mappings.files["Patient"] {
                let inner = SourcedResource(resource: patient, container: source.container, index: source.index, origin: source.origin)
                if let id = try? context(inner, file).string(file.patientFields["id"]) { key = id }
            }
            guard PatientMapper.namesOne(key) else {
                notes.add(.error, source, nil, "its patient: " + PatientMapper.unnamed(key))
                return nil
            }
            return key
        }

        /// Maps a resource (on its own, or inside a care plan when `carePlanID` is given).
        mutating func mapResource(_ source: SourcedResource, _ file: MappingFile, carePlanID: String?, patientID given: String?, inheritedEnd: MappingCondition?) {
            if unknownModifier(source, file) { return }
            // Store ids are made from the resource's id: without one, two such resources would be
            // one entry (`CarePlan/`), as two Patients without an id would be one patient.
            guard source.key != nil else {
                notes.add(.error, source, nil, "the \(file.resource) has no id to tell it from others, so nothing of it is imported (give it the EHR's id)")
                return
            }
            let resourceContext = context(source, file)
            if inheritedEnd == nil, let skip = resourceContext.firstMatch(file.skip, path: nil, notes: &notes) {
                notes.add(.skipped, source, nil, skip.reason ?? "a skip rule matched")
                return
            }
            guard let patientID = given ?? patientID(resourceContext) else { return }
            let ending = inheritedEnd ?? resourceContext.firstMatch(file.end, path: nil, notes: &notes)
            // The care plan: this resource's own, unless it is mapped inside another's.
            let planID = carePlanID ?? (file.carePlan["id"] == nil ? nil : ownCarePlan(source, file, patientID: patientID, ending: ending))
            if let ending {
                notes.add(ending.delete ? .deleted : .ended, source, nil, ending.reason ?? "an end rule matched")
            }
            for rule in file.tasks { mapRule(rule, source, file, patientID: patientID, planID: planID, ending: ending) }
            for rule in file.contacts { mapRule(rule, source, file, patientID: patientID, planID: planID, ending: ending) }
            if ending == nil, !file.outcomes.isEmpty {
                // The groups this patient's tasks mapped so far record, when outcomes no task records wait.
                let recorded = defersUnrecordedOutcomes ? Set(batches[patientID]?.tasks.compactMap(\.task.version.groupIdentifier) ?? []) : nil
                for rule in file.outcomes {
                    // Most outcomes match no task and are never stored: the content hash (a
                    // serialisation of the resource) is worked out when one is (`MappedOutcome.recorded`).
                    let record = SourceRecord(reference: source.reference, origin: source.origin, versionID: source.resource.first("meta.versionId")?.value,
                                              contentHash: "", rule: "\(file.fileName)#\(rule.name)")
                    var mapper = OutcomeMapper(rule: rule, context: context(source, file, patientID: patientID))
                    if let recorded { mapper.deferral = .init(recorded: recorded, shared: outcomeRuleScope(rule, file)) }
                    var mapped = mapper.map(record: record, notes: &notes)
                    for i in mapped.indices { mapped[i].resource = source.resource }
                    updateBatch(patientID) { $0.outcomes += mapped }
                }
            }
        }

        /// What a rule's outcomes left unworked share: made once per rule in a run.
        mutating func outcomeRuleScope(_ rule: MappingRule, _ file: MappingFile) -> OutcomeRuleScope {
            let key = file.path + "#" + rule.name
            if let made = outcomeRuleScopes[key] { return made }
            let made = OutcomeRuleScope(rule: rule, file: file, scope: scope)
            outcomeRuleScopes[key] = made
            return made
        }

        /// The resource's own care plan (its `care-plan` block): added to the batch, or ended
        /// with the resource; nil when the file makes none.
        mutating func ownCarePlan(_ source: SourcedResource, _ file: MappingFile, patientID: String, ending: MappingCondition?) -> String? {
            let mapper = CarePlanMapper(context: context(source, file, patientID: patientID))
            do {
                guard let id = try mapper.id() else {
                    updateBatch(patientID) { _ in }
                    return nil
                }
                if let ending {
                    // A Medications or Requests plan is shared by other resources: only a resource's own plan ends.
                    let end = EndRequest(type: .carePlan, id: id, delete: ending.delete, reason: ending.reason ?? "an end rule matched", source: source.key ?? "")
                    updateBatch(patientID) { if file.resource == "CarePlan" { $0.ends.append(end) } }
                } else if !updateBatch(patientID, { batch in batch.carePlans.contains { $0.plan.id == id } }) {
                    let plan = try mapper.make(id: id, patientID: patientID, record: sourceRecord(source, file, rule: "care-plan"))
                    updateBatch(patientID) { $0.carePlans.append(plan) }
                }
                return id
            } catch {
                notes.failed(source, nil, "care-plan", error)
                return nil
            }
        }

        // MARK: Rules

        mutating func mapRule(_ rule: MappingRule, _ source: SourcedResource, _ file: MappingFile, patientID: String, planID: String?, ending: MappingCondition?) {
            let context = context(source, file, patientID: patientID, plan: planID)
            let items: [Element]
            do {
                items = rule.each == nil ? [source.resource] : try context.evaluate(rule.each).compactMap(\.element)
            } catch {
                notes.failed(source, nil, "'each' of \(rule.name)", error)
                return
            }
            for (index, element) in items.enumerated() {
                let kind = mapItem(rule, context.with(item: element, index: index), index: index, patientID: patientID, planID: planID, ending: ending)
                output.dispositions.append(ItemDisposition(resource: source.reference, rule: rule.name, index: index, kind: kind))
            }
        }

        /// Maps one item of a rule's `each`; says what became of it.
        mutating func mapItem(_ rule: MappingRule, _ context: MappingContext, index: Int, patientID: String, planID: String?,
                              ending: MappingCondition?) -> ItemDisposition.Kind {
            let source = context.source
            let path = rule.each.map { "\($0.text)[\(index)]" }
            if rule.delegate { return delegate(context, path: path, patientID: patientID, planID: planID, ending: ending) }
            if let skip = context.firstMatch(rule.skip, path: path, notes: &notes) {
                notes.add(.skipped, source, path, skip.reason ?? "a skip rule matched")
                return .skipped
            }
            let type: EntityType = rule.kind == .contact ? .contact : .task
            guard let id = itemID(rule, context, type: type, path: path, patientID: patientID) else { return .failed }
            if let end = ending ?? context.firstMatch(rule.end, path: path, notes: &notes) {
                let request = EndRequest(type: type, id: id, delete: end.delete, reason: end.reason ?? "an end rule matched", source: source.key ?? "")
                updateBatch(patientID) { if !$0.ends.contains(request) { $0.ends.append(request) } }
                if ending == nil { notes.add(end.delete ? .deleted : .ended, source, path, end.reason ?? "an end rule matched") }
                return .ended(id)
            }
            let record = sourceRecord(source, context.file, rule: rule.name)
            do {
                if rule.kind == .task {
                    guard let planID else {
                        notes.add(.error, source, path, "no care plan for the task (the mapping has no care-plan id)")
                        return .failed
                    }
                    let survey = surveyForm(rule, context, path: path)
                    if case .missing = survey { return .unresolved }
                    guard let (task, startsAtAnchor) = try TaskMapper(rule: rule, context: context).make(id: id, path: path, record: record, notes: &notes) else {
                        return .failed
                    }
                    var made = MappedTask(task: task, carePlanID: planID, source: record, startsAtAnchor: startsAtAnchor)
                    if case .found(let form, let questionnaire) = survey { Self.ask(questionnaire, form, in: &made) }
                    updateBatch(patientID) { $0.tasks.append(made) }
                } else {
                    let contact = try ContactMapper(rule: rule, context: context).make(id: id, record: record)
                    updateBatch(patientID) { $0.contacts.append(MappedContact(contact: contact, carePlanID: planID, source: record)) }
                }
                return .made(id)
            } catch {
                notes.failed(source, path, rule.name, error)
                return .failed
            }
        }

        /// The item's store id; one made already for this patient is numbered (`id#2`), so every item is kept.
        mutating func itemID(_ rule: MappingRule, _ context: MappingContext, type: EntityType, path: String?, patientID: String) -> String? {
            var id: String
            do {
                guard let value = try context.string(rule.fields["id"]) else {
                    notes.add(.error, context.source, path, "the id expression of \(rule.name) gave nothing")
                    return nil
                }
                id = value
            } catch {
                notes.failed(context.source, path, "id", error)
                return nil
            }
            // Real data repeats codes (two activities with one code, two dosages with one
            // sequence): number the later ones, in document order.
            if madeIDs[patientID, default: []].contains("\(type.rawValue)/\(id)") {
                var n = 2
                while madeIDs[patientID, default: []].contains("\(type.rawValue)/\(id)#\(n)") { n += 1 }
                notes.add(.warning, context.source, path, "\(rule.name) gives the id '\(id)' a second time; this one is '\(id)#\(n)'")
                id = "\(id)#\(n)"
            }
            madeIDs[patientID, default: []].insert("\(type.rawValue)/\(id)")
            return id
        }

        /// A delegating rule's item (a Reference, resolved here so that one to nothing imported
        /// is reported, or a resource) is mapped with the file for its type, inside this care plan.
        mutating func delegate(_ context: MappingContext, path: String?, patientID: String, planID: String?, ending: MappingCondition?) -> ItemDisposition.Kind {
            let source = context.source
            var item = context.item
            if !item.isResource {
                guard let resolved = context.resolve() else {
                    let reference = item.string("reference") ?? item.string("display") ?? "a reference without a target"
                    notes.add(.warning, source, path, "\(reference) is not in the imported data; what it names is not imported")
                    return .unresolved
                }
                item = resolved
            }
            guard let type = item.resourceType else { return .unresolved }
            guard let file = mappings.files[type] else {
                notes.add(.warning, source, path, "\(type) has no mapping file: the referenced resource is not imported")
                return .unresolved
            }
            let inner = SourcedResource(resource: item, container: source.container, index: source.index,
                                        origin: item.relativeReference.flatMap { scope.origins[$0] } ?? source.origin)
            // When the plan ends, so does what its references made.
            mapResource(inner, file, carePlanID: planID, patientID: patientID, inheritedEnd: ending)
            return .delegated(item.relativeReference ?? type)
        }
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
