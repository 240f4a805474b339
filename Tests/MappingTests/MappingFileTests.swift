import Foundation
import Testing
@testable import Mapping

let mappingsDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Mappings")

func shippedMappingPaths() throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: mappingsDirectory.path).filter { $0.hasSuffix(".yaml") }.sorted()
        .map { mappingsDirectory.appendingPathComponent($0).path }
}

/// Loads and validates; every diagnostic as text, paths relative to Mappings/.
func diagnostics(_ path: String) -> [String] {
    MappingValidator().check(path: path).diagnostics.map { $0.description.replacingOccurrences(of: mappingsDirectory.path + "/", with: "") }
}

@Suite("Mapping files")
struct MappingFileTests {
    @Test("every shipped mapping file and shared table loads and validates with no error and no warning")
    func shipped() throws {
        let paths = try shippedMappingPaths()
        #expect(paths.count == 7)
        for path in paths + ["shared/timing.yaml", "shared/healthkit.yaml", "shared/task-codes.yaml"].map({ mappingsDirectory.appendingPathComponent($0).path }) {
            #expect(diagnostics(path).isEmpty, "\(path)")
        }
        let (contents, _) = MappingLoader().read(mappingsDirectory.appendingPathComponent("shared/timing.yaml").path)
        guard case .tables(let tables) = contents else { Issue.record("shared/timing.yaml is read as tables"); return }
        let timing = tables.timing
        // The shipped table file says what the built-in defaults say.
        #expect(timing.codes == TimingTables.standard.codes)
        #expect(timing.eventTimes == TimingTables.standard.eventTimes)
    }
}

/// Writes a mapping file (and any others) into a fresh folder; returns the first one's path.
func writeMappings(_ files: [String: String]) throws -> String {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-mapping-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    for (name, text) in files {
        let url = directory.appendingPathComponent(name)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
    }
    return directory.appendingPathComponent(files.keys.sorted().first { $0.hasPrefix("main") } ?? files.keys.sorted()[0]).path
}

func check(_ text: String, extra: [String: String] = [:]) throws -> [String] {
    let path = try writeMappings(["main.yaml": text].merging(extra) { $1 })
    let directory = (path as NSString).deletingLastPathComponent + "/"
    return diagnostics(path).map { $0.replacingOccurrences(of: directory, with: "") }
}

@Suite("Mapping validation")
struct MappingValidationTests {
    @Test("FHIRPath errors point at the line and column inside the file, with suggestions")
    func expressions() throws {
        let found = try check("""
            caregate-mapping: 1
            resource: CarePlan
            patient: subject
            care-plan:
              id: "'CarePlan/' & id"
              title: titel
            tasks:
              - name: detail
                each: activity.where(detial.exists())
                id: "%resource.id & '/' & %index.toString()"
                timing: detail.code
                title: detail.description.startsWith('x'
            """)
        let expected = [
            "main.yaml:6:10: error: 'titel' is not an element of CarePlan; did you mean 'title'?",
            "main.yaml:9:26: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?",
            "main.yaml:11:13: error: this must give a Timing, Period, dateTime or string, not CodeableConcept",
            "main.yaml:12:45: error: expected ')' after the arguments of startsWith(...), found the end of the expression",
        ]
        #expect(found == expected)
    }

    @Test("unknown keys, missing keys and wrong shapes are errors naming the place")
    func structure() throws {
        let found = try check("""
            caregate-mapping: 2
            resource: CarePlann
            tasks:
              - name: a
                titel: title
                each: activity
              - each: activity
                id: "%resource.id & %index.toString()"
            contacts: not-a-list
            """)
        #expect(found.contains("main.yaml:1:19: error: caregate-mapping 2 is not a format this CareGate reads (1)"))
        #expect(found.contains("main.yaml:2:11: error: 'CarePlann' is not an R4 resource type; did you mean 'CarePlan'?"))
        #expect(found.contains("main.yaml:5:5: error: unknown key 'titel' in a task rule; did you mean 'title'?"))
        #expect(found.contains("main.yaml:7:5: error: a task rule needs a 'name' (for messages, overrides and tests)"))
        #expect(found.contains("main.yaml:9:11: error: 'contacts' takes a list (lines starting with '- '), not a value"))
    }

