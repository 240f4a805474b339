import CareStore
import FHIR
import FHIRPath
import Foundation
import Mapping

/// `caregate import` of files in bounded memory: every resource is first staged on disk (`ImportStaging`)
/// under its patient (the Patient itself, or the patient its `subject`, `patient` or
/// `beneficiary` names), repeated copies collapsed as they come (`RepeatedResources`' rule); then
/// each patient's resources are read back, with the resources they refer to that belong to no
/// patient (Practitioners, Organizations, Medications), mapped and stored, one patient at a time.
/// Memory is bounded by the largest file's Bundle and the largest patient, not by the run; the
/// store ends up as a whole-run import leaves it (a test compares snapshots).
public struct StagedImport: Sendable {
    /// The importer whose mappings, store, zone and time the run uses.
    public var importer: FHIRImporter
    /// Patients mapped at once (each mapped on its own task; the store has one writer).
    public var window: Int
    /// Where forms the staged files lack come from (a Bulk export's server: `PatientPull.forms`):
    /// a patient whose survey activities ask for one is mapped again with what it found, each
    /// form asked once per run. Nil: such activities are losses, as in a whole-run import.
    public var formSource: (@Sendable ([Canonical]) async -> (forms: [SourcedResource], notes: [ImportNote]))?

    /// A staged import, mapping `window` patients at once (one per core by default).
    public init(importer: FHIRImporter, window: Int = max(1, ProcessInfo.processInfo.activeProcessorCount)) {
        self.importer = importer
        self.window = window
    }

    /// Imports files and directories through `staging`; in a large import, quiet notes past the
    /// first of each kind go to `spill` (see `SpilledNotes`).
    public func run(_ paths: [String], staging: any ImportStaging, dryRun: Bool = false, spill: SpilledNotes? = nil,
                    progress: (@Sendable (ImportProgress) -> Void)? = nil) async throws(StoreError) -> ImportReport {
        try await run(files: importer.files.files(paths), staging: staging, dryRun: dryRun, spill: spill, progress: progress)
    }

    /// Imports `list`, files already found (`ResourceFiles.files`), in its order: for a caller
    /// that looked at them first (their sizes choose the staging) and lists a folder once.
    public func run(files list: [String], staging: any ImportStaging, dryRun: Bool = false, spill: SpilledNotes? = nil,
                    progress: (@Sendable (ImportProgress) -> Void)? = nil) async throws(StoreError) -> ImportReport {
        var report = ImportReport()
        let clock = ContinuousClock()
        var start = clock.now
        report.files = list.count
        var forms = importer.questionnaires
        try await stage(list, into: staging, report: &report, forms: &forms, progress: progress)
        progress?(ImportProgress(stage: .reading, done: list.count, total: list.count, item: ""))
        report.resources = try staging.count()
        try report.spillQuietNotes(to: spill)
        report.seconds.reading = (clock.now - start).seconds
        start = clock.now
        let groups = try staging.groups()
        var engine = MappingEngine(mappings: importer.mappings, timeZone: importer.timeZone, now: importer.now)
        engine.defersUnrecordedOutcomes = true
        engine.questionnaires = forms
        // The mapping hands each group over in order and goes on; the writer stores what waits.
        let queue = MappedQueue(limit: 4 * window, commit: Self.patientsPerCommit)
        async let stored = store(from: queue, into: report, dryRun: dryRun, spill: spill, total: groups.count, progress: progress)
        let mapped: Double
        do {
            mapped = try await mapGroups(groups, staging: staging, engine: Locked(engine)) { await queue.give($0) }
        } catch {
            await queue.finish()
            _ = await stored
            throw error
        }
        await queue.finish()
        report = try await stored.get()
        report.seconds.mapping = mapped
        report.seconds.storing = max(0, (clock.now - start).seconds - mapped)
        progress?(ImportProgress(stage: .storing, done: groups.count, total: groups.count, item: ""))
        return report
    }

