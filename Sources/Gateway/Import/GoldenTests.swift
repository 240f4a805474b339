import CareStore
import FHIR
import Foundation
import JSON
import Mapping

/// What the store holds after an import, as readable, stable JSON: ids, titles, links by id,
/// schedules as clock times in the test's time zone, and the report's notes. Golden files hold
/// this, so a diff shows what a mapping change changed.
public enum StoreSnapshot {
    /// A store's content as the golden tests' snapshot JSON: stable, without uuids or write times.
    public static func json(_ store: any CarePlanReader, notes: [ImportNote], timeZone: TimeZone) throws -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = timeZone
        formatter.formatOptions = [.withInternetDateTime]
        func date(_ d: Date?) -> JSONValue { JSONValue(d.map { formatter.string(from: $0) }) }
        let patients = try store.fetchPatients()
        let plans = try store.fetchCarePlans()
        let tasks = try store.fetchTasks()
        func planID(_ uuid: UUID?) -> JSONValue { JSONValue(plans.first { $0.uuid == uuid }?.id) }
        let snapshot: JSONValue = [
            "patients": .array(patients.map { p in
                ["id": .init(p.id), "given": .init(p.name.givenName), "family": .init(p.name.familyName), "sex": .init(p.sex),
                 "birthday": date(p.birthday), "source": .init(p.version.remoteID)]
            }),
            "carePlans": .array(plans.map { c in
                ["id": .init(c.id), "title": .init(c.title), "patient": .init(patients.first { $0.uuid == c.patientUUID }?.id), "source": .init(c.version.remoteID)]
            }),
            "tasks": .array(tasks.map { t in
                var task: [(String, JSONValue)] = [
                    ("id", .init(t.id)), ("title", .init(t.title)), ("instructions", .init(t.instructions)), ("carePlan", planID(t.carePlanUUID)),
                    ("impactsAdherence", .init(t.impactsAdherence)), ("group", .init(t.version.groupIdentifier)), ("tags", .init(t.version.tags ?? [])),
                    ("effective", date(t.effectiveDate)), ("source", .init(t.version.remoteID)),
                    ("schedule", .array(t.schedule.elements.map { schedule($0, date) })),
                ]
                if let link = t.healthKitLinkage { task.append(("healthKit", .init(link.quantityIdentifier))) }
                return .object(task)
            }),
            "contacts": .array(try store.fetchContacts().map { c in
                ["id": .init(c.id), "given": .init(c.name.givenName), "family": .init(c.name.familyName), "role": .init(c.role),
                 "title": .init(c.title), "category": .init(c.category?.rawValue), "carePlan": planID(c.carePlanUUID),
                 "phones": .init((c.phoneNumbers ?? []).map(\.value)), "messaging": .init((c.messagingNumbers ?? []).map(\.value)),
                 "emails": .init((c.emailAddresses ?? []).map(\.value))]
            }),
            "outcomes": .array(try store.fetchOutcomes().map { o in
                ["id": .init(o.id), "task": .init(tasks.first { $0.uuid == o.taskUUID }?.id), "occurrence": .init(o.taskOccurrenceIndex),
                 "values": .init(o.values.map { "\($0.kind ?? ""): \($0.value) \($0.units ?? "")".trimmingCharacters(in: .whitespaces) })]
            }),
            "notes": .init(notes.map { "\($0.resource)\($0.path.map { " \($0)" } ?? ""): \($0.kind.rawValue): \($0.message)" }),
        ]
        return snapshot.serialized(pretty: true, sortedKeys: true) + "\n"
    }

    /// A schedule element: start and end in the test's zone, the interval by component, the
    /// duration in seconds (or "all day"), the text and the targets.
    static func schedule(_ e: ScheduleElement, _ date: (Date?) -> JSONValue) -> JSONValue {
        var duration: JSONValue = "all day"
        if case .seconds(let s) = e.duration { duration = .number(s) }
        var interval: [(String, JSONValue)] = []
        for (key, component) in [("year", Calendar.Component.year), ("month", .month), ("week", .weekOfYear), ("day", .day),
                                 ("hour", .hour), ("minute", .minute), ("second", .second)] {
            if let v = e.interval.value(for: component), v != 0 { interval.append((key, .init(v))) }
        }
        return ["start": date(e.start), "end": date(e.end), "every": .object(interval), "duration": duration, "text": .init(e.text),
                "targets": .init(e.targetValues.map { "\($0.value) \($0.units ?? "")".trimmingCharacters(in: .whitespaces) })]
    }
}

