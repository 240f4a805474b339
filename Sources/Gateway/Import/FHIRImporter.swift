import CareStore
import FHIR
import Foundation
import Mapping

/// How far an import has got, for a progress bar or progress lines.
public struct ImportProgress: Sendable {
    /// Reading files, then storing patients.
    public enum Stage: String, Sendable {
        /// Reading and parsing files.
        case reading
        /// Writing patients to the store.
        case storing
    }
    /// Which stage.
    public var stage: Stage
    /// Items done in the stage.
    public var done: Int
    /// Items in the stage.
    public var total: Int
    /// The file or patient at hand.
    public var item: String
}

/// What an import did: per patient, the changes (or why the patient's transaction was refused),
/// and the report's notes (skips, ends, approximations of schedules, errors).
public struct ImportReport: Sendable {
    /// Files read.
    public var files = 0
    /// Resources imported: each identity (type and id) once.
    public var resources = 0
    /// Copies of a resource read more than once in the run, left out (see `RepeatedResources`).
    public var repeated = 0
    /// Per patient, what was written.
    public var patients: [PatientImport] = []
    /// The report's notes, in order.
    public var notes: [ImportNote] = []
    /// Where quiet notes past the first of each kind went, in a large import (see `SpilledNotes`).
    public var spilled: SpilledNotes?
    /// What became of every item of every mapping rule (each activity, dosage, participant).
    public var dispositions: [ItemDisposition] = []
    /// Resources no mapping file covers, by type.
    public var unmapped: [String: Int] = [:]
    /// Seconds spent reading and parsing, mapping, and writing the store.
    public var seconds: (reading: Double, mapping: Double, storing: Double) = (0, 0, 0)

    /// An empty report.
    public init() {}

    /// Changes counted by action.
    public var counts: [ImportChange.Action: Int] {
        var result: [ImportChange.Action: Int] = [:]
        for change in patients.flatMap(\.changes) { result[change.action, default: 0] += 1 }
        return result
    }

    /// The patients whose transaction was refused.
    public var failedPatients: [PatientImport] { patients.filter { $0.failure != nil } }
}

/// `caregate import`: reads FHIR files, applies the mappings and writes the store, one
/// transaction per patient. A resource that fails is reported and the others go on; a patient
/// whose transaction fails keeps nothing of it.
public struct FHIRImporter: Sendable {
    /// The mapping files in use.
    public var mappings: MappingSet
    /// The store written to.
    public var store: any CarePlanStore
    /// The patients' time zone, for schedules the data gives no zone for.
    public var timeZone: TimeZone
    /// The import's time: what is current, and when new versions take effect.
    public var now: Date
    /// How files are found and read.
    public var files: ResourceFiles
    /// Forms for survey activities besides those the imported data holds: a `--questionnaires`
    /// folder's, and those fetched from the EHR.
    public var questionnaires = QuestionnaireCatalog()

    /// An importer of `mappings` into `store`.
    public init(mappings: MappingSet, store: any CarePlanStore, timeZone: TimeZone, now: Date = Date(), files: ResourceFiles = ResourceFiles()) {
        self.mappings = mappings
        self.store = store
        self.timeZone = timeZone
        self.now = now
        self.files = files
    }

    /// Imports files and directories.
    public func run(_ paths: [String], dryRun: Bool = false, progress: (@Sendable (ImportProgress) -> Void)? = nil) -> ImportReport {
        var report = ImportReport()
        let clock = ContinuousClock()
        let start = clock.now
        let list = files.files(paths)
        report.files = list.count
        var resources: [SourcedResource] = []
        for (i, path) in list.enumerated() {
            progress?(ImportProgress(stage: .reading, done: i, total: list.count, item: path))
            let (found, problems) = files.read(path)
            resources += found
            report.notes += problems
        }
        progress?(ImportProgress(stage: .reading, done: list.count, total: list.count, item: ""))
        report.seconds.reading = (clock.now - start).seconds
        return run(resources: resources, report: report, dryRun: dryRun, progress: progress)
    }

    /// The forms the resources' survey activities ask that neither they nor `questionnaires`
    /// hold: what a pull from an EHR fetches before importing (a mapping pass that writes nothing).
    public func missingQuestionnaires(in resources: [SourcedResource]) -> [Canonical] {
        var engine = MappingEngine(mappings: mappings, timeZone: timeZone, now: now)
        engine.questionnaires = questionnaires
        return engine.map(RepeatedResources.collapse(resources).resources).missingQuestionnaires
    }

    /// Imports resources read elsewhere (from a server: `PatientPull`), exactly as files would be.
    /// `report` carries what reading them found (files, notes, seconds).
    public func run(resources: [SourcedResource], report: ImportReport = ImportReport(), dryRun: Bool = false,
                    progress: (@Sendable (ImportProgress) -> Void)? = nil) -> ImportReport {
        var report = report
        let clock = ContinuousClock()
        // Telling repeated copies apart is part of reading what the run holds.
        var start = clock.now
        let unique = RepeatedResources.collapse(resources)
        report.resources = unique.resources.count
        report.repeated = unique.repeated
        report.notes += unique.notes
        report.seconds.reading += (clock.now - start).seconds
        start = clock.now
        var engine = MappingEngine(mappings: mappings, timeZone: timeZone, now: now)
        engine.defersUnrecordedOutcomes = true
        engine.questionnaires = questionnaires
        let output = engine.map(unique.resources)
        report.notes += output.notes
        report.dispositions = output.dispositions
        report.unmapped = output.unmapped
        report.seconds.mapping = (clock.now - start).seconds
        start = clock.now
        let importer = StoreImport(store: store, timeZone: timeZone, now: now)
        for (i, batch) in output.batches.enumerated() {
            progress?(ImportProgress(stage: .storing, done: i, total: output.batches.count, item: batch.patientID))
            report.patients.append(importer.apply(batch, dryRun: dryRun, notes: &report.notes))
        }
        progress?(ImportProgress(stage: .storing, done: output.batches.count, total: output.batches.count, item: ""))
        report.seconds.storing = (clock.now - start).seconds
        return report
    }
}

/// Durations as seconds.
extension Duration {
    /// The duration in seconds, for reports and rates.
    public var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
