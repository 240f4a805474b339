import FHIR
import Foundation

/// The small FHIR parts every export builds (a Reference, a Coding, a CodeableConcept, an
/// `instant`), written one way for the Observation, the survey parts and the Provenance.
extension Element {
    /// A Reference named `name` to `target` (`Patient/123`, `#recording-device`, `urn:uuid:…`).
    public static func reference(_ name: String, to target: String) -> Element {
        Element(name: name, type: "Reference", children: [Element(name: "reference", type: "string", value: target)])
    }

    /// A Coding named `name`: system, code and the display when there is one.
    public static func coding(_ coding: ExportCoding, named name: String = "coding") -> Element {
        var children = [Element(name: "system", type: "uri", value: coding.system), Element(name: "code", type: "code", value: coding.code)]
        if let display = coding.display { children.append(Element(name: "display", type: "string", value: display)) }
        return Element(name: name, type: "Coding", children: children)
    }

    /// A CodeableConcept named `name` holding one Coding.
    public static func concept(_ name: String, _ coding: ExportCoding) -> Element {
        Element(name: name, type: "CodeableConcept", children: [.coding(coding)])
    }
}

/// The `instant` every export writes (the Observation's `issued`, the Provenance's `recorded`).
extension FHIRDateTime {
    /// An `instant`: UTC, to the millisecond (`2026-12-07T09:45:21.123Z`).
    public static func instant(_ date: Date) -> String {
        lexical(date, in: utc, fractionalSeconds: true)
    }

    static let utc = TimeZone(identifier: "UTC")!
}
