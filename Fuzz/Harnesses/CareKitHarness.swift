import CareStore
import JSON

/// CareKit JSON as an app sends it: one entity of each record type, and revision records (the
/// sync payload). The first byte picks which. What decodes encodes (as CareKit 4 JSON) and
/// decodes again to the same value; it also encodes as CareKit 3 JSON without a crash.
public enum CareKitHarness: FuzzHarness {
    public static let name = "carekit"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (selector, body) = input.selector
        guard let json = try? JSONValue.parse(body) else { return }
        let types = EntityType.allCases
        let pick = Int(selector) % (types.count + 1)
        if pick == types.count {
            try revisionRecord(json)
        } else {
            try entity(types[pick], json)
        }
    }

    static func entity(_ type: EntityType, _ json: JSONValue) throws(PropertyFailure) {
        guard let entity = try? CareKitJSON.decode(type, from: json) else { return }
        _ = CareKitJSON.bytes(entity, version: .v3)
        let written = CareKitJSON.bytes(entity)
        let again: CareEntity
        do {
            again = try CareKitJSON.decode(type, from: try JSONValue.parse(written))
        } catch {
            throw PropertyFailure("a \(type.rawValue) written as CareKit JSON does not decode again (\(error)):\n\(String(decoding: written, as: UTF8.self))")
        }
        guard again == entity else {
            throw PropertyFailure("a \(type.rawValue) changed on its way through CareKit JSON:\n\(entity)\n---\n\(again)")
        }
    }

    static func revisionRecord(_ json: JSONValue) throws(PropertyFailure) {
        guard let record = try? RevisionRecord(json: json) else { return }
        let written = record.bytes()
        let again: RevisionRecord
        do {
            again = try RevisionRecord(json: try JSONValue.parse(written))
        } catch {
            throw PropertyFailure("a revision record written does not read again (\(error)):\n\(String(decoding: written.prefix(4000), as: UTF8.self))")
        }
        guard again == record else { throw PropertyFailure("a revision record changed on its way through JSON") }
    }
}
