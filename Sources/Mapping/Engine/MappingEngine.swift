import CareStore
import FHIR
import FHIRPath
import Foundation

/// One resource to map, with the Bundle it came in (where its references resolve) and its origin.
public struct SourcedResource: Sendable {
    public var resource: Element
    /// The Bundle holding it, when it came in one.
    public var container: Element?
    public var index: BundleIndex?
    /// The file (and entry) or server it was read from.
    public var origin: String

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
    public var mappings: MappingSet
    /// The patients' time zone (clock times in Timings are in it).
    public var timeZone: TimeZone
    /// The import time: where schedules without a start begin, and the version dates.
    public var now: Date

    public init(mappings: MappingSet, timeZone: TimeZone, now: Date = Date()) {
        self.mappings = mappings
        self.timeZone = timeZone
        self.now = now
    }

    public func map(_ resources: [SourcedResource]) -> MappingOutput {
        var run = Run(engine: self, resources: resources)
        return run.mapAll()
    }

    /// A resource's identity across files: `Type/id`.
    static func key(_ resource: Element) -> String? {
        guard let type = resource.resourceType, let id = resource.string("id") else { return nil }
        return "\(type)/\(id)"
    }

    struct Run {
        let engine: MappingEngine
        let resources: [SourcedResource]
        /// Every resource by `Type/id`, for references between files.
        let global: [String: Element]
        /// Where each resource was read from, by `Type/id`.
        let origins: [String: String]
        var output = MappingOutput()
        var batches: [String: PatientBatch] = [:]
        var order: [String] = []
        /// Task and contact ids already made, per patient (a second one is reported, not written).
        var madeIDs: [String: Set<String>] = [:]

        init(engine: MappingEngine, resources: [SourcedResource]) {
            self.engine = engine
            self.resources = resources
            var global: [String: Element] = [:]
            var origins: [String: String] = [:]
            for r in resources {
                guard let key = MappingEngine.key(r.resource) else { continue }
                global[key] = global[key] ?? r.resource
                origins[key] = origins[key] ?? r.origin
            }
            self.global = global
            self.origins = origins
        }

        /// CareKit's calendar (Gregorian, weeks from Sunday) in the patients' time zone.
        var calendar: Calendar { Schedule.calendar(engine.timeZone) }

        // MARK: Evaluation

        func environment(_ item: Element, in source: SourcedResource, variables: [String: [FHIRPathValue]]) -> EvaluationEnvironment {
            var environment = EvaluationEnvironment(context: [.element(item)], resource: source.resource, rootResource: source.container ?? source.resource,
                                                    variables: variables)
            environment.bundleIndex = source.index
            environment.now = engine.now
            let global = self.global
            environment.resolveReference = { reference in
                if let found = global[reference] { return found }
                var parts = reference.split(separator: "/")
                if let history = parts.lastIndex(of: "_history") { parts = Array(parts[..<history]) }
                guard parts.count >= 2 else { return nil }
                return global["\(parts[parts.count - 2])/\(parts[parts.count - 1])"]
            }
            return environment
        }

