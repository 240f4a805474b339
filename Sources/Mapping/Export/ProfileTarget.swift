import FHIR
import FHIRPackages
import FHIRValidation
import JSON

/// Why a profile target cannot be used, naming what is missing.
public enum ProfileTargetError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The target names a package that is not loaded.
    case packageNotLoaded(target: String, package: String)

    public var description: String {
        switch self {
        case .packageNotLoaded(let target, let package):
            "the profile target \(target) needs the package \(package), which is not loaded (name it in gateway.yaml's packages:, or with --package)"
        }
    }
}

/// The profiles what the gateway sends claims (`meta.profile`) and is validated against before
/// it is queued or written: `base` (R4 alone, today's default), `us-core-6.1.0`, `us-core-3.1.1`,
/// or a site's package by name (`org.example.site` or `org.example.site#1.2.0`).
///
/// Which profile an Observation claims is read from the target package itself: each Observation
/// profile that fixes its code (`Observation.code` by pattern, or a coding slice's fixed system
/// and code) claims the Observations with that code. For US Core, R4's own vital-sign profiles
/// (`bodyweight`, `bp`, …) fill the codes the package has no profile for, as US Core 3.1.1 asks.
/// An Observation no code claims goes as the package's laboratory result profile when its
/// category is `laboratory`, else as its simple observation profile (US Core 6.1.0 has one).
public struct ProfileTarget: Sendable {
    /// US Core's categories of screenings and assessments (`sdoh`, `functional-status`,
    /// `disability-status`, `cognitive-status`): an Observation with one is a screening's result.
    public static let screeningCategorySystem = "http://hl7.org/fhir/us/core/CodeSystem/us-core-category"
    /// The US Core tag for data a patient entered.
    public static let patientSupplied = (system: "http://hl7.org/fhir/us/core/CodeSystem/us-core-tags", code: "patient-supplied")

    /// The target's name as configured.
    public let name: String
    /// The validator over the target's packages and the R4 core.
    public let validator: ProfileValidator
    /// The target's own package (`hl7.fhir.us.core#6.1.0`); nil for `base`.
    public let packageID: String?
    /// Whether the target is a US Core release (its tag and performer rules apply).
    public let isUSCore: Bool
    /// Observation profiles (`url|version`) by the code they fix (`http://loinc.org|29463-7`).
    let observationProfiles: [String: String]
    /// The Observation profiles that are vital signs (they need the `vital-signs` category).
    let vitalSignProfiles: Set<String>
    /// The QuestionnaireResponse profile, when the package has one.
    let responseProfile: String?
    /// The profile of scored survey results (US Core's screening and assessment).
    let surveyObservationProfile: String?
    /// The Provenance profile (US Core's `url|version`).
    let provenanceProfile: String?
    /// Whether the Provenance profile lets a Device be an agent (US Core 6.1.0 does, 3.1.1 not:
    /// there the device goes as the Provenance's source entity).
    public private(set) var provenanceAgentDevices = true
    /// The profile of an Observation no code claims: US Core's laboratory result for the
    /// `laboratory` category, its simple observation (6.1.0) for the rest.
    var laboratoryProfile: String?, simpleObservationProfile: String?

    /// Whether what is sent travels with its device and a Provenance naming the patient as
    /// author (`PatientSuppliedProvenance`): every target but `base`.
    public var sendsProvenance: Bool { packageID != nil }

    /// R4 alone: nothing claimed, R4's definitions checked.
    public static let base = ProfileTarget(name: "base", validator: ProfileValidator(), packageID: nil, isUSCore: false,
                                           observationProfiles: [:], vitalSignProfiles: [], responseProfile: nil, surveyObservationProfile: nil,
                                           provenanceProfile: nil)

    init(name: String, validator: ProfileValidator, packageID: String?, isUSCore: Bool, observationProfiles: [String: String],
         vitalSignProfiles: Set<String>, responseProfile: String?, surveyObservationProfile: String?, provenanceProfile: String?) {
        self.provenanceProfile = provenanceProfile
        self.vitalSignProfiles = vitalSignProfiles
        self.name = name
        self.validator = validator
        self.packageID = packageID
        self.isUSCore = isUSCore
        self.observationProfiles = observationProfiles
        self.responseProfile = responseProfile
        self.surveyObservationProfile = surveyObservationProfile
    }