    @Test("export-as: the resource, its medication system, and where MedicationAdministration is allowed")
    func exportAs() throws {
        let onCarePlan = try check("""
            caregate-mapping: 1
            resource: CarePlan
            export-as:
              resource: MedicationAdministration
            """)
        #expect(onCarePlan.contains("main.yaml:3:1: error: export-as MedicationAdministration is for medication tasks (a MedicationRequest mapping), not CarePlan"), "\(onCarePlan)")
        let wrong = try check("""
            caregate-mapping: 1
            resource: MedicationRequest
            export-as:
              resource: MedicationStatement
              medication-system: rxnorm please
              medicaton-system: x
            """)
        #expect(wrong.contains("main.yaml:4:13: error: outcomes are exported as Observation or MedicationAdministration, not 'MedicationStatement'"), "\(wrong)")
        #expect(wrong.contains("main.yaml:5:22: error: 'rxnorm please' is not a URI (the code system of the tasks' group codes, such as RxNorm's)"), "\(wrong)")
        #expect(wrong.contains("main.yaml:6:3: error: unknown key 'medicaton-system' in export-as; did you mean 'medication-system'?"), "\(wrong)")
        let missing = try check("""
            caregate-mapping: 1
            resource: MedicationRequest
            export-as:
              medication-system: http://www.nlm.nih.gov/research/umls/rxnorm
            """)
        #expect(missing.contains("main.yaml:3:1: error: export-as needs a resource (Observation or MedicationAdministration)"), "\(missing)")
        #expect(missing.contains("main.yaml:3:1: error: medication-system belongs with resource: MedicationAdministration"), "\(missing)")
    }

    @Test("task ids that would collide, fields of the wrong type, unreachable rules, tables")
    func semantics() throws {
        let found = try check("""
            caregate-mapping: 1
            resource: CarePlan
            patient: subject
            skip:
              - if: "true"
                reason: everything
              - if: status = 'draft'
                reason: drafts
            care-plan:
              id: "'CarePlan/' & id"
            tasks:
              - name: a
                each: activity
                id: "%resource.id & '/x'"
                as-needed: detail.code
              - name: b
                id: "'same-for-all'"
            tables:
              event-times:
                ACM: "7:30"
              units:
                mg/dL: mg/dL
                milligram: mg
              healthkit:
                loinc|29463-7: {identifier: HKQuantityTypeIdentifierBodyMass, type: discrete, unit: kg}
              task-codes:
                http://snomed.info/sct|1: {title: One, colour: red}
            """)
        #expect(found.contains("main.yaml:7:5: warning: never reached: the skip rule at line 5 applies to everything"))
        #expect(found.contains("main.yaml:14:9: error: this id does not depend on the item: every item of 'each' would get the same id (use a path from the item, or %index)"))
        #expect(found.contains("main.yaml:15:16: error: this must give Boolean, not collection of CodeableConcept") || found.contains("main.yaml:15:16: error: this must give Boolean, not CodeableConcept"))
        #expect(found.contains("main.yaml:17:9: error: this id does not depend on the resource: every CarePlan would make the same task (use %resource.id)"))
        #expect(found.contains("main.yaml:20:10: error: a clock time is written hh:mm (\"07:30\"), not '7:30'"))
        #expect(found.contains("main.yaml:23:5: error: 'milligram' is not a valid UCUM unit"))
        #expect(found.contains("main.yaml:25:5: error: the code system 'loinc' is not a URI"))
        #expect(found.contains("main.yaml:27:44: error: unknown key 'colour' in a task-codes entry"))
        #expect(!found.contains { $0.contains("mg/dL") })
    }

    @Test("YAML syntax errors and duplicate keys are reported at their place")
    func yaml() throws {
        #expect(try check("caregate-mapping: 1\nresource: CarePlan\ntasks:\n  - name: [unclosed\n").first?.hasPrefix("main.yaml:5:1: error: YAML:") == true)
        #expect(try check("caregate-mapping: 1\nresource: CarePlan\nresource: Patient\n").first?.contains("error: YAML: the key 'resource' appears twice in one mapping") == true)
        // Without a final newline libyaml names the line after the last; it is shown at the end of the last (found by fuzz-mapping).
        let unfinished = try check("caregate-mapping: 1\nresource: CarePlan\ntasks:\n  - name: [unclosed").first
        #expect(unfinished?.hasPrefix("main.yaml:4:20: error: YAML:") == true, "\(unfinished ?? "")")
        // The same for a node there: the null of an empty last document (found by fuzz-mapping).
        let empty = try check("# R4) )  .;~idescendants()  -~if:\n---").first
        #expect(empty?.hasPrefix("main.yaml:2:4: error:") == true, "\(empty ?? "")")
        // CRLF and lone CR end lines as LF does: an error on line 4 stays on line 4.
        for lineEnd in ["\r\n", "\r"] {
            let text = ["caregate-mapping: 1", "resource: CarePlan", "tasks:", "  - name: [unclosed"].joined(separator: lineEnd)
            let found = try check(text).first
            #expect(found?.hasPrefix("main.yaml:4:20: error: YAML:") == true, "\(found ?? "")")
        }
    }