        func evaluate(_ e: MappingExpression, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]]) throws(FHIRPathError) -> [FHIRPathValue] {
            guard let compiled = e.compiled else { return [] }
            return try compiled.evaluate(in: environment(item, in: source, variables: variables))
        }

        func string(_ e: MappingExpression?, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]]) throws(FHIRPathError) -> String? {
            guard let e else { return nil }
            guard let first = try evaluate(e, item, source, variables).first else { return nil }
            if case .string(let s) = first.systemValue { return s.isEmpty ? nil : s }
            return first.element?.value ?? first.systemValue.literalText
        }

        func strings(_ e: MappingExpression?, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]]) throws(FHIRPathError) -> [String] {
            guard let e else { return [] }
            return try evaluate(e, item, source, variables).compactMap { value -> String? in
                if case .string(let s) = value.systemValue { return s }
                return value.element?.value
            }
        }

        func boolean(_ e: MappingExpression?, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]]) throws(FHIRPathError) -> Bool? {
            guard let e else { return nil }
            let result = try evaluate(e, item, source, variables)
            guard let first = result.first else { return false }
            if case .boolean(let b) = first.systemValue { return b }
            return true
        }

        func date(_ e: MappingExpression?, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]]) throws(FHIRPathError) -> Date? {
            guard let e, let first = try evaluate(e, item, source, variables).first else { return nil }
            switch first.systemValue {
            case .date(let d), .dateTime(let d): return FHIRDateTime(d.description)?.start(in: engine.timeZone)
            default: return nil
            }
        }

        // MARK: Notes

        mutating func note(_ kind: ImportNote.Kind, _ source: SourcedResource, _ path: String?, _ message: String) {
            output.notes.append(ImportNote(kind: kind, resource: MappingEngine.key(source.resource) ?? source.resource.name, path: path, origin: source.origin, message: message))
        }

        mutating func failed(_ source: SourcedResource, _ path: String?, _ what: String, _ error: FHIRPathError) {
            note(.error, source, path, "\(what): \(error.message) (expression position \(error.position))")
        }

        mutating func batch(_ patientID: String) -> PatientBatch {
            if let existing = batches[patientID] { return existing }
            order.append(patientID)
            return PatientBatch(patientID: patientID)
        }

        mutating func store(_ batch: PatientBatch) { batches[batch.patientID] = batch }

        // MARK: Mapping

        mutating func mapAll() -> MappingOutput {
            let delegated = delegatedResources()
            for source in resources {
                let resource = source.resource
                guard let type = resource.resourceType else { continue }
                guard let file = engine.mappings.files[type] else {
                    output.unmapped[type, default: 0] += 1
                    continue
                }
                if let key = MappingEngine.key(resource), delegated.contains(key) { continue }
                if type == "Patient" {
                    mapPatient(source, file)
                } else {
                    mapResource(source, file, carePlanID: nil, patientID: nil, inheritedEnd: nil)
                }
            }
            output.batches = order.compactMap { batches[$0] }
            return output
        }

        /// Resources a delegating rule maps inside another resource (not again on their own).
        func delegatedResources() -> Set<String> {
            var result: Set<String> = []
            for source in resources {
                guard let type = source.resource.resourceType, let file = engine.mappings.files[type] else { continue }
                for rule in file.tasks + file.contacts where rule.delegate {
                    guard let each = rule.each, let items = try? evaluate(each, source.resource, source, baseVariables(patientID: "", plan: nil)) else { continue }
                    for case .element(let e) in items {
                        let target = e.isResource ? e : resolve(e, source)
                        if let target, let key = MappingEngine.key(target) { result.insert(key) }
                    }
                }
            }
            return result
        }

        /// The resource a Reference names: contained, in the Bundle, or in another imported file.
        func resolve(_ reference: Element, _ source: SourcedResource) -> Element? {
            var environment = environment(reference, in: source, variables: [:])
            environment.context = [.element(reference)]
            return (try? FHIRPathExpression("resolve()").evaluate(in: environment))?.first?.element
        }

        func baseVariables(patientID: String, plan: String?, index: Int = 0) -> [String: [FHIRPathValue]] {
            var v: [String: [FHIRPathValue]] = ["patient": [.string(patientID)], "index": [.integer(index)]]
            if let plan { v["plan"] = [.string(plan)] }
            return v
        }

        func sourceRecord(_ source: SourcedResource, _ file: MappingFile, rule: String) -> SourceRecord {
            let json = FHIRJSONWriter(pretty: false).write(source.resource)
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325
            for b in json { hash = (hash ^ UInt64(b)) &* 0x100_0000_01b3 }
            return SourceRecord(reference: MappingEngine.key(source.resource) ?? source.resource.name, origin: source.origin,
                                versionID: source.resource.first("meta.versionId")?.value,
                                contentHash: String(hash, radix: 16), rule: "\(MappingSource.fileName(file.path))#\(rule)")
        }

        /// The first skip rule that matches, or nil.
        mutating func firstMatch(_ rules: [MappingCondition], _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]], path: String?) -> MappingCondition? {
            for rule in rules {
                do {
                    if try boolean(rule.test, item, source, variables) == true { return rule }
                } catch {
                    failed(source, path, "the condition at \(rule.location)", error)
                }
            }
            return nil
        }

        /// Stops a resource holding a modifierExtension the mapping does not know (FHIR forbids ignoring it).
        mutating func unknownModifier(_ source: SourcedResource, _ file: MappingFile) -> Bool {
            var found: [(String, String)] = []
            func walk(_ e: Element, _ path: String) {
                var counts: [String: Int] = [:]
                for child in e.children {
                    let i = counts[child.name, default: 0]
                    counts[child.name] = i + 1
                    let here = "\(path).\(child.name)[\(i)]"
                    if child.name == "modifierExtension", let url = child.string("url"), !file.knownModifiers.contains(url) {
                        found.append((here, url))
                    } else if !child.isResource {
                        walk(child, here)
                    }
                }
            }
            walk(source.resource, source.resource.resourceType ?? source.resource.name)
            guard let (path, url) = found.first else { return false }
            note(.error, source, path, "a modifierExtension CareGate does not know (\(url)) may change what the resource means; the resource is not imported (list the url under known-modifiers once the mapping handles it)")
            return true
        }

        mutating func mapPatient(_ source: SourcedResource, _ file: MappingFile) {
            let resource = source.resource
            if unknownModifier(source, file) { return }
            if let skip = firstMatch(file.skip, resource, source, [:], path: nil) {
                note(.skipped, source, nil, skip.reason ?? "a skip rule matched")
                return
            }
            // A record replaced by another: the other is the patient.
            for link in resource.children(named: "link") where link.string("type") == "replaced-by" {
                note(.warning, source, "link", "this record is replaced by \(link.first("other.reference")?.value ?? "another"); import that record instead")
                return
            }
            do {
                let variables = baseVariables(patientID: "", plan: nil)
                guard let id = try string(file.patientFields["id"], resource, source, variables) else {
                    note(.error, source, nil, "the patient id expression gave nothing")
                    return
                }
                var name = PersonName()
                name.givenName = try strings(file.patientFields["given"], resource, source, variables).joined(separator: " ").nilIfEmpty
                name.familyName = try string(file.patientFields["family"], resource, source, variables)
                var patient = Patient(id: id, name: name, effectiveDate: calendar.startOfDay(for: engine.now), timezone: engine.timeZone)
                patient.sex = try string(file.patientFields["sex"], resource, source, variables)
                patient.birthday = try date(file.patientFields["birthday"], resource, source, variables)
                let allergies = try strings(file.patientFields["allergies"], resource, source, variables)
                patient.allergies = allergies.isEmpty ? nil : allergies
                let record = sourceRecord(source, file, rule: "patient-fields")
                patient.version.remoteID = record.reference
                patient.version.userInfo = record.userInfo
                patient.version.source = VersionInfo.importedFromEHR
                var b = batch(id)
                b.patient = patient
                store(b)
            } catch {
                failed(source, nil, "patient-fields", error)
            }
        }

        /// The store id of the patient a resource belongs to.
        mutating func patientID(_ source: SourcedResource, _ file: MappingFile) -> String? {
            guard let expression = file.patient else { return nil }
            do {
                let result = try evaluate(expression, source.resource, source, [:])
                guard let first = result.first else {
                    note(.error, source, nil, "no patient: \(expression.text) is empty")
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
                    note(.error, source, nil, "no patient: \(expression.text) has no reference")
                    return nil
                }
                var environment = environment(source.resource, in: source, variables: [:])
                environment.context = [.string(reference)]
                if let resolved = try FHIRPathExpression("resolve()").evaluate(in: environment).first?.element, resolved.resourceType == "Patient" {
                    return patientKey(resolved, source)
                }
                var parts = reference.split(separator: "/")
                if let history = parts.lastIndex(of: "_history") { parts = Array(parts[..<history]) }
                if parts.count >= 2, parts[parts.count - 2] == "Patient" { return "Patient/\(parts[parts.count - 1])" }
                note(.error, source, nil, "the patient \(reference) is not in the imported data, and the reference names no Patient id")
                return nil
            } catch {
                failed(source, nil, "patient", error)
                return nil
            }
        }

        /// The store id the Patient mapping gives a Patient resource.
        func patientKey(_ patient: Element, _ source: SourcedResource) -> String? {
            if let file = engine.mappings.files["Patient"], let e = file.patientFields["id"],
               let id = try? string(e, patient, SourcedResource(resource: patient, container: source.container, index: source.index, origin: source.origin), [:]) {
                return id
            }
            return patient.string("id").map { "Patient/\($0)" }
        }

        /// Maps a resource (on its own, or inside a care plan when `carePlanID` is given).
        mutating func mapResource(_ source: SourcedResource, _ file: MappingFile, carePlanID: String?, patientID given: String?, inheritedEnd: MappingCondition?) {
            let resource = source.resource
            if unknownModifier(source, file) { return }
            if inheritedEnd == nil, let skip = firstMatch(file.skip, resource, source, [:], path: nil) {
                note(.skipped, source, nil, skip.reason ?? "a skip rule matched")
                return
            }
            guard let patientID = given ?? patientID(source, file) else { return }
            var b = batch(patientID)
            let ending = inheritedEnd ?? firstMatch(file.end, resource, source, [:], path: nil)
            // The care plan: this resource's own, unless it is mapped inside another's.
            var planID = carePlanID
            if carePlanID == nil, let idExpression = file.carePlan["id"] {
                do {
                    let variables = baseVariables(patientID: patientID, plan: nil)
                    if let id = try string(idExpression, resource, source, variables) {
                        planID = id
                        if let ending {
                            // A Medications or Requests plan is shared by other resources: only a resource's own plan ends.
                            if file.resource == "CarePlan" {
                                b.ends.append(EndRequest(type: .carePlan, id: id, delete: ending.delete, reason: ending.reason ?? "an end rule matched", source: MappingEngine.key(resource) ?? ""))
                            }
                        } else if !b.carePlans.contains(where: { $0.plan.id == id }) {
                            let title = try string(file.carePlan["title"], resource, source, variables) ?? "Care plan"
                            var plan = CarePlan(id: id, title: title, patientUUID: nil, effectiveDate: calendar.startOfDay(for: engine.now), timezone: engine.timeZone)
                            let record = sourceRecord(source, file, rule: "care-plan")
                            if file.resource == "CarePlan" {
                                plan.version.remoteID = record.reference
                                plan.version.userInfo = record.userInfo
                            }
                            plan.version.source = VersionInfo.importedFromEHR
                            b.carePlans.append(MappedCarePlan(plan: plan, patientID: patientID, source: record))
                        }
                    }
                } catch {
                    failed(source, nil, "care-plan", error)
                }
            }
            if let ending {
                note(ending.delete ? .deleted : .ended, source, nil, ending.reason ?? "an end rule matched")
            }
            store(b)
            for rule in file.tasks { mapRule(rule, source, file, patientID: patientID, planID: planID, ending: ending) }
            for rule in file.contacts { mapRule(rule, source, file, patientID: patientID, planID: planID, ending: ending) }
            if ending == nil {
                for rule in file.outcomes { mapOutcome(rule, source, file, patientID: patientID) }
            }
        }

        mutating func mapRule(_ rule: MappingRule, _ source: SourcedResource, _ file: MappingFile, patientID: String, planID: String?, ending: MappingCondition?) {
            let resource = source.resource
            let items: [Element]
            do {
                if let each = rule.each {
                    items = try evaluate(each, resource, source, baseVariables(patientID: patientID, plan: planID)).compactMap(\.element)
                } else {
                    items = [resource]
                }
            } catch {
                failed(source, nil, "'each' of \(rule.name)", error)
                return
            }
            for (index, element) in items.enumerated() {
                let kind = mapItem(rule, source, file, element, index: index, patientID: patientID, planID: planID, ending: ending)
                output.dispositions.append(ItemDisposition(resource: MappingEngine.key(resource) ?? resource.name, rule: rule.name, index: index, kind: kind))
            }
        }

        /// Maps one item of a rule's `each`; says what became of it.
        mutating func mapItem(_ rule: MappingRule, _ source: SourcedResource, _ file: MappingFile, _ element: Element, index: Int,
                              patientID: String, planID: String?, ending: MappingCondition?) -> ItemDisposition.Kind {
            let resource = source.resource
            let path = rule.each == nil ? nil : "\(rule.each!.text)[\(index)]"
            var item = element
            if rule.delegate {
                // A Reference is resolved here, so that one to nothing imported is reported.
                if !item.isResource {
                    guard let resolved = resolve(item, source) else {
                        let reference = item.string("reference") ?? item.string("display") ?? "a reference without a target"
                        note(.warning, source, path, "\(reference) is not in the imported data; what it names is not imported")
                        return .unresolved
                    }
                    item = resolved
                }
                guard let type = item.resourceType else { return .unresolved }
                guard let file = engine.mappings.files[type] else {
                    note(.warning, source, path, "\(type) has no mapping file: the referenced resource is not imported")
                    return .unresolved
                }
                let inner = SourcedResource(resource: item, container: source.container, index: source.index,
                                            origin: MappingEngine.key(item).flatMap { origins[$0] } ?? source.origin)
                // When the plan ends, so does what its references made.
                mapResource(inner, file, carePlanID: planID, patientID: patientID, inheritedEnd: ending)
                return .delegated(MappingEngine.key(item) ?? type)
            }
            let variables = baseVariables(patientID: patientID, plan: planID, index: index)
            if let skip = firstMatch(rule.skip, item, source, variables, path: path) {
                note(.skipped, source, path, skip.reason ?? "a skip rule matched")
                return .skipped
            }
            var id: String
            do {
                guard let value = try string(rule.fields["id"], item, source, variables) else {
                    note(.error, source, path, "the id expression of \(rule.name) gave nothing")
                    return .failed
                }
                id = value
            } catch {
                failed(source, path, "id", error)
                return .failed
            }
            let type: EntityType = rule.kind == .contact ? .contact : .task
            if madeIDs[patientID, default: []].contains("\(type.rawValue)/\(id)") {
                // Real data repeats codes (two activities with one code, two dosages with one
                // sequence): number the later ones, in document order, so every item is kept.
                var n = 2
                while madeIDs[patientID, default: []].contains("\(type.rawValue)/\(id)#\(n)") { n += 1 }
                note(.warning, source, path, "\(rule.name) gives the id '\(id)' a second time; this one is '\(id)#\(n)'")
                id = "\(id)#\(n)"
            }
            madeIDs[patientID, default: []].insert("\(type.rawValue)/\(id)")
            if let ending {
                appendEnd(EndRequest(type: type, id: id, delete: ending.delete, reason: ending.reason ?? "an end rule matched", source: MappingEngine.key(resource) ?? ""), patientID)
                return .ended(id)
            }
            if let itemEnd = firstMatch(rule.end, item, source, variables, path: path) {
                appendEnd(EndRequest(type: type, id: id, delete: itemEnd.delete, reason: itemEnd.reason ?? "an end rule matched", source: MappingEngine.key(resource) ?? ""), patientID)
                note(itemEnd.delete ? .deleted : .ended, source, path, itemEnd.reason ?? "an end rule matched")
                return .ended(id)
            }
            let record = sourceRecord(source, file, rule: rule.name)
            do {
                if rule.kind == .task {
                    guard let planID else {
                        note(.error, source, path, "no care plan for the task (the mapping has no care-plan id)")
                        return .failed
                    }
                    guard let task = try makeTask(rule, id: id, item: item, source: source, variables: variables, path: path, record: record) else { return .failed }
                    var b = batch(patientID)
                    b.tasks.append(MappedTask(task: task, carePlanID: planID, source: record))
                    store(b)
                    return .made(id)
                } else {
                    let contact = try makeContact(rule, id: id, item: item, source: source, variables: variables, record: record)
                    var b = batch(patientID)
                    b.contacts.append(MappedContact(contact: contact, carePlanID: planID, source: record))
                    store(b)
                    return .made(id)
                }
            } catch {
                failed(source, path, rule.name, error)
                return .failed
            }
        }

        mutating func appendEnd(_ end: EndRequest, _ patientID: String) {
            var b = batch(patientID)
            if !b.ends.contains(end) { b.ends.append(end) }
            store(b)
        }

        // MARK: Tasks

        mutating func makeTask(_ rule: MappingRule, id: String, item: Element, source: SourcedResource, variables: [String: [FHIRPathValue]],
                               path: String?, record: SourceRecord) throws(FHIRPathError) -> CareTask? {
            let anchor = try date(rule.fields["anchor"], item, source, variables) ?? calendar.startOfDay(for: engine.now)
            let asNeeded = try boolean(rule.fields["as-needed"], item, source, variables) ?? false
            let title = try string(rule.fields["title"], item, source, variables)
            let targets = try targetValues(rule.fields["targets"], item, source, variables, file: fileFor(rule))
            let converter = TimingConverter(tables: fileFor(rule)?.tables.timing ?? .standard, timeZone: engine.timeZone)
            var scheduled: ScheduledTiming
            let timing = try rule.fields["timing"].map { e throws(FHIRPathError) in try evaluate(e, item, source, variables) } ?? []
            let timingPath = [path, rule.fields["timing"]?.text].compactMap { $0 }.joined(separator: " ")
            if asNeeded {
                scheduled = converter.asNeeded(start: anchor)
                if let first = timing.first, case .element(let e) = first, e.typeName == "Timing", R4.Timing(unchecked: e).repeat?.frequency != nil {
                    note(.loss, source, timingPath, "as needed: the Timing is read as the most allowed, not a schedule")
                }
            } else {
                scheduled = schedule(timing.first, anchor: anchor, converter: converter, targets: targets)
            }
            for loss in scheduled.losses { note(.loss, source, "\(timingPath) \(loss.path)", loss.message) }
            if scheduled.elements.isEmpty {
                // Nothing to schedule (an unknown code, a one-off in the past): a daily all-day task, reported.
                note(.loss, source, timingPath, "\(scheduled.unschedulable ?? "no schedule"): a daily task at any time instead")
                scheduled = ScheduledTiming(elements: [ScheduleElement(start: calendar.startOfDay(for: anchor), interval: DateComponents(day: 1), text: nil,
                                                                        duration: .allDay, targetValues: targets, calendar: calendar)], losses: [])
            }
            guard let schedule = scheduled.schedule else {
                note(.error, source, path, "the schedule could not be built")
                return nil
            }
            var task = CareTask(id: id, title: title, carePlanUUID: nil, schedule: schedule,
                                impactsAdherence: try boolean(rule.fields["impacts-adherence"], item, source, variables) ?? !asNeeded, timezone: engine.timeZone)
            task.instructions = try string(rule.fields["instructions"], item, source, variables)
            // From the first occurrence's day, so that recorded history (Observations) can attach.
            task.version.effectiveDate = calendar.startOfDay(for: schedule.startDate ?? anchor)
            task.version.groupIdentifier = try string(rule.fields["group"], item, source, variables)
            var tags: [String] = []
            for e in rule.lists["tags"] ?? [] { tags += try strings(e, item, source, variables) }
            task.version.tags = tags.isEmpty ? nil : tags
            task.version.remoteID = record.reference
            task.version.userInfo = record.userInfo
            task.version.source = VersionInfo.importedFromEHR
            // The site's words for the task's code, over what the expressions gave.
            if let lookup = rule.lookups["code-table"], let table = fileFor(rule)?.tables.taskCodes {
                for key in try strings(lookup.key, item, source, variables) {
                    guard let entry = table[key] else { continue }
                    if let title = entry.title { task.title = title }
                    if let instructions = entry.instructions { task.instructions = instructions }
                    if let group = entry.group { task.version.groupIdentifier = group }
                    if let impacts = entry.impactsAdherence { task.impactsAdherence = impacts }
                    break
                }
            }
            if let lookup = rule.lookups["healthkit"] {
                for key in try strings(lookup.key, item, source, variables) {
                    if let linkage = fileFor(rule)?.tables.healthKit[key] {
                        task.healthKitLinkage = linkage
                        break
                    }
                }
            }
            return task
        }


        /// The file a rule belongs to.
        func fileFor(_ rule: MappingRule) -> MappingFile? {
            engine.mappings.files.values.first { file in file.allRules.contains { $0.location == rule.location && $0.name == rule.name } }
        }

        /// The label for a unit: the mapping's `units` table for the UCUM code, else the Quantity's
        /// own `unit` text, else the code.
        func unitLabel(_ value: FHIRPathValue, _ q: FHIRPathQuantity, _ file: MappingFile?) -> String {
            file?.tables.units[q.unit] ?? value.element.flatMap { $0.string("unit") } ?? q.unit
        }

        func targetValues(_ e: MappingExpression?, _ item: Element, _ source: SourcedResource, _ variables: [String: [FHIRPathValue]],
                          file: MappingFile?) throws(FHIRPathError) -> [OutcomeValue] {
            guard let e else { return [] }
            return try evaluate(e, item, source, variables).compactMap { value in
                guard case .quantity(let q) = value.systemValue else { return nil }
                let unit = unitLabel(value, q, file)
                return OutcomeValue(.double(q.value.double), kind: nil, units: unit == "1" ? nil : unit, createdDate: engine.now)
            }
        }

        /// A schedule from what `timing` gave: a Timing, a Period, a string or a dateTime.
        func schedule(_ value: FHIRPathValue?, anchor: Date, converter: TimingConverter, targets: [OutcomeValue]) -> ScheduledTiming {
            let allDay = { (start: Date, end: Date?, text: String?) -> ScheduleElement in
                ScheduleElement(start: calendar.startOfDay(for: start), end: end, interval: DateComponents(day: 1), text: text,
                                duration: .allDay, targetValues: targets, calendar: calendar)
            }
            guard let value else {
                return ScheduledTiming(elements: [allDay(anchor, nil, nil)], losses: [TimingLoss("timing", "no schedule given: once a day, at any time")])
            }
            if case .element(let e) = value, e.typeName == "Timing" {
                var result = converter.convert(R4.Timing(unchecked: e), anchor: anchor, targetValues: targets)
                if result.elements.isEmpty, result.unschedulable != nil {
                    // Keep the code's text as the task's schedule text.
                    let text = R4.Timing(unchecked: e).code?.text
                    result.losses.append(TimingLoss("code", "\(result.unschedulable!): a daily task at any time\(text.map { " showing \"\($0)\"" } ?? "")"))
                    result.elements = [allDay(anchor, nil, text)]
                    result.unschedulable = nil
                }
                return result
            }
            if case .element(let e) = value, e.typeName == "Period" {
                // One occurrence whose window is the whole period (FHIR's end is inclusive: a
                // date-only end includes that day).
                let period = R4.Period(unchecked: e)
                let start = period.start.map { $0.precision == .second ? $0.start(in: engine.timeZone) : calendar.startOfDay(for: $0.start(in: engine.timeZone)) } ?? anchor
                guard let last = period.end else {
                    return ScheduledTiming(elements: [allDay(start, nil, nil)], losses: [TimingLoss("timing", "a period without an end: once a day, at any time, from its start")])
                }
                let end = last.precision == .second ? last.start(in: engine.timeZone).addingTimeInterval(1)
                    : calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: last.start(in: engine.timeZone)))!
                let element = ScheduleElement(start: start, end: start.addingTimeInterval(1), interval: DateComponents(day: 1),
                                              duration: .seconds(max(1, end.timeIntervalSince(start))), targetValues: targets, calendar: calendar)
                return ScheduledTiming(elements: [element], losses: [])
            }
            switch value.systemValue {
            case .string(let text):
                return ScheduledTiming(elements: [allDay(anchor, nil, text)], losses: [TimingLoss("timing", "a schedule in words (\"\(text)\"): a daily task at any time showing the text")])
            case .dateTime(let d), .date(let d):
                guard let at = FHIRDateTime(d.description)?.start(in: engine.timeZone) else { break }
                let element = ScheduleElement(start: at, end: at.addingTimeInterval(1), interval: DateComponents(day: 1), duration: d.hasTime ? .hour : .allDay,
                                              targetValues: targets, calendar: calendar)
                return ScheduledTiming(elements: [element], losses: [])
            default:
                break
            }
            return ScheduledTiming(elements: [allDay(anchor, nil, nil)], losses: [TimingLoss("timing", "not a Timing, Period, string or dateTime: once a day, at any time")])
        }

        // MARK: Contacts

        func makeContact(_ rule: MappingRule, id: String, item: Element, source: SourcedResource, variables: [String: [FHIRPathValue]],
                         record: SourceRecord) throws(FHIRPathError) -> Contact {
            var name = PersonName()
            if let human = try rule.fields["person-name"].map({ e throws(FHIRPathError) in try evaluate(e, item, source, variables) })?.first?.element {
                name.givenName = human.children(named: "given").compactMap(\.value).joined(separator: " ").nilIfEmpty
                name.familyName = human.string("family")
                name.namePrefix = human.children(named: "prefix").compactMap(\.value).joined(separator: " ").nilIfEmpty
                name.nameSuffix = human.children(named: "suffix").compactMap(\.value).joined(separator: " ").nilIfEmpty
                if name.givenName == nil && name.familyName == nil { name.givenName = human.string("text") }
            }
            var contact = Contact(id: id, name: name, carePlanUUID: nil, effectiveDate: calendar.startOfDay(for: engine.now), timezone: engine.timeZone)
            contact.title = try string(rule.fields["title"], item, source, variables)
            contact.role = try string(rule.fields["role"], item, source, variables)
            contact.organization = try string(rule.fields["organization"], item, source, variables)
            switch try string(rule.fields["category"], item, source, variables) {
            case "family": contact.category = .friendsAndFamily
            case "care-provider": contact.category = .careProvider
            default: break
            }
            var phones: [LabeledValue] = [], messaging: [LabeledValue] = [], emails: [LabeledValue] = [], other: [LabeledValue] = []
            let points = try rule.fields["telecom"].map { e throws(FHIRPathError) in try evaluate(e, item, source, variables) } ?? []
            for case .element(let point) in points {
                guard let value = point.string("value") else { continue }
                let use = point.string("use")
                if use == "old" { continue }
                let label = use ?? "work"
                let entry = LabeledValue(label: label, value: value)
                switch point.string("system") {
                case "phone":
                    if !phones.contains(entry) { phones.append(entry) }
                    if use == "mobile", !messaging.contains(entry) { messaging.append(entry) }
                case "sms": if !messaging.contains(entry) { messaging.append(entry) }
                case "email": if !emails.contains(entry) { emails.append(entry) }
                default: other.append(LabeledValue(label: point.string("system") ?? "other", value: value))
                }
            }
            contact.phoneNumbers = phones.isEmpty ? nil : phones
            contact.messagingNumbers = messaging.isEmpty ? nil : messaging
            contact.emailAddresses = emails.isEmpty ? nil : emails
            contact.otherContactInfo = other.isEmpty ? nil : other
            if let address = try rule.fields["address"].map({ e throws(FHIRPathError) in try evaluate(e, item, source, variables) })?.first?.element {
                contact.address = PostalAddress(street: address.children(named: "line").compactMap(\.value).joined(separator: "\n"),
                                                city: address.string("city") ?? "", state: address.string("state") ?? "",
                                                postalCode: address.string("postalCode") ?? "", country: address.string("country") ?? "")
            }
            contact.version.remoteID = record.reference
            contact.version.userInfo = record.userInfo
            contact.version.source = VersionInfo.importedFromEHR
            return contact
        }

        // MARK: Outcomes

        mutating func mapOutcome(_ rule: MappingRule, _ source: SourcedResource, _ file: MappingFile, patientID: String) {
            let resource = source.resource
            let variables = baseVariables(patientID: patientID, plan: nil)
            do {
                let items: [Element] = try rule.each.map { e throws(FHIRPathError) in try evaluate(e, resource, source, variables).compactMap(\.element) } ?? [resource]
                for (index, item) in items.enumerated() {
                    let vars = baseVariables(patientID: patientID, plan: nil, index: index)
                    if let skip = firstMatch(rule.skip, item, source, vars, path: nil) {
                        note(.skipped, source, nil, skip.reason ?? "a skip rule matched")
                        continue
                    }
                    let groups = try strings(rule.fields["task-group"], item, source, vars)
                    guard let when = try date(rule.fields["date"], item, source, vars) else {
                        note(.error, source, nil, "no date for the outcome (\(rule.fields["date"]?.text ?? "date"))")
                        continue
                    }
                    var values: [OutcomeValue] = []
                    for valueRule in rule.values {
                        let valueItems: [Element] = try valueRule.each.map { e throws(FHIRPathError) in try evaluate(e, item, source, vars).compactMap(\.element) } ?? [item]
                        for valueItem in valueItems {
                            let kind = try string(valueRule.fields["kind"], valueItem, source, vars)
                            for v in try valueRule.fields["value"].map({ e throws(FHIRPathError) in try evaluate(e, valueItem, source, vars) }) ?? [] {
                                if let value = outcomeValue(v, kind: kind, units: try string(valueRule.fields["units"], valueItem, source, vars), file: file) { values.append(value) }
                            }
                        }
                    }
                    if values.isEmpty {
                        note(.skipped, source, nil, "no value to record")
                        continue
                    }
                    var b = batch(patientID)
                    b.outcomes.append(MappedOutcome(taskGroups: groups, date: when, values: values, source: sourceRecord(source, file, rule: rule.name)))
                    store(b)
                }
            } catch {
                failed(source, nil, rule.name, error)
            }
        }

        func outcomeValue(_ v: FHIRPathValue, kind: String?, units: String?, file: MappingFile) -> OutcomeValue? {
            switch v.systemValue {
            case .quantity(let q):
                let unit = units ?? unitLabel(v, q, file)
                return OutcomeValue(q.value.isWhole && q.value.scale == 0 ? .integer(Int(q.value.double)) : .double(q.value.double), kind: kind, units: unit, createdDate: engine.now)
            case .integer(let i): return OutcomeValue(.integer(i), kind: kind, units: units, createdDate: engine.now)
            case .decimal(let d): return OutcomeValue(.double(d.double), kind: kind, units: units, createdDate: engine.now)
            case .boolean(let b): return OutcomeValue(.boolean(b), kind: kind, units: units, createdDate: engine.now)
            case .string(let s): return OutcomeValue(.text(s), kind: kind, units: units, createdDate: engine.now)
            case .dateTime(let d), .date(let d):
                return FHIRDateTime(d.description).map { OutcomeValue(.date($0.start(in: engine.timeZone)), kind: kind, units: units, createdDate: engine.now) }
            case .element(let e) where e.typeName == "CodeableConcept":
                let text = e.string("text") ?? e.first("coding.display")?.value ?? e.first("coding.code")?.value
                return text.map { OutcomeValue(.text($0), kind: kind, units: units, createdDate: engine.now) }
            default: return nil
            }
        }
    }
}

extension String {
    var nilIfEmpty: String? { isEmpty ? nil : self }
}