    /// The target `name` over the packages loaded (`base` needs none).
    public init(name: String, packages: [FHIRPackage]) throws(ProfileTargetError) {
        if name == "base" {
            self = .base
            return
        }
        let wanted = Self.packageName(for: name)
        guard let package = packages.last(where: { $0.name == wanted.name && (wanted.version == nil || $0.version == wanted.version) }) else {
            throw .packageNotLoaded(target: name, package: wanted.name + (wanted.version.map { "#\($0)" } ?? ""))
        }
        let conformance = ConformanceSet(packages: packages)
        let structures = package.resources.filter { $0.resourceType == "StructureDefinition" && $0.json["type"]?.stringValue == "Observation" }
        var byCode: [String: String] = [:]
        for structure in structures.sorted(by: { $0.url < $1.url }) {
            for code in Self.fixedCodes(structure.json) where byCode[code] == nil { byCode[code] = structure.versionedURL }
        }
        let isUSCore = package.name == "hl7.fhir.us.core"
        if isUSCore {
            // R4's vital-sign profiles, for the codes US Core leaves to them.
            for structure in FHIRPackage.r4Core.resources where structure.json["baseDefinition"]?.stringValue == "http://hl7.org/fhir/StructureDefinition/vitalsigns" {
                for code in Self.fixedCodes(structure.json) where byCode[code] == nil { byCode[code] = structure.versionedURL }
            }
        }
        // A vital-sign profile is one whose bases reach R4's `vitalsigns` (US Core's own
        // `us-core-vital-signs` does).
        let vitalSigns = Set(byCode.values.filter { profile in
            var next: String? = profile
            for _ in 0..<8 {
                guard let current = next, let found = conformance.resolve(current, type: "StructureDefinition") else { return false }
                if found.url == "http://hl7.org/fhir/StructureDefinition/vitalsigns" { return true }
                next = found.json["baseDefinition"]?.stringValue
            }
            return false
        })
        func own(_ suffix: String) -> String? {
            package.resources.first { $0.resourceType == "StructureDefinition" && $0.url.hasSuffix("/" + suffix) }?.versionedURL
        }
        self.init(name: name, validator: ProfileValidator(conformance: conformance), packageID: package.id, isUSCore: isUSCore,
                  observationProfiles: byCode, vitalSignProfiles: vitalSigns, responseProfile: own("us-core-questionnaireresponse"),
                  surveyObservationProfile: own("us-core-observation-screening-assessment"),
                  provenanceProfile: own("us-core-provenance"))
        laboratoryProfile = own("us-core-observation-lab")
        provenanceAgentDevices = provenanceProfile.flatMap { conformance.resolve($0, type: "StructureDefinition") }.map(Self.agentsMayBeDevices) ?? true
        simpleObservationProfile = own("us-core-simple-observation")
    }

    /// Whether a Provenance profile's `agent.who` may reference a Device.
    static func agentsMayBeDevices(_ structure: ConformanceResource) -> Bool {
        let elements = structure.json["snapshot"]?["element"]?.arrayValue ?? []
        guard let who = elements.first(where: { $0["id"]?.stringValue == "Provenance.agent.who" }) else { return true }
        let targets = (who["type"]?.arrayValue ?? []).flatMap { $0["targetProfile"]?.arrayValue ?? [] }.compactMap(\.stringValue)
        return targets.isEmpty || targets.contains { $0.hasSuffix("/Device") || $0.hasSuffix("/Resource") }
    }

    /// `us-core-6.1.0` names `hl7.fhir.us.core` at 6.1.0; any other name is a package name,
    /// with an optional `#version`.
    static func packageName(for target: String) -> (name: String, version: String?) {
        if target.hasPrefix("us-core-") { return ("hl7.fhir.us.core", String(target.dropFirst("us-core-".count))) }
        let parts = target.split(separator: "#", maxSplits: 1).map(String.init)
        return (parts[0], parts.count > 1 ? parts[1] : nil)
    }

    /// The codes (`system|code`) an Observation profile fixes: `Observation.code`'s pattern or
    /// fixed codings, or the fixed system and code of each slice of `Observation.code.coding`.
    static func fixedCodes(_ structure: JSONValue) -> [String] {
        let elements = structure["snapshot"]?["element"]?.arrayValue ?? structure["differential"]?["element"]?.arrayValue ?? []
        var codes: [String] = []
        for element in elements where element["id"]?.stringValue == "Observation.code" {
            for key in ["patternCodeableConcept", "fixedCodeableConcept"] {
                for coding in element[key]?["coding"]?.arrayValue ?? [] {
                    if let system = coding["system"]?.stringValue, let code = coding["code"]?.stringValue { codes.append("\(system)|\(code)") }
                }
            }
        }
        var systems: [String: String] = [:]
        for element in elements {
            guard let id = element["id"]?.stringValue, id.hasPrefix("Observation.code.coding:") else { continue }
            let slice = String(id.dropFirst("Observation.code.coding:".count).split(separator: ".").first ?? "")
            if id.hasSuffix(".system"), let system = element["fixedUri"]?.stringValue { systems[slice] = system }
            if id.hasSuffix(".code"), let code = element["fixedCode"]?.stringValue, let system = systems[slice] { codes.append("\(system)|\(code)") }
        }
        return codes
    }