/// Runs the `tests` of mapping files: each input imported into an empty store at the test's time
/// and zone, compared with the expected snapshot.
public struct GoldenTestRunner: Sendable {
    /// One test's result.
    public struct Outcome: Sendable {
        /// The mapping file declaring the test.
        public var mapping: String
        /// The input file.
        public var input: String
        /// The expected snapshot file.
        public var expect: String
        /// Nil when the snapshot matches; otherwise the differing lines (`- expected`, `+ actual`).
        public var difference: [String]?
        /// A failure before comparing (a file that cannot be read).
        public var error: String?
        /// Whether the snapshot matched.
        public var passed: Bool { difference == nil && error == nil }
    }

    /// The mapping files whose tests run, and which map their inputs.
    public var mappings: MappingSet
    /// A new, empty store for each test (an in-memory one: `SQLiteCarePlanStore(inMemory: ())`).
    public var emptyStore: @Sendable () throws -> any CarePlanStore

    /// A runner making a new store for each test with `emptyStore`.
    public init(mappings: MappingSet, emptyStore: @escaping @Sendable () throws -> any CarePlanStore) {
        self.mappings = mappings
        self.emptyStore = emptyStore
    }

    /// Runs the tests of `files` (default: every file of the set), importing with the whole
    /// set; with `update`, writes the snapshots instead of comparing. A missing input or
    /// snapshot is a failure here, and only here.
    public func run(update: Bool = false, testsOf files: [MappingFile]? = nil) -> [Outcome] {
        var outcomes: [Outcome] = []
        for file in (files ?? Array(mappings.files.values)).sorted(by: { $0.path < $1.path }) {
            for test in file.tests {
                var outcome = Outcome(mapping: test.file, input: MappingSource.resolve(test.input, from: test.file),
                                      expect: MappingSource.resolve(test.expect, from: test.file))
                do {
                    outcome.difference = try compare(outcome, test, update: update)
                } catch {
                    outcome.error = "\(error)"
                }
                outcomes.append(outcome)
            }
        }
        return outcomes
    }

    /// The differing lines of one test (nil when equal, or when `update` wrote the snapshot).
    func compare(_ outcome: Outcome, _ test: GoldenTest, update: Bool) throws -> [String]? {
        guard MappingSource.exists(outcome.input) else { throw GoldenTestError("the test input '\(test.input)' does not exist (named in \(outcome.mapping))") }
        let actual = try snapshot(of: outcome.input, test: test)
        if update {
            guard !MappingSource.isBuiltIn(outcome.expect) else {
                throw GoldenTestError("the built-in snapshots cannot be updated: write the files out with caregate mappings dump DIR and test those")
            }
            // A snapshot holds patients' data: never written outside the mapping file's folder.
            guard MappingSource.isInsideFolder(outcome.expect, of: outcome.mapping) else {
                throw GoldenTestError("the expected snapshot '\(test.expect)' is outside the folder of \(outcome.mapping); not written")
            }
            try actual.write(toFile: outcome.expect, atomically: true, encoding: .utf8)
            return nil
        }
        guard let expected = MappingSource.contents(outcome.expect) else {
            throw GoldenTestError("the expected snapshot '\(test.expect)' does not exist (caregate test --update writes it)")
        }
        let text = String(decoding: expected, as: UTF8.self)
        return text == actual ? nil : GoldenTestRunner.diff(text, actual)
    }

    func snapshot(of input: String, test: GoldenTest) throws -> String {
        let (store, report, zone, _) = try imported(input, test: test)
        return try StoreSnapshot.json(store, notes: report.notes, timeZone: zone)
    }

    /// A new store holding what the test's input imports as, at the test's time and zone.
    func imported(_ input: String, test: GoldenTest) throws -> (store: any CarePlanStore, report: ImportReport, zone: TimeZone, now: Date) {
        let zone = TimeZone(identifier: test.timeZone) ?? TimeZone(identifier: "UTC")!
        let now = FHIRDateTime(test.now).map { $0.start(in: zone) } ?? Date(timeIntervalSince1970: 1_767_225_600)
        let store = try emptyStore()
        let report = FHIRImporter(mappings: mappings, store: store, timeZone: zone, now: now).run([input])
        if let failed = report.failedPatients.first { throw StoreError.database(path: input, message: failed.failure ?? "import failed") }
        return (store, report, zone, now)
    }

    /// The lines only one side has, in order (`- ` expected, `+ ` actual), by longest common subsequence.
    static func diff(_ expected: String, _ actual: String) -> [String] {
        let a = expected.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let b = actual.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var lines: [String] = []
        var i = 0, j = 0
        while i < a.count || j < b.count {
            if i < a.count, j < b.count, a[i] == b[j] { i += 1; j += 1 }
            else if j < b.count, i == a.count || table[i][j + 1] >= table[i + 1][j] { lines.append("+ " + b[j]); j += 1 }
            else { lines.append("- " + a[i]); i += 1 }
        }
        return lines
    }
}

/// Why a golden test could not be run.
public struct GoldenTestError: Error, CustomStringConvertible, Sendable {
    public var description: String
    init(_ description: String) { self.description = description }
}