    /// Groups stored in one commit at most (each patient in a savepoint of its own).
    static let patientsPerCommit = 32

    // MARK: Staging

    /// NDJSON lines parsed together: a unit of work for one core, and one staging transaction.
    static let linesPerUnit = 256

    /// A unit's resources parsed and grouped, ready for the staging's one writer.
    struct ParsedUnit: Sendable {
        var items: [StagedItem]
        var problems: [ImportNote]
        /// The unit's Questionnaires and ValueSets: forms (and their answers) for every patient's survey tasks.
        var forms: [SourcedResource] = []
    }

    /// Stages the files' resources: units of them (NDJSON lines, whole files) parsed `window` at
    /// a time, written in order by one writer, repeated copies collapsed as they come.
    func stage(_ list: [String], into staging: any ImportStaging, report: inout ImportReport, forms: inout QuestionnaireCatalog,
               progress: (@Sendable (ImportProgress) -> Void)?) async throws(StoreError) {
        var fileIndex = 0
        var reader: ResourceFiles.UnitReader?
        func nextUnit() -> (file: Int, unit: ResourceFiles.Unit)? {
            while true {
                if let unit = reader?.next() { return (fileIndex - 1, unit) }
                guard fileIndex < list.count else { return nil }
                progress?(ImportProgress(stage: .reading, done: fileIndex, total: list.count, item: list[fileIndex]))
                reader = importer.files.units(list[fileIndex], linesPerUnit: Self.linesPerUnit)
                fileIndex += 1
            }
        }
        var staged = report
        var catalog = forms
        let skim = skim
        let compacting = staging.prefersCompactText
        try await Self.inOrder(window: window, next: nextUnit, work: { [self] in parse($0.unit, file: $0.file, skim: skim, compacting: compacting) }) { (unit: ParsedUnit) throws(StoreError) in
            try write(unit, into: staging, report: &staged)
            for form in unit.forms { catalog.add(form) }
        }
        report = staged
        forms = catalog
    }

    /// Parses a unit and works out each resource's group; keeps each resource's text as the file
    /// has it (written again only where the file has none: XML), `compacting` it or not as the
    /// staging prefers.
    func parse(_ unit: ResourceFiles.Unit, file: Int, skim: ParseOptions.Skim, compacting: Bool) -> ParsedUnit {
        var parsed = ParsedUnit(items: [], problems: [])
        parsed.problems = importer.files.parse(unit, keepingText: true, compactingText: compacting, skim: skim) { source, fullURL, json in
            let identity = source.resource.relativeReference
            if QuestionnaireCatalog.types.contains(source.resource.resourceType ?? "") { parsed.forms.append(source) }
            var group = group(of: source, identity: identity, fullURL: fullURL)
            if identity == nil, group.isEmpty { group = "~\(source.origin)" }
            parsed.items.append(StagedItem(group: group, identity: identity, fullURL: fullURL, container: source.container == nil ? 0 : file + 1,
                                           origin: source.origin, bytes: json ?? FHIRJSONWriter(pretty: false).write(source.resource)))
        }
        return parsed
    }

    /// Stages one unit's items (one transaction), collapsing copies of resources staged before.
    func write(_ unit: ParsedUnit, into staging: any ImportStaging, report: inout ImportReport) throws(StoreError) {
        var notes: [ImportNote] = []
        var repeated = 0
        var unmapped: [String: Int] = [:]
        try staging.write { writer in
            for item in unit.items {
                guard let identity = item.identity, let earlier = try writer.item(identity: identity) else {
                    // Shared resources (always with an identity: those without get a group of
                    // their own) are counted here, once; in each patient's mapping they are context.
                    if item.group.isEmpty, let type = Self.type(of: item).map(String.init), !QuestionnaireCatalog.types.contains(type) { unmapped[type, default: 0] += 1 }
                    try writer.insert(item)
                    continue
                }
                repeated += 1
                if let note = try Self.repeatedCopy(item, of: earlier, identity: identity, writer) { notes.append(note) }
            }
        }
        report.notes += unit.problems + notes
        report.repeated += repeated
        for (type, n) in unmapped { report.unmapped[type, default: 0] += n }
    }

