import FHIR
import FHIRPackages
import Foundation
import JSON
import Testing

@Suite("FHIR packages: archives, folders and loose files; canonicals with versions")
struct FHIRPackageTests {
    @Test("US Core 3.1.1 and 6.1.0 are read from their .tgz with manifest, resources and examples")
    func archives() throws {
        guard let old = try SharedData.usCore("3.1.1"), let new = try SharedData.usCore("6.1.0") else {
            return SharedData.skipNotice("US Core archives")
        }
        #expect(old.id == "hl7.fhir.us.core#3.1.1")
        #expect(new.id == "hl7.fhir.us.core#6.1.0")
        #expect(old.dependencies == [.init(name: "hl7.fhir.r4.core", version: "4.0.1")])
        #expect(new.dependencies.map(\.name).contains("hl7.terminology.r4"))
        // As `tar tzf` lists them: the top-level conformance resources and the examples.
        #expect(old.resources.filter { $0.resourceType == "StructureDefinition" }.count == 30)
        #expect(old.resources.filter { $0.resourceType == "ValueSet" }.count == 32)
        #expect(new.resources.contains { $0.url == "http://hl7.org/fhir/us/core/StructureDefinition/us-core-blood-pressure" && $0.version == "6.1.0" })
        #expect(old.examples.count > 40 && new.examples.count > 100)
        #expect(!new.examples.contains { $0.file.contains("/.") })
    }

    @Test("an unpacked folder reads as the archive does, from the folder or from its package/ folder")
    func unpacked() throws {
        guard let archived = try SharedData.usCore("3.1.1"), let packages = SharedData.packages else {
            return SharedData.skipNotice("unpacked package")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-package-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tar = Process()
        tar.executableURL = URL(fileURLWithPath: "/usr/bin/tar")
        tar.arguments = ["xzf", packages.appendingPathComponent("hl7.fhir.us.core-3.1.1.tgz").path, "-C", folder.path]
        try tar.run()
        tar.waitUntilExit()
        for path in [folder.path, folder.path + "/package"] {
            let unpacked = try FHIRPackage.load(path: path)
            #expect(unpacked.id == archived.id)
            #expect(unpacked.resources.map(\.versionedURL).sorted() == archived.resources.map(\.versionedURL).sorted())
            #expect(unpacked.examples.map(\.file) == archived.examples.map(\.file))
        }
    }

    @Test("a site's loose StructureDefinition, as JSON or XML, is read as a package of one")
    func looseFiles() throws {
        guard let package = try SharedData.usCore("6.1.0") else { return SharedData.skipNotice("loose files") }
        let profile = try #require(package.resources.first { $0.url.hasSuffix("us-core-body-weight") })
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-loose-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let json = folder.appendingPathComponent("site-weight.json")
        try Data(profile.json.bytes()).write(to: json)
        let element = try FHIRJSONReader().read(profile.json.bytes()).resource
        let xml = folder.appendingPathComponent("site-weight.xml")
        try Data(FHIRDocument.write(element, format: .xml)).write(to: xml)

        let fromJSON = try FHIRPackage.load(path: json.path)
        #expect(fromJSON.resources.map(\.versionedURL) == [profile.versionedURL])
        let fromXML = try FHIRPackage.load(path: xml.path)
        #expect(fromXML.resources.map(\.versionedURL) == [profile.versionedURL])
        #expect(fromXML.resources[0].json["snapshot"]?["element"]?.arrayValue?.count == profile.json["snapshot"]?["element"]?.arrayValue?.count)
        let fromFolder = try FHIRPackage.load(path: folder.path)
        #expect(fromFolder.resources.count == 2)
    }

    @Test("unreadable input is refused naming the file and what is wrong")
    func refusals() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-bad-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(throws: FHIRPackageError.notFound(path: folder.path + "/none.tgz")) { try FHIRPackage.load(path: folder.path + "/none.tgz") }

        if let packages = SharedData.packages {
            let whole = try Data(contentsOf: packages.appendingPathComponent("hl7.fhir.us.core-3.1.1.tgz"))
            let truncated = folder.appendingPathComponent("truncated.tgz")
            try whole.prefix(whole.count / 2).write(to: truncated)
            do {
                _ = try FHIRPackage.load(path: truncated.path)
                Issue.record("a truncated archive was read")
            } catch {
                #expect("\(error)".hasPrefix(truncated.path + ": cannot be read:"), "\(error)")
            }
        }
        let notJSON = folder.appendingPathComponent("broken.json")
        try Data("{\"resourceType\": \"StructureDefinition\", ".utf8).write(to: notJSON)
        do {
            _ = try FHIRPackage.load(path: notJSON.path)
            Issue.record("a broken file was read")
        } catch {
            #expect("\(error)".contains("broken.json"), "\(error)")
        }
        let patient = folder.appendingPathComponent("patient.json")
        try Data("{\"resourceType\": \"Patient\", \"id\": \"p\"}".utf8).write(to: patient)
        #expect(throws: FHIRPackageError.self) { try FHIRPackage.load(path: patient.path) }
    }