    /// The Observation profile (`url|version`) a code (`http://loinc.org|29463-7`) has in the target.
    public func profileURL(code: String) -> String? {
        observationProfiles[code].map { FHIRPackages.Canonical($0).url }
    }

    /// The profile a built resource is to meet, if the target has one for it: an Observation by
    /// its code (a survey's scored result, `survey` category, by US Core's screening profile),
    /// a QuestionnaireResponse by the package's profile.
    public func profile(for resource: Element) -> String? {
        switch resource.resourceType {
        case "Observation":
            for coding in resource["code"]?.children(named: "coding") ?? [] {
                if let system = coding.string("system"), let code = coding.string("code"), let found = observationProfiles["\(system)|\(code)"] {
                    return found
                }
            }
            let codings = resource.children(named: "category").flatMap { $0.children(named: "coding") }
            let categories = codings.compactMap { $0.string("code") }
            // A survey's result, or a screening's (`sdoh`, `functional-status`… from US Core's categories).
            if categories.contains("survey") || codings.contains(where: { $0.string("system") == Self.screeningCategorySystem }) {
                return surveyObservationProfile
            }
            if categories.contains("laboratory") { return laboratoryProfile }
            // US Core's simple observation asks for a category: one with none claims nothing.
            return categories.isEmpty ? nil : simpleObservationProfile
        case "QuestionnaireResponse":
            return responseProfile
        case "Provenance":
            return provenanceProfile
        default:
            return nil
        }
    }

    /// Adds what the target asks of every resource sent: the claimed profile in `meta.profile`
    /// and, for US Core, the `patient-supplied` tag.
    public func claim(_ resource: inout Element) {
        let profile = self.profile(for: resource)
        guard profile != nil || isUSCore else { return }
        var meta = resource["meta"] ?? Element(name: "meta", type: "Meta")
        if let profile, !meta.children(named: "profile").contains(where: { $0.value == profile }) {
            // Claimed without its version, as servers match claims (`|version` is for validators).
            meta.append(Element(name: "profile", type: "canonical", value: FHIRPackages.Canonical(profile).url))
        }
        if isUSCore, !meta.children(named: "tag").contains(where: { $0.string("code") == Self.patientSupplied.code }) {
            meta.append(.coding(ExportCoding(system: Self.patientSupplied.system, code: Self.patientSupplied.code), named: "tag"))
        }
        resource.removeChildren(named: "meta")
        resource.append(meta)
        if let profile, vitalSignProfiles.contains(profile) { Self.addCategory("vital-signs", to: &resource) }
        // US Core's screening and assessment profile asks for `survey` beside the screening's own category.
        if let profile, profile == surveyObservationProfile { Self.addCategory("survey", to: &resource) }
    }

    /// Adds an `observation-category` code unless the resource has it (a weight a form
    /// extracted is a vital sign as well as a survey answer).
    static func addCategory(_ code: String, to resource: inout Element) {
        let system = "http://terminology.hl7.org/CodeSystem/observation-category"
        let present = resource.children(named: "category").flatMap { $0.children(named: "coding") }
            .contains { $0.string("system") == system && $0.string("code") == code }
        guard !present else { return }
        resource.append(.concept("category", ExportCoding(system: system, code: code)))
    }

    /// The resource checked against R4, what it claims, and the profile the target has for it.
    public func validate(_ resource: Element) -> ValidationReport {
        validator.validate(resource, against: profile(for: resource).map { [$0] } ?? [], in: packageID)
    }
}

extension ProfileTarget {
    /// Why a configured target cannot be used: a package that cannot be read, or a name no
    /// package loaded provides.
    public enum SettingError: Error, Sendable, CustomStringConvertible {
        /// A package that cannot be read, and why.
        case packages(String)
        /// A target name the packages loaded do not provide, and why.
        case profiles(String)

        public var description: String {
            switch self {
            case .packages(let why), .profiles(let why): why
            }
        }
    }

    /// The target a setting names (`ehr.profiles:` in gateway.yaml, `--profiles` on the command
    /// line) over the packages at `paths`; nil for none, or `base` without packages (R4 alone,
    /// nothing claimed): one rule for the server and the commands.
    public static func named(_ name: String?, packages paths: [String]) throws(SettingError) -> ProfileTarget? {
        guard let name, name != "base" || !paths.isEmpty else { return nil }
        let loaded: [FHIRPackage]
        do { loaded = try FHIRPackage.load(paths: paths) } catch { throw .packages("\(error)") }
        do { return try ProfileTarget(name: name, packages: loaded) } catch { throw .profiles("\(error)") }
    }
}

