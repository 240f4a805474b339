import CareStore
import FHIR
import Foundation
import Testing
@testable import Mapping

/// Legal but hostile numbers in Timings and values: reported for their field, bounded, never a
/// trap or an allocation in proportion to the number.
@Suite("Hostile numbers in Timings and values")
struct HostileNumberTests {
    let converter = TimingConverter(timeZone: newYork)

    @Test("a period, duration or bound past 10,000 years makes the Timing unschedulable, naming the field")
    func outOfRange() throws {
        let cases = [
            (#"{"repeat": {"frequency": 1, "period": 1e20, "periodUnit": "d"}}"#, "repeat.period"),
            (#"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "boundsDuration": {"value": 1e20, "unit": "d", "system": "http://unitsofmeasure.org", "code": "d"}}}"#, "repeat.boundsDuration.value"),
            (#"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "duration": 1e300, "durationUnit": "h"}}"#, "repeat.duration"),
            (#"{"repeat": {"frequency": 1, "period": 1, "periodUnit": "h", "periodMax": 1e20}}"#, "repeat.periodMax"),
        ]
        for (json, field) in cases {
            let result = converter.convert(try timing(json), anchor: anchor)
            #expect(result.elements.isEmpty, "\(field)")
            #expect(result.unschedulable?.hasPrefix(field) == true, "\(result.unschedulable ?? "schedulable")")
        }
    }

    @Test("huge frequencies and counts are expanded to the documented limits, with a loss naming them")
    func boundedExpansion() throws {
        let perDay = converter.convert(try timing(#"{"repeat": {"frequency": 2147483647, "period": 1, "periodUnit": "d"}}"#), anchor: anchor)
        #expect(perDay.elements.count == TimingLimits.maximumPerDay)
        #expect(perDay.losses.contains { $0.path == "repeat.frequency" && $0.message.contains("2147483647 times a day") })
        let perSecond = converter.convert(try timing(#"{"repeat": {"count": 2147483647, "frequency": 1, "period": 1, "periodUnit": "s"}}"#), anchor: anchor)
        #expect(perSecond.losses.contains { $0.path == "repeat.period" && $0.message.contains("every 60 s") })
        #expect(perSecond.losses.contains { $0.path == "repeat.count" && $0.message.contains("\(TimingLimits.maximumCount)") })
        let schedule = try #require(perSecond.schedule)
        let end = try #require(schedule.endDate)
        #expect(schedule.events(from: anchor, to: end).count == TimingLimits.maximumCount)
        #expect(end.timeIntervalSince(anchor) < Double(TimingLimits.maximumCount * 60) + 120)
    }

    @Test("a count whose last occurrence is decades away still ends the schedule after that occurrence")
    func distantCountEnd() throws {
        // Once a week, 1,500 times: the last dose is almost 29 years after the first. The schedule
        // used to be listed year by year for 12 years, then left open-ended.
        let weekly = converter.convert(try timing(#"{"repeat": {"count": 1500, "frequency": 1, "period": 1, "periodUnit": "wk"}}"#), anchor: anchor)
        let schedule = try #require(weekly.schedule)
        let end = try #require(schedule.endDate, "the count ends the schedule")
        let last = try #require(schedule.event(occurrence: 1499))
        #expect(end == last.start.addingTimeInterval(1))
        #expect(schedule.event(occurrence: 1500) == nil)
    }

    @Test("an Observation value of 1e20 and a Timing period of 1e20 import as a double and a reported daily task; the other resources import")
    func engineSurvives() throws {
        let set = try MappingSet.load([mappingsDirectory.path])
        let plan = try FHIRJSONReader(options: ParseOptions(lenient: true)).read("""
            {"resourceType": "CarePlan", "id": "huge", "status": "active", "intent": "plan", "subject": {"reference": "Patient/p"},
             "activity": [{"detail": {"status": "scheduled", "code": {"text": "Walk"},
                           "scheduledTiming": {"repeat": {"frequency": 1, "period": 1e20, "periodUnit": "d"}}}},
                          {"detail": {"status": "scheduled", "code": {"text": "Weigh"},
                           "scheduledTiming": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d"}}}}]}
            """).resource
        let observation = try FHIRJSONReader().read("""
            {"resourceType": "Observation", "id": "o", "status": "final", "subject": {"reference": "Patient/p"},
             "code": {"coding": [{"system": "http://loinc.org", "code": "29463-7"}]}, "effectiveDateTime": "2026-11-02T08:00:00-05:00",
             "valueQuantity": {"value": 1e20, "unit": "kg", "system": "http://unitsofmeasure.org", "code": "kg"}}
            """).resource
        let output = MappingEngine(mappings: set, timeZone: newYork, now: anchor)
            .map([SourcedResource(resource: plan, origin: "plan.json"), SourcedResource(resource: observation, origin: "obs.json")])
        let tasks = output.batches.flatMap(\.tasks)
        #expect(tasks.count == 2, "both activities are tasks")
        #expect(output.notes.contains { $0.kind == .loss && $0.message.contains("repeat.period 1e+20 d is out of range") }, "\(output.notes)")
        let value = try #require(output.batches.flatMap(\.outcomes).first?.values.first)
        #expect(value.value == .double(1e20))
    }
}

@Suite("Hostile mapping files")
struct HostileMappingFileTests {
    @Test("a YAML alias bomb of a few hundred bytes is refused with its file, quickly and in little memory")
    func aliasBomb() throws {
        var yaml = "caregate-mapping: 1\nresource: Patient\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
        var previous = "a"
        for level in ["b", "c", "d", "e", "f", "g", "h", "i"] {
            yaml += "\(level): &\(level) [*\(previous), *\(previous), *\(previous), *\(previous), *\(previous), *\(previous), *\(previous), *\(previous), *\(previous), *\(previous)]\n"
            previous = level
        }
        #expect(yaml.utf8.count < 700)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-bomb-\(UUID().uuidString).yaml")
        try yaml.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let started = Date()
        let found = MappingValidator().check(path: file.path).diagnostics.map(\.description)
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(found.contains { $0.hasPrefix("\(file.path):1:1: error: YAML: the document expands to more than 100000 values") }, "\(found)")
    }
}

extension HostileMappingFileTests {
    @Test("a key that is a list, a mapping or an alias of one is refused at its place before Yams composes the file (Yams sorts such keys in exponential time)")
    func complexKeys() throws {
        func refusal(_ yaml: String) -> String? {
            do { _ = try YAMLTree.parse(yaml, file: "keys.yaml"); return nil } catch { return error.diagnostics.first?.description }
        }
        #expect(refusal("caregate-mapping: 1\n? [a, b]\n: 1\n") == "keys.yaml:2:3: error: YAML: a key must be a plain value, not a list")
        #expect(refusal("resource: Patient\nrules:\n  {a: 1}: x\n") == "keys.yaml:3:3: error: YAML: a key must be a plain value, not a mapping")
        #expect(refusal("base: &b {x: 1}\nother:\n  *b : 2\n") == "keys.yaml:3:3: error: YAML: a key must be a plain value, not an alias of a list or mapping (*b)")
        // Plain keys, aliases of plain values, collections as values and merge keys are all fine.
        #expect(refusal("name: &n text\n*n : 2\nlist: [{a: 1}, [b]]\nbase: &b {x: 1}\nmore:\n  <<: *b\n  y: 2\n") == nil)

        // Twice the same key nested 40 deep: Yams would compare the two for ever.
        var key = "x"
        for _ in 0..<40 { key = "{k: [\(key)]}" }
        let yaml = "? \(key)\n: 1\n? \(key)\n: 2\n"
        let started = Date()
        #expect(refusal(yaml) == "keys.yaml:1:3: error: YAML: a key must be a plain value, not a mapping")
        #expect(Date().timeIntervalSince(started) < 1)
    }
}

@Suite("Golden snapshots stay in their folder")
struct GoldenSnapshotFolderTests {
    @Test("an expected snapshot outside the mapping file's folder (.., absolute, through a symlinked folder) is an error; inside is fine")
    func confinement() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-golden-\(UUID().uuidString)")
        let site = root.appendingPathComponent("site")
        try FileManager.default.createDirectory(at: site.appendingPathComponent("tests"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: site.appendingPathComponent("escape"), withDestinationURL: root)
        defer { try? FileManager.default.removeItem(at: root) }
        let file = site.appendingPathComponent("patient.yaml").path
        for expect in ["../../victim.txt", "/tmp/victim.txt", "escape/victim.txt", "tests/../../victim.txt"] {
            #expect(!MappingSource.isInsideFolder(MappingSource.resolve(expect, from: file), of: file), "\(expect)")
            try "caregate-mapping: 1\nresource: Patient\nextends: builtin:patient.yaml\ntests:\n  - input: p.json\n    expect: \(expect)\n".write(toFile: file, atomically: true, encoding: .utf8)
            let found = MappingValidator().check(path: file).diagnostics.map(\.description)
            #expect(found.contains { $0.contains("error: the expected snapshot '\(expect)' is outside the mapping file's folder") }, "\(found)")
        }
        for expect in ["tests/p.expected.json", "p.expected.json", "tests/new/p.json"] {
            #expect(MappingSource.isInsideFolder(MappingSource.resolve(expect, from: file), of: file), "\(expect)")
        }
    }

    @Test("a test's 'now' is an instant with its offset; a date, a time without an offset or a made-up day is an error at its line")
    func testNow() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-now-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let file = root.appendingPathComponent("patient.yaml").path
        for (now, valid) in [("2026-11-01T09:00:00-05:00", true), ("2026-11-01T09:00:00.250Z", true), ("2026-11-01", false),
                             ("2026-11-01T09:00:00", false), ("2026-02-30T09:00:00Z", false), ("tomorrow", false)] {
            try "caregate-mapping: 1\nresource: Patient\nextends: builtin:patient.yaml\ntests:\n  - input: p.json\n    expect: p.expected.json\n    now: \"\(now)\"\n"
                .write(toFile: file, atomically: true, encoding: .utf8)
            let errors = MappingValidator().check(path: file).diagnostics.map(\.description).filter { $0.contains("'now' is an ISO 8601 instant") }
            #expect(errors.count == (valid ? 0 : 1) && errors.allSatisfy { $0.hasPrefix(file + ":7:") }, "\(now): \(errors)")
        }
    }
}
