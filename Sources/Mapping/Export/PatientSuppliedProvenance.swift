import CareStore
import FHIR
import Foundation

/// What US Core asks to travel with data a patient supplied through an app, beside the
/// resources themselves: the device that recorded an Observation, contained in it
/// (`Observation.device` → a `Device` with its `deviceName`), and a Provenance naming the
/// Patient as author and the app's device as the agent that assembled it, in the same
/// transaction. The Provenance carries a tag naming the outcome version it is for, so the
/// transaction creates it once however often it is sent (`ifNoneExist: _tag=…`).
///
/// ```swift
/// var weight = observation
/// PatientSuppliedProvenance.attach(device, healthKit: false, to: &weight)
/// let provenance = PatientSuppliedProvenance(targets: ["urn:uuid:…"], patient: "Patient/maria",
///     recorded: outcome.version.createdDate!, device: device, healthKit: false,
///     versionUUID: outcome.uuid).resource
/// ```
public struct PatientSuppliedProvenance: Sendable {
    /// The tag system whose code is the outcome version a Provenance was made for.
    public static let tagSystem = "urn:caregate:provenance"
    /// The contained Device's id (`#recording-device`).
    public static let deviceID = "recording-device"
    /// Who the app's device acts for when no organization is configured: US Core asks that a
    /// device agent act on behalf of an Organization (`provenance-1`), named here by its display.
    public static let defaultOrganization = "CareGate (patient-generated data from a CareKit app)"

    /// The references (`urn:uuid:` of the transaction's entries) the Provenance is about.
    public var targets: [String]
    /// The Patient reference (`Patient/maria`), the author; nil when the outcome has no patient.
    public var patient: String?
    /// When the outcome version was recorded.
    public var recorded: Date
    /// The enrolled device that pushed it, when a device did.
    public var device: Device?
    /// Whether the outcome's task reads its values from HealthKit (the app is named as well).
    public var healthKit: Bool
    /// The outcome version it is for (the tag's code).
    public var versionUUID: UUID
    /// The Organization the device acts for (`ehr.organization:`, `--organization`): a reference
    /// (`Organization/good-health`) or a name; nil for `defaultOrganization`.
    public var organization: String?
    /// Whether the device is an agent (`assembler`), as US Core 6.1.0 allows; otherwise it is the
    /// Provenance's `source` entity (US Core 3.1.1 takes no Device agent).
    public var deviceAsAgent = true

    /// A Provenance of these targets (the profile target claims its profile: `ProfileTarget.claim`).
    public init(targets: [String], patient: String?, recorded: Date, device: Device?, healthKit: Bool, versionUUID: UUID) {
        (self.targets, self.patient, self.recorded, self.device, self.healthKit) = (targets, patient, recorded, device, healthKit)
        self.versionUUID = versionUUID
    }

    /// `_tag=urn:caregate:provenance|<version uuid>`, the search that finds a Provenance made
    /// here once it is created; nil for any other resource.
    public static func conditionalQuery(of resource: Element) -> String? {
        guard resource.resourceType == "Provenance" else { return nil }
        return tag(of: resource).map { "_tag=\(tagSystem)%7C\($0)" }
    }

    /// The tag's code (the outcome version) of a Provenance made here.
    public static func tag(of resource: Element) -> String? {
        resource["meta"]?.children(named: "tag").first { $0.string("system") == tagSystem }?.string("code")
    }

    var tagCode: String { versionUUID.uuidString.lowercased() }