    @Test("a site file extends a shipped one: rules by name, table entries by key, the rest unchanged")
    func extends() throws {
        // The shipped file without its golden tests (their files are not copied here).
        let shipped = try String(contentsOfFile: mappingsDirectory.appendingPathComponent("careplan.yaml").path, encoding: .utf8)
        let base = String(shipped[..<(shipped.range(of: "\ntests:")?.lowerBound ?? shipped.endIndex)])
        let path = try writeMappings([
            "main-site.yaml": """
                caregate-mapping: 1
                resource: CarePlan
                extends: careplan.yaml
                tables:
                  event-times:
                    ACM: "06:45"
                tasks:
                  - name: activity-detail
                    group: detail.category.coding.code.first()
                """,
            "careplan.yaml": base,
            "shared/timing.yaml": try String(contentsOfFile: mappingsDirectory.appendingPathComponent("shared/timing.yaml").path, encoding: .utf8),
            "shared/healthkit.yaml": try String(contentsOfFile: mappingsDirectory.appendingPathComponent("shared/healthkit.yaml").path, encoding: .utf8),
            "shared/task-codes.yaml": try String(contentsOfFile: mappingsDirectory.appendingPathComponent("shared/task-codes.yaml").path, encoding: .utf8),
        ])
        let (file, found) = MappingLoader().load(path)
        let merged = try #require(file)
        #expect(found.isEmpty, "\(found)")
        // The override's expression is checked in its own file: CarePlan.activity.detail has no category.
        let errors = MappingValidator().validate(merged).map(\.description)
        #expect(errors == ["\(path):9:19: error: 'category' is not an element of CarePlan.activity.detail"])
        #expect(merged.tables.timing.eventTimes["ACM"] == 6 * 60 + 45)
        #expect(merged.tables.timing.eventTimes["ACV"] == 18 * 60 + 30)
        #expect(merged.tasks.map(\.name) == ["activity-detail", "activity-reference", "activity-without-content"])
        #expect(merged.tasks[0].fields["group"]?.text == "detail.category.coding.code.first()")
        #expect(merged.tasks[0].fields["timing"]?.text == "detail.scheduled")
        #expect(merged.skip.count == 3)
    }
}

@Suite("Loading a set of mapping files")
struct MappingSetLoadTests {
    static let patient = """
        caregate-mapping: 1
        resource: Patient
        include:
          - shared/times.yaml
        patient-fields:
          id: "'Patient/' & id"
        """

    static func times(_ clock: String) -> String {
        "caregate-mapping: 1\ntables:\n  event-times:\n    ACM: \"\(clock)\"\n"
    }

    @Test("a file that several files include is parsed once per loader: a loader made later reads it again")
    func includedOnce() throws {
        let first = try writeMappings(["a.yaml": Self.patient, "b.yaml": Self.patient, "shared/times.yaml": Self.times("06:45")])
        let folder = (first as NSString).deletingLastPathComponent
        let loader = MappingLoader()
        guard case .mapping(let a?) = loader.read(folder + "/a.yaml").contents else { Issue.record("a.yaml is a mapping"); return }
        try Self.times("07:15").write(toFile: folder + "/shared/times.yaml", atomically: true, encoding: .utf8)
        guard case .mapping(let b?) = loader.read(folder + "/b.yaml").contents else { Issue.record("b.yaml is a mapping"); return }
        #expect(a.tables.timing.eventTimes["ACM"] == 6 * 60 + 45)
        #expect(b.tables.timing.eventTimes["ACM"] == 6 * 60 + 45)
        guard case .mapping(let again?) = MappingLoader().read(folder + "/b.yaml").contents else { Issue.record("b.yaml is a mapping"); return }
        #expect(again.tables.timing.eventTimes["ACM"] == 7 * 60 + 15)
    }

    @Test("files read side by side are merged in the order listed: findings in file order, the second mapping of a type named against the first")
    func inOrder() throws {
        let broken = "caregate-mapping: 1\nresource: Patient\npatient-fields:\n  id: idd\n"
        let first = try writeMappings(["a.yaml": Self.patient, "b.yaml": broken, "c.yaml": broken, "shared/times.yaml": Self.times("06:45")])
        let folder = (first as NSString).deletingLastPathComponent
        for _ in 0..<5 {
            do {
                _ = try MappingSet.load([folder])
                Issue.record("three mappings of Patient, two with errors, are refused")
            } catch {
                let found = error.diagnostics.map { $0.description.replacingOccurrences(of: folder + "/", with: "") }
                #expect(found == [
                    "b.yaml:2:1: error: a second mapping for Patient (the first is a.yaml); use extends to override one",
                    "b.yaml:4:7: error: 'idd' is not an element of Patient; did you mean 'id'?",
                    "c.yaml:2:1: error: a second mapping for Patient (the first is b.yaml); use extends to override one",
                    "c.yaml:4:7: error: 'idd' is not an element of Patient; did you mean 'id'?",
                ])
            }
        }
        let set = try MappingSet.load([folder + "/a.yaml", folder + "/shared/times.yaml"])
        #expect(set.files["Patient"]?.tables.timing.eventTimes["ACM"] == 6 * 60 + 45)
    }
}
