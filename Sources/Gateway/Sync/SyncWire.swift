import CareStore
import Foundation
import JSON

/// The sync API's bodies as they travel, read the one way the server and the fuzz harness both
/// use: a push body `{"revisions": [revision records], "knowledgeVector": {...}}`, and a
/// knowledge vector in a query string (base64url of its JSON).
public struct PushBody: Sendable {
    /// The device's revision records.
    public var records: [RevisionRecord]
    /// What the device knew when it pushed.
    public var deviceKnowledge: KnowledgeVector

    /// Reads a push body; a refusal names where (`revisions[2].entities[0].type`).
    public static func read(_ json: JSONValue) throws(SyncError) -> PushBody {
        guard let list = json["revisions"]?.arrayValue, let vector = json["knowledgeVector"] else {
            throw .refused(record: nil, entity: nil, field: "body",
                           reason: "expected {\"revisions\": [revision records], \"knowledgeVector\": {\"processes\": [...]}}")
        }
        let deviceKnowledge: KnowledgeVector
        do { deviceKnowledge = try KnowledgeVector(json: vector) } catch {
            throw .refused(record: nil, entity: nil, field: "knowledgeVector", reason: error.description)
        }
        var records: [RevisionRecord] = []
        for (i, item) in list.enumerated() {
            do { records.append(try RevisionRecord(json: item)) } catch {
                throw .refused(record: i, entity: nil, field: error.path.isEmpty ? "record" : error.path, reason: error.message)
            }
        }
        return PushBody(records: records, deviceKnowledge: deviceKnowledge)
    }
}

/// Knowledge vectors as the sync API's query strings carry them.
extension KnowledgeVector {
    /// A vector from a query parameter: base64url (padding optional) of `{"processes": [...]}`.
    public init(base64URL text: String) throws(KnowledgeVectorError) {
        guard text.utf8.count <= 64 << 10 else { throw .malformed("longer than 64 KiB") }
        guard let bytes = TextEncoding.bytes(base64URL: text) else { throw .malformed("not base64url") }
        let json: JSONValue
        do { json = try JSONValue.parse(bytes) } catch { throw .malformed("not JSON (\(error))") }
        try self.init(json: json)
    }

    /// This vector as a query parameter (base64url of its JSON, unpadded).
    public var base64URL: String {
        TextEncoding.base64URL(json.utf8)
    }
}