    /// A resource read again: the newer copy is kept (`RepeatedResources`' rule), with a note
    /// when the copies differ (compared as written by CareGate, not as the files lay them out).
    static func repeatedCopy(_ item: StagedItem, of earlier: StagedItem, identity: String, _ writer: any ImportStagingWriter) throws -> ImportNote? {
        if earlier.bytes == item.bytes { return nil }
        let reader = FHIRJSONReader(options: ParseOptions(lenient: true))
        let earlierSource = SourcedResource(resource: try reader.read(earlier.bytes).resource, origin: earlier.origin)
        let source = SourcedResource(resource: try reader.read(item.bytes).resource, origin: item.origin)
        let canonical = FHIRJSONWriter(pretty: false)
        if canonical.write(earlierSource.resource) == canonical.write(source.resource) { return nil }
        let (replaces, reason) = RepeatedResources.isNewer(source, than: earlierSource)
        let winner = replaces ? source.origin : earlier.origin
        if replaces { try writer.replace(earlier.sequence, with: item) }
        return ImportNote(kind: .warning, resource: identity, path: nil, origin: source.origin,
                          message: "read again with different contents (also in \(earlier.origin)); \(reason), so the copy from \(winner) is imported")
    }

    /// The references through which a resource names its patient.
    static let patientReferencePaths = ["subject.reference", "patient.reference", "beneficiary.reference"]

    /// Staging reads whole only the types the mappings map; of the others (most of a Synthea
    /// patient: claims, encounters, procedures) it reads only what groups them: their id and
    /// the elements naming their patient. Their text is staged as the file has it, unvalidated:
    /// they are read again (leniently) only when a mapped resource refers to them.
    var skim: ParseOptions.Skim {
        ParseOptions.Skim(wholeTypes: Set(importer.mappings.files.keys).union(QuestionnaireCatalog.types),
                          keptElements: Set(Self.patientReferencePaths.map { String($0.prefix { $0 != "." }) }), root: false)
    }

    /// The group a resource is imported with: its patient's (`Patient/id`); for a resource of a
    /// type the mappings map but that names no patient, a group of its own; else the shared group
    /// (empty), whose resources go with every patient that refers to them. A Patient without an
    /// id (in a Bundle) is grouped by its `fullUrl`, as references name it.
    func group(of source: SourcedResource, identity: String?, fullURL: String?) -> String {
        let resource = source.resource
        if resource.resourceType == "Patient", let key = identity ?? fullURL.map({ "url:" + $0 }) { return key }
        for path in Self.patientReferencePaths {
            guard let reference = resource.first(path)?.value else { continue }
            if let target = source.index?.resource(for: reference), target.resourceType == "Patient" {
                return target.relativeReference ?? "url:" + reference
            }
            if let id = RestHookNotification.patientID(in: reference) { return "Patient/\(id)" }
        }
        if let type = resource.resourceType, importer.mappings.files[type] != nil { return "~" + (identity ?? source.origin) }
        return ""
    }

    // MARK: Storing

