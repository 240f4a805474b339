import FHIR
import Mapping

/// One resource per identity in an import run. Real exports repeat resources: the same
/// Practitioner in every patient's Bundle, a Bundle exported twice, a file and a copy of it.
/// A resource's identity is its type and id; of several copies, identical ones count once, and
/// of different contents the newest is kept (by `meta.versionId`, then `meta.lastUpdated`, then
/// the one read last), with a warning naming both origins.
public enum RepeatedResources {
    /// What collapsing found.
    public struct Result: Sendable {
        /// Each identity once, in the order first read (resources without an id all kept).
        public var resources: [SourcedResource] = []
        /// A warning for every identity read with different contents.
        public var notes: [ImportNote] = []
        /// How many copies were left out (identical or older).
        public var repeated = 0
    }

    /// A resource's identity: its type and id.
    struct Identity: Hashable {
        let type: String
        let id: String
    }

    /// Each identity once, with what was left out.
    public static func collapse(_ resources: [SourcedResource]) -> Result {
        var result = Result()
        // The position of each identity's kept copy; its JSON only once a second copy turns up
        // (most resources are read once, and they are never serialised here).
        var kept: [Identity: (index: Int, json: [UInt8]?)] = [:]
        kept.reserveCapacity(resources.count)
        for resource in resources {
            guard let type = resource.resource.resourceType, let id = resource.resource.string("id") else {
                result.resources.append(resource)
                continue
            }
            let identity = Identity(type: type, id: id)
            guard let first = kept[identity] else {
                kept[identity] = (result.resources.count, nil)
                result.resources.append(resource)
                continue
            }
            result.repeated += 1
            let earlier = result.resources[first.index]
            let earlierJSON = first.json ?? FHIRJSONWriter(pretty: false).write(earlier.resource)
            let json = FHIRJSONWriter(pretty: false).write(resource.resource)
            kept[identity] = (first.index, earlierJSON)
            if earlierJSON == json { continue }
            let (replaces, reason) = isNewer(resource, than: earlier)
            let winner = replaces ? resource : earlier
            result.notes.append(ImportNote(kind: .warning, resource: "\(type)/\(id)", path: nil, origin: resource.origin,
                                           message: "read again with different contents (also in \(earlier.origin)); \(reason), so the copy from \(winner.origin) is imported"))
            if replaces {
                result.resources[first.index] = resource
                kept[identity] = (first.index, json)
            }
        }
        return result
    }

    /// Whether `b` (read later) is newer than `a` for the same identity, and why.
    static func isNewer(_ b: SourcedResource, than a: SourcedResource) -> (Bool, String) {
        let (va, vb) = (a.resource.first("meta.versionId")?.value, b.resource.first("meta.versionId")?.value)
        if let va, let vb, va != vb, let x = Int(va), let y = Int(vb) {
            return y > x ? (true, "versionId \(y) is newer than \(x)") : (false, "versionId \(x) is newer than \(y)")
        }
        let (la, lb) = (a.resource.first("meta.lastUpdated")?.value.flatMap(FHIRDateTime.init),
                        b.resource.first("meta.lastUpdated")?.value.flatMap(FHIRDateTime.init))
        if let la, let lb, la != lb {
            return la < lb ? (true, "meta.lastUpdated \(lb) is later than \(la)") : (false, "meta.lastUpdated \(la) is later than \(lb)")
        }
        return (true, "neither meta.versionId nor meta.lastUpdated tells them apart, and it was read last")
    }
}
