import JSON
import Foundation

/// CareKit's sync unit: entities plus a knowledge vector (CareKit's `OCKRevisionRecord`).
/// Entities are kept in the order a device can apply them: parents before children
/// (patients, care plans, contacts and tasks, outcomes), oldest first.
public struct RevisionRecord: Sendable, Hashable {
    /// One process's logical clock.
    public struct Process: Sendable, Hashable {
        /// The process's id (a device's CareKit store, or the gateway's own).
        public var id: UUID
        /// How many changes of that process the holder knows.
        public var clock: Int
        /// A process's clock.
        public init(id: UUID, clock: Int) {
            self.id = id
            self.clock = clock
        }
    }

    /// The entities, in apply order.
    public private(set) var entities: [CareEntity]
    /// What the sender knew when it made the record.
    public var knowledgeVector: [Process]

    /// A record of these entities, sorted into apply order.
    public init(entities: [CareEntity], knowledgeVector: [Process]) {
        self.entities = RevisionRecord.applyOrder(entities)
        self.knowledgeVector = knowledgeVector
    }

    /// Parents before children, then oldest first, then by uuid for a stable order.
    /// The keys are read once per entity and the positions sorted (a pull sorts thousands of
    /// versions; comparing the entities themselves copied each one on every comparison).
    public static func applyOrder(_ entities: [CareEntity]) -> [CareEntity] {
        applyOrder(entities) { ($0.entityType, $0.version.effectiveDate, $0.version.uuid) }
    }

    /// Where a version goes in apply order.
    struct ApplyOrderKey: Comparable {
        var kind: Int
        var effective: Date
        /// The uuid's bytes, which order as its hex string does, without formatting it.
        var high: UInt64
        var low: UInt64
        static func < (a: ApplyOrderKey, b: ApplyOrderKey) -> Bool { (a.kind, a.effective, a.high, a.low) < (b.kind, b.effective, b.high, b.low) }
    }

    /// Items in apply order by their kind, effective date and uuid.
    public static func applyOrder<Item>(_ items: [Item], by parts: (Item) -> (EntityType, Date, UUID)) -> [Item] {
        let keys = items.map { item in
            let (type, effective, uuid) = parts(item)
            let (high, low) = withUnsafeBytes(of: uuid.uuid) { bytes in
                (bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }, bytes.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
            }
            return ApplyOrderKey(kind: type.applyOrder, effective: effective, high: high, low: low)
        }
        return keys.indices.sorted { keys[$0] < keys[$1] }.map { items[$0] }
    }

    /// The record as compact JSON bytes, written straight through (a whole store's export):
    /// `{"entities": [{"type", "object"}], "knowledgeVector": {"processes": [{"id", "clock"}]}}`.
    public func bytes(version: CareKitVersion = .v4) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        w.key("entities"); w.beginArray()
        for entity in entities {
            w.beginObject()
            w.key("type"); w.string(entity.entityType.rawValue)
            w.key("object"); CareKitJSON.write(entity, version: version, into: &w)
            w.endObject()
        }
        w.endArray()
        Self.writeVector(knowledgeVector, into: &w)
        w.endObject()
        return w.bytes
    }

    /// A record of stored versions as JSON bytes, each version's JSON copied as stored: the
    /// same bytes `bytes()` writes for them decoded, without decoding them (a pull's pages).
    public static func bytes(of versions: [StoredVersion], knowledgeVector: [Process]) -> [UInt8] {
        var w = JSONWriter(capacity: versions.reduce(256) { $0 + $1.json.count + 40 })
        w.beginObject()
        w.key("entities"); w.beginArray()
        for version in versions {
            w.beginObject()
            w.key("type"); w.string(version.type.rawValue)
            w.key("object"); w.value(serialized: version.json)
            w.endObject()
        }
        w.endArray()
        writeVector(knowledgeVector, into: &w)
        w.endObject()
        return w.bytes
    }

    /// `"knowledgeVector": {"processes": [{"id", "clock"}]}`.
    static func writeVector(_ knowledgeVector: [Process], into w: inout JSONWriter) {
        w.key("knowledgeVector"); w.beginObject()
        w.key("processes"); w.beginArray()
        for process in knowledgeVector {
            w.beginObject()
            w.key("id"); w.uuid(process.id)
            w.key("clock"); w.number(Double(process.clock))
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// The record as a JSON value (from `bytes`).
    public func json(version: CareKitVersion = .v4) -> JSONValue {
        try! JSONValue.parse(bytes(version: version))
    }

    /// Reads a revision record, or a bare array of `{type, object}` entities as a CareKit app sends them.
    public init(json: JSONValue) throws(CareKitJSONError) {
        let list: [JSONValue]
        var vector: [Process] = []
        if let array = json.arrayValue {
            list = array
        } else {
            guard let entities = json["entities"]?.arrayValue else {
                throw CareKitJSONError(path: "", message: "expected a revision record ({\"entities\": [...], \"knowledgeVector\": ...}) or an array of {type, object} entities")
            }
            list = entities
            for (i, process) in (json["knowledgeVector"]?["processes"]?.arrayValue ?? []).enumerated() {
                guard let id = process["id"]?.stringValue.flatMap({ UUID(uuidString: $0.uppercased()) }),
                      let number = process["clock"]?.numberValue, let clock = Int(exactly: number), clock >= 0 else {
                    throw CareKitJSONError(path: "knowledgeVector.processes[\(i)]", message: "expected {id: UUID, clock: a whole number from 0}")
                }
                vector.append(Process(id: id, clock: clock))
            }
        }
        var decoded: [CareEntity] = []
        for (i, item) in list.enumerated() {
            guard let typeName = item["type"]?.stringValue else {
                throw CareKitJSONError(path: "entities[\(i)].type", message: "missing (required)")
            }
            guard let type = EntityType(rawValue: typeName) else {
                throw CareKitJSONError(path: "entities[\(i)].type", message: "expected patient, carePlan, contact, task, healthKitTask or outcome, found \"\(typeName)\"")
            }
            guard let object = item["object"] else { throw CareKitJSONError(path: "entities[\(i)].object", message: "missing (required)") }
            let id = object["id"]?.stringValue.map { " \"\($0)\"" } ?? ""
            decoded.append(try CareKitJSON.decode(type, from: object, path: "entities[\(i)] (\(typeName)\(id))"))
        }
        self.init(entities: decoded, knowledgeVector: vector)
    }
}