    /// The store's one writer: takes what the mapping has handed over (a commit for all that
    /// waits, up to `patientsPerCommit` groups) and adds it to the report in group order.
    func store(from queue: MappedQueue, into report: ImportReport, dryRun: Bool, spill: SpilledNotes?, total: Int,
               progress: (@Sendable (ImportProgress) -> Void)?) async -> Result<ImportReport, StoreError> {
        var report = report
        let store = StoreImport(store: importer.store, timeZone: importer.timeZone, now: importer.now)
        var done = 0
        while let units = await queue.take() {
            var results = store.apply(units.flatMap(\.output.batches), dryRun: dryRun)[...]
            for unit in units {
                progress?(ImportProgress(stage: .storing, done: done, total: total, item: unit.name))
                report.notes += unit.notes + unit.output.notes
                report.dispositions += unit.output.dispositions
                for (type, n) in unit.output.unmapped { report.unmapped[type, default: 0] += n }
                for (imported, notes) in results.prefix(unit.output.batches.count) {
                    report.patients.append(imported)
                    report.notes += notes
                }
                results = results.dropFirst(unit.output.batches.count)
                done += 1
            }
            do throws(StoreError) { try report.spillQuietNotes(to: spill) } catch {
                // The store has what was applied; the rest of the queue is left (the run fails).
                await queue.finish()
                return .failure(error)
            }
        }
        return .success(report)
    }

    /// Mapped groups waiting for the store's writer: the mapping gives them in group order and
    /// goes on, unless `limit` already wait; the writer takes all that wait, up to `commit`.
    actor MappedQueue {
        let limit: Int
        let commit: Int
        private var waiting: [MappedGroup] = []
        private var finished = false
        private var taker: CheckedContinuation<[MappedGroup]?, Never>?
        private var givers: [CheckedContinuation<Void, Never>] = []

        init(limit: Int, commit: Int) {
            self.limit = limit
            self.commit = commit
        }

        func give(_ group: MappedGroup) async {
            while waiting.count >= limit && !finished { await withCheckedContinuation { givers.append($0) } }
            // After the writer has stopped, nothing more is stored.
            guard !finished else { return }
            waiting.append(group)
            wakeTaker()
        }

        /// No more groups will come.
        func finish() {
            finished = true
            wakeTaker()
            for giver in givers { giver.resume() }
            givers.removeAll()
        }

        /// The groups waiting (at most `commit`), after waiting for one; nil once finished and empty.
        func take() async -> [MappedGroup]? {
            if !waiting.isEmpty || finished { return takeWaiting() }
            return await withCheckedContinuation { taker = $0 }
        }

        private func wakeTaker() {
            guard let taker else { return }
            self.taker = nil
            taker.resume(returning: takeWaiting())
        }

        private func takeWaiting() -> [MappedGroup]? {
            guard !waiting.isEmpty else { return nil }
            let n = min(commit, waiting.count)
            let taken = Array(waiting.prefix(n))
            waiting.removeFirst(n)
            for giver in givers { giver.resume() }
            givers.removeAll()
            return taken
        }
    }

    // MARK: Mapping

    /// One group mapped: the engine's output, with the reading notes of its resources.
    struct MappedGroup: Sendable {
        /// The group (`Patient/id`).
        var name: String
        var output: MappingOutput
        var notes: [ImportNote]
    }

    /// Maps the groups, `window` at a time, handing each result to `store` in group order. The
    /// engine is shared: forms fetched for one group (`formSource`) serve the groups mapped after.
    func mapGroups(_ groups: [String], staging: any ImportStaging, engine: Locked<MappingEngine>,
                   store: (MappedGroup) async -> Void) async throws(StoreError) -> Double {
        let clock = ContinuousClock()
        var mappingTime = Duration.zero
        var pending = groups[...]
        var asked: Set<Canonical> = []
        try await Self.inOrder(window: window, next: { pending.popFirst() }, work: { group in
            let start = clock.now
            let current = engine.withLock { $0 }
            let result = Result(catching: { () throws(StoreError) -> MappedGroup in try Self.map(group, staging: staging, engine: current) })
            return (result, clock.now - start)
        }) { (mapped: Result<MappedGroup, StoreError>, took: Duration) throws(StoreError) in
            mappingTime += took
            var group = try mapped.get()
            if let formSource, !group.output.missingQuestionnaires.isEmpty {
                group = try await withForms(group, asking: formSource, asked: &asked, staging: staging, engine: engine)
            }
            await store(group)
        }
        // Mapping time per core in use: the wall-clock share of the mapping.
        return mappingTime.seconds / Double(max(1, min(window, ProcessInfo.processInfo.activeProcessorCount)))
    }