    /// The Provenance resource.
    public var resource: Element {
        var p = Element(resourceType: "Provenance")
        p.append(Element(name: "meta", type: "Meta", children: [Element.coding(ExportCoding(system: Self.tagSystem, code: tagCode), named: "tag")]))
        if let device { p.append(Self.contained(device, healthKit: healthKit)) }
        for target in targets { p.append(Element.reference("target", to: target)) }
        p.append(Element(name: "recorded", type: "instant", value: FHIRDateTime.instant(recorded)))
        if let patient {
            p.append(Element(name: "agent", type: "Provenance.agent", children: [
                Element.concept("type", ExportCoding(system: "http://terminology.hl7.org/CodeSystem/provenance-participant-type", code: "author")),
                Element.reference("who", to: patient),
            ]))
        }
        if device != nil && !deviceAsAgent {
            p.append(Element(name: "entity", type: "Provenance.entity", children: [
                Element(name: "role", type: "code", value: "source"), Element.reference("what", to: "#\(Self.deviceID)"),
            ]))
        }
        if device != nil && deviceAsAgent {
            p.append(Element(name: "agent", type: "Provenance.agent", children: [
                Element.concept("type", ExportCoding(system: "http://terminology.hl7.org/CodeSystem/provenance-participant-type", code: "assembler")),
                Element.reference("who", to: "#\(Self.deviceID)"),
                onBehalfOf,
            ]))
        }
        return p
    }

    /// The device agent's `onBehalfOf`: the configured Organization by reference or by name.
    var onBehalfOf: Element {
        let organization = self.organization ?? Self.defaultOrganization
        if Self.isOrganizationReference(organization) { return .reference("onBehalfOf", to: organization) }
        return Element(name: "onBehalfOf", type: "Reference", children: [Element(name: "display", type: "string", value: organization)])
    }

    /// What is wrong with a configured organization (`ehr.organization`, `--organization`), or
    /// nil: a reference must name an Organization by a FHIR id, a name must be one line of up to
    /// 200 characters. One rule for the server's configuration and the commands.
    public static func problem(withOrganization organization: String) -> String? {
        if organization.hasPrefix("Organization/") && !isOrganizationReference(organization) {
            return "\(organization) is not a reference to an Organization (Organization/ and an id of up to 64 letters, digits, '-' and '.'), nor a name"
        }
        if organization.count > 200 || organization.contains(where: \.isNewline) { return "a name of one line, up to 200 characters" }
        return nil
    }

    /// Whether a configured organization is a reference (`Organization/` and a FHIR id) rather than a name.
    public static func isOrganizationReference(_ organization: String) -> Bool {
        guard organization.hasPrefix("Organization/") else { return false }
        let id = organization.dropFirst("Organization/".count)
        return (1...64).contains(id.count) && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }

    /// Contains the device in an Observation and points `Observation.device` at it; nothing for
    /// another resource, or without a device.
    public static func attach(_ device: Device?, healthKit: Bool, to observation: inout Element) {
        guard let device, observation.resourceType == "Observation", observation["device"] == nil else { return }
        observation.append(contained(device, healthKit: healthKit))
        observation.append(Element.reference("device", to: "#\(deviceID)"))
    }

    /// The device as a contained `Device`: its name as it enrolled (`user-friendly-name`), and
    /// for a HealthKit-linked task the app that read HealthKit (`other`).
    static func contained(_ device: Device, healthKit: Bool) -> Element {
        var d = Element(resourceType: "Device")
        d.name = "contained"
        d.append(Element(name: "id", type: "id", value: deviceID))
        d.append(Element(name: "identifier", type: "Identifier", children: [
            Element(name: "system", type: "uri", value: "urn:caregate:device"),
            Element(name: "value", type: "string", value: device.id),
        ]))
        d.append(deviceName(device.name ?? "enrolled device \(device.id)", type: device.name == nil ? "other" : "user-friendly-name"))
        if healthKit { d.append(deviceName("\(device.app ?? "the CareKit app") (from Apple Health)", type: "other")) }
        return d
    }

    static func deviceName(_ name: String, type: String) -> Element {
        Element(name: "deviceName", type: "Device.deviceName", children: [
            Element(name: "name", type: "string", value: name), Element(name: "type", type: "code", value: type),
        ])
    }
}
