import Foundation
import Testing
@testable import Mapping

@Suite("Built-in mapping files")
struct BuiltInMappingTests {
    @Test("the binary holds every file of Mappings/, byte for byte, and nothing else")
    func sameAsRepository() throws {
        let enumerator = try #require(FileManager.default.enumerator(atPath: mappingsDirectory.path))
        var onDisk: [String: Data] = [:]
        for case let relative as String in enumerator {
            var isDirectory: ObjCBool = false
            let path = mappingsDirectory.appendingPathComponent(relative).path
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
                onDisk[relative] = try Data(contentsOf: URL(fileURLWithPath: path))
            }
        }
        #expect(Set(onDisk.keys) == Set(BuiltInMappings.files.keys), "list a new file of Mappings/ in BuiltInMappings.files")
        for (relative, bytes) in BuiltInMappings.files { #expect(onDisk[relative] == Data(bytes), "\(relative)") }
    }

    @Test("the built-in set loads with no error and maps the same types as Mappings/")
    func loads() throws {
        let builtIn = try MappingSet.load(["builtin:"])
        let repository = try MappingSet.load([mappingsDirectory.path])
        #expect(Set(builtIn.files.keys) == Set(repository.files.keys))
        #expect(builtIn.files["CarePlan"]?.path == "builtin:careplan.yaml")
        #expect(builtIn.sharedTables.observationCodes.count == repository.sharedTables.observationCodes.count)
        #expect(builtIn.files["CarePlan"]?.tables.timing.codes == repository.files["CarePlan"]?.tables.timing.codes)
    }

    @Test("builtin: paths resolve relative names inside the built-in files; other paths against their folder")
    func resolution() {
        #expect(MappingSource.resolve("shared/timing.yaml", from: "builtin:careplan.yaml") == "builtin:shared/timing.yaml")
        #expect(MappingSource.resolve("../careplan.yaml", from: "builtin:shared/timing.yaml") == "builtin:careplan.yaml")
        #expect(MappingSource.resolve("builtin:careplan.yaml", from: "/site/careplan.yaml") == "builtin:careplan.yaml")
        #expect(MappingSource.resolve("shared/t.yaml", from: "/site/careplan.yaml") == "/site/shared/t.yaml")
        #expect(MappingSource.exists("builtin:shared/timing.yaml") && !MappingSource.exists("builtin:nothing.yaml"))
    }

    @Test("a site file replaces the built-in file of its type; a site table file adds to the built-in tables")
    func siteOverBuiltIn() throws {
        let site = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-site-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: site) }
        try "caregate-mapping: 1\nresource: CarePlan\nextends: builtin:careplan.yaml\ndescription: the clinic's\n"
            .write(to: site.appendingPathComponent("careplan.yaml"), atomically: true, encoding: .utf8)
        try "caregate-mapping: 1\ntables:\n  units:\n    \"[drp]\": drops\n"
            .write(to: site.appendingPathComponent("units.yaml"), atomically: true, encoding: .utf8)
        let set = try MappingSet.load(site: [site.path])
        #expect(set.files["CarePlan"]?.description == "the clinic's")
        #expect(set.files["CarePlan"]?.tasks.isEmpty == false, "the rules come from builtin:careplan.yaml")
        #expect(set.files["Patient"]?.path == "builtin:patient.yaml")
        #expect(set.sharedTables.units["[drp]"] == "drops")
        #expect(set.sharedTables.units["mg"] != nil, "built-in units stay")
        #expect(try MappingSet.load(site: []).files["CarePlan"]?.path == "builtin:careplan.yaml")
        // A file that names a missing built-in file says so.
        try "caregate-mapping: 1\nresource: CarePlan\nextends: builtin:care-plan.yaml\n".write(to: site.appendingPathComponent("careplan.yaml"), atomically: true, encoding: .utf8)
        #expect(throws: MappingError.self) { try MappingSet.load(site: [site.path]) }
        let found = MappingValidator().check(path: site.appendingPathComponent("careplan.yaml").path).diagnostics.map(\.description)
        #expect(found.contains { $0.hasPrefix("builtin:care-plan.yaml:1:1: error: there is no such built-in file (builtin:careplan.yaml, builtin:careteam.yaml,") }, "\(found)")
    }
}

@Suite("Built-in mappings in provenance")
struct BuiltInProvenanceTests {
    @Test("provenance names a built-in rule's file as it names the same file on disk, so switching between them changes nothing")
    func sameRuleName() {
        #expect(MappingSource.fileName("builtin:careplan.yaml") == "careplan.yaml")
        #expect(MappingSource.fileName("builtin:shared/timing.yaml") == "timing.yaml")
        #expect(MappingSource.fileName("/repo/Mappings/careplan.yaml") == "careplan.yaml")
    }
}