    /// Runs `work` on what `next` hands out, `window` at a time on child tasks, and gives each
    /// result to `consume` in the order handed out (at most twice `window` wait for their turn);
    /// stops at the first error `consume` throws.
    static func inOrder<Item: Sendable, Output: Sendable>(window: Int, next: () -> Item?, work: @escaping @Sendable (Item) -> Output,
                                                         consume: (Output) async throws(StoreError) -> Void) async throws(StoreError) {
        let result: Result<Void, StoreError> = await withTaskGroup(of: (Int, Output).self) { tasks in
            var submitted = 0, consumed = 0, running = 0
            var ready: [Int: Output] = [:]
            func fill() {
                while running < window, submitted - consumed < 2 * window, let item = next() {
                    let sequence = submitted
                    submitted += 1
                    running += 1
                    tasks.addTask { (sequence, work(item)) }
                }
            }
            fill()
            while let (sequence, output) = await tasks.next() {
                running -= 1
                ready[sequence] = output
                // Work goes on while `consume` runs: a slot freed is filled before, and after each.
                fill()
                while let output = ready.removeValue(forKey: consumed) {
                    do throws(StoreError) { try await consume(output) } catch {
                        tasks.cancelAll()
                        return .failure(error)
                    }
                    consumed += 1
                    fill()
                }
            }
            return .success(())
        }
        try result.get()
    }

    /// A group whose survey activities ask for forms the run lacks, mapped again when the forms
    /// (fetched now, or by a group before it while it was being mapped) are in the shared engine;
    /// the fetch's notes go with the group that asked.
    func withForms(_ group: MappedGroup, asking source: @Sendable ([Canonical]) async -> (forms: [SourcedResource], notes: [ImportNote]),
                   asked: inout Set<Canonical>, staging: any ImportStaging, engine: Locked<MappingEngine>) async throws(StoreError) -> MappedGroup {
        var notes: [ImportNote] = []
        let new = group.output.missingQuestionnaires.filter { asked.insert($0).inserted }
        if !new.isEmpty {
            let fetched = await source(new)
            notes = fetched.notes
            engine.withLock { engine in for form in fetched.forms { engine.questionnaires.add(form) } }
        }
        let current = engine.withLock { $0 }
        var result = group
        if group.output.missingQuestionnaires.contains(where: { current.questionnaires.find($0) != nil }) {
            result = try Self.map(group.name, staging: staging, engine: current)
        }
        result.notes = notes + result.notes
        return result
    }