    @Test("canonicals resolve by version, by the referring package, else to the highest version")
    func canonicals() throws {
        guard let old = try SharedData.usCore("3.1.1"), let new = try SharedData.usCore("6.1.0") else {
            return SharedData.skipNotice("canonical resolution")
        }
        let set = ConformanceSet(packages: [new, old])
        let patient = "http://hl7.org/fhir/us/core/StructureDefinition/us-core-patient"
        #expect(set.resolve(patient + "|3.1.1")?.version == "3.1.1")
        #expect(set.resolve(patient + "|6.1.0")?.version == "6.1.0")
        #expect(set.resolve(patient + "|6.1")?.version == "6.1.0")
        #expect(set.resolve(patient + "|5.0.1") == nil)
        #expect(set.resolve(patient)?.version == "6.1.0")
        #expect(set.resolve(patient, from: old.id)?.version == "3.1.1")
        #expect(set.resolve("http://hl7.org/fhir/StructureDefinition/Observation")?.origin == "hl7.fhir.r4.core#4.0.1")
        #expect(set.resolve("http://hl7.org/fhir/StructureDefinition/bp", type: "ValueSet") == nil)
    }

    @Test("a dependency that is not loaded is reported once, by name, with who needs it")
    func missingDependencies() throws {
        guard let old = try SharedData.usCore("3.1.1"), let new = try SharedData.usCore("6.1.0") else {
            return SharedData.skipNotice("missing dependencies")
        }
        #expect(ConformanceSet(packages: [old]).missingDependencies.isEmpty)
        let missing = ConformanceSet(packages: [new, old]).missingDependencies
        #expect(missing.map(\.name) == new.dependencies.map(\.name).filter { $0 != "hl7.fhir.r4.core" })
        #expect(Set(missing.map(\.name)).count == missing.count)
        let terminology = try #require(missing.first { $0.name == "hl7.terminology.r4" })
        #expect(terminology.description == "package hl7.terminology.r4#5.0.0 (needed by hl7.fhir.us.core#6.1.0) is not loaded: what it defines cannot be checked")
    }

    @Test("the R4 core is built in: base resources, datatypes, core profiles and extensions, value sets, code systems")
    func core() {
        let core = FHIRPackage.r4Core
        #expect(core.id == "hl7.fhir.r4.core#4.0.1")
        let byType = Dictionary(grouping: core.resources, by: \.resourceType).mapValues(\.count)
        // As the R4 definitions hold them (fhir-r4/definitions: 658, 1316 and 1062 files).
        #expect(byType["StructureDefinition"] == 658)
        #expect(byType["ValueSet"] == 1316)
        #expect(byType["CodeSystem"] == 1062)
        let bp = core.resources.first { $0.url == "http://hl7.org/fhir/StructureDefinition/bp" }
        #expect(bp?.json["snapshot"]?["element"]?.arrayValue?.contains { $0["id"]?.stringValue == "Observation.component:SystolicBP" } == true)
    }
}
