import Foundation
import JSON

extension FHIRPackage {
    /// The R4 core package (`hl7.fhir.r4.core#4.0.1`): its StructureDefinitions (base resources,
    /// datatypes, core profiles such as `vitalsigns` and `bp`, core extensions), ValueSets and
    /// CodeSystems, built into the program from the definitions the type table comes from, so the
    /// gateway validates without any file. Read on first use (about 10 MB of JSON).
    public static let r4Core: FHIRPackage = {
        guard let deflated = Data(base64Encoded: r4CoreText, options: .ignoreUnknownCharacters),
              let text = try? Gzip.inflate([UInt8](deflated)),
              case .array(let items)? = try? JSONValue.parse(text) else {
            preconditionFailure("the built-in R4 core conformance resources are corrupt: regenerate them with fhir-tablegen")
        }
        let id = "hl7.fhir.r4.core#4.0.1"
        return FHIRPackage(name: "hl7.fhir.r4.core", version: "4.0.1",
                           resources: items.compactMap { ConformanceResource(json: $0, origin: id) }, path: "(built in)")
    }()
}