    /// Reads a group back with the shared resources it refers to (and those they refer to), and
    /// maps it. Resources of a Bundle go back into a Bundle of their own entries, so that
    /// `urn:uuid` references between them resolve as they did in the file.
    static func map(_ group: String, staging: any ImportStaging, engine: MappingEngine) throws(StoreError) -> MappedGroup {
        var notes: [ImportNote] = []
        // Each staged item read back once.
        func decoded(_ items: [StagedItem]) -> [(item: StagedItem, resource: Element)] {
            items.compactMap { item in
                guard let resource = try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(item.bytes).resource else {
                    notes.append(ImportNote(kind: .error, resource: item.identity ?? "resource", path: nil, origin: item.origin, message: "the staged copy could not be read back"))
                    return nil
                }
                return (item, resource)
            }
        }
        // Resources of types no mapping maps are read back only when a mapped one refers to
        // them (most of a Synthea patient: claims, encounters, procedures); the rest are counted.
        // Their bytes stay in the staging until then.
        let mappedTypes = Set(engine.mappings.files.keys.map { Substring($0) })
        func isUnmapped(_ item: StagedItem) -> Bool {
            guard let type = Self.type(of: item) else { return false }
            return !mappedTypes.contains(type)
        }
        let own = try staging.items(group: group) { !isUnmapped($0) }
        var unread: [Int64: StagedItem] = [:]
        var unreadByKey: [String: Int64] = [:]
        for item in own where isUnmapped(item) {
            unread[item.sequence] = item
            unreadByKey[item.identity!] = item.sequence
            if let url = item.fullURL { unreadByKey[url] = item.sequence }
        }
        var read = decoded(own.filter { unread[$0.sequence] == nil })
        var seen = Set(read.map(\.item.sequence))
        var frontier = read
        // What they refer to, and what that refers to in turn (a PractitionerRole's Practitioner):
        // the group's own unread resources and the shared ones.
        while !frontier.isEmpty {
            let named = Set(frontier.flatMap { Self.references(in: $0.resource) })
            let keys = Set(named.compactMap(Element.relativeReference(of:)))
            let ownFound = try staging.readingBytes(of: (named.union(keys)).compactMap { unreadByKey[$0] }.compactMap { unread.removeValue(forKey: $0) })
            let sharedFound = try staging.items(identities: Array(keys), fullURLs: named.filter { $0.contains(":") })
                .filter { $0.group.isEmpty }
            let found = (ownFound + sharedFound).filter { seen.insert($0.sequence).inserted }
            frontier = decoded(found)
            read += frontier
        }
        read.sort { $0.item.sequence < $1.item.sequence }
        let shared = Set(read.filter { $0.item.group.isEmpty }.map(\.item.sequence))
        var sources: [SourcedResource] = []
        var containers: [Int: [(item: StagedItem, resource: Element)]] = [:]
        var order: [(Int, Element, StagedItem)] = []
        for (item, resource) in read {
            if item.container != 0 { containers[item.container, default: []].append((item, resource)) }
            order.append((item.container, resource, item))
        }
        var bundles: [Int: (Element, BundleIndex)] = [:]
        for (container, entries) in containers {
            var bundle = Element(resourceType: "Bundle")
            for (item, resource) in entries {
                var entry = Element(name: "entry", type: "Bundle.entry")
                if let url = item.fullURL { entry.append(Element(name: "fullUrl", type: "uri", value: url)) }
                var inner = resource
                inner.name = "resource"
                entry.append(inner)
                bundle.append(entry)
            }
            bundles[container] = (bundle, BundleIndex(bundle))
        }
        for (container, resource, item) in order {
            let bundle = bundles[container]
            var resource = resource
            // As it was read: a Bundle's entry resource is named `resource` (notes name an id-less one so).
            if bundle != nil { resource.name = "resource" }
            sources.append(SourcedResource(resource: resource, container: bundle?.0, index: bundle?.1, origin: item.origin))
        }
        var output = engine.map(sources)
        for type in unread.values.compactMap(Self.type(of:)) { output.unmapped[String(type), default: 0] += 1 }
        // Shared resources are context here, counted once by the run (below), not per patient.
        for (source, item) in zip(sources, order.map(\.2)) where shared.contains(item.sequence) {
            guard let type = source.resource.resourceType, let n = output.unmapped[type] else { continue }
            output.unmapped[type] = n > 1 ? n - 1 : nil
        }
        return MappedGroup(name: group, output: output, notes: notes)
    }

    /// Every `reference` string in a resource.
    static func references(in resource: Element) -> [String] {
        var found: [String] = []
        func walk(_ element: Element) {
            for child in element.children {
                if child.name == "reference", let value = child.value { found.append(value) }
                if !child.isResource { walk(child) }
            }
        }
        walk(resource)
        return found
    }

    /// A staged item's resource type, from its identity (`Type/id`): the text before the
    /// slash, not copied (this runs for every staged item of every group).
    static func type(of item: StagedItem) -> Substring? {
        guard let identity = item.identity else { return nil }
        return identity[..<(identity.utf8.firstIndex(of: UInt8(ascii: "/")) ?? identity.endIndex)]
    }
}

