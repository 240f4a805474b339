import Foundation
import JSON

/// What a CareKit store knows: one logical clock per sync process (CareKit's
/// `OCKRevisionRecord.KnowledgeVector`). A version stamped with vector `s` is known to a peer
/// whose vector `v` covers it (`s.isCovered(by: v)`: no clock of `s` is ahead of `v`'s).
public struct KnowledgeVector: Sendable, Hashable, CustomStringConvertible {
    /// The clocks, by process; absent processes are at 0.
    public private(set) var clocks: [UUID: Int]

    /// A vector from each process's clock.
    public init(_ clocks: [UUID: Int] = [:]) {
        self.clocks = clocks.filter { $0.value > 0 }
    }

    /// A vector from a revision record's processes. CareKit's decoder traps on a process named
    /// twice, so that is refused here rather than passed on.
    public init(processes: [RevisionRecord.Process]) throws(KnowledgeVectorError) {
        var clocks: [UUID: Int] = [:]
        for process in processes {
            guard clocks.updateValue(process.clock, forKey: process.id) == nil else { throw .duplicateProcess(process.id) }
        }
        self.init(clocks)
    }

    /// Reads `{"processes": [{"id": "<UUID>", "clock": <whole number from 0>}]}`.
    public init(json: JSONValue) throws(KnowledgeVectorError) {
        guard let list = json["processes"]?.arrayValue else { throw .malformed("expected {\"processes\": [{id, clock}]}") }
        var processes: [RevisionRecord.Process] = []
        for (i, process) in list.enumerated() {
            guard let id = process["id"]?.stringValue.flatMap({ UUID(uuidString: $0.uppercased()) }),
                  let number = process["clock"]?.numberValue, let clock = Int(exactly: number), clock >= 0 else {
                throw .malformed("processes[\(i)]: expected {id: UUID, clock: a whole number from 0}")
            }
            processes.append(RevisionRecord.Process(id: id, clock: clock))
        }
        try self.init(processes: processes)
    }

    /// The clock of a process (0 when the vector does not name it).
    public func clock(for process: UUID) -> Int { clocks[process] ?? 0 }

    /// Whether every clock of this vector is at most the same clock of `other` (CareKit's
    /// `<=`): a version stamped with this vector is one `other`'s holder already has.
    public func isCovered(by other: KnowledgeVector) -> Bool {
        clocks.allSatisfy { $0.value <= other.clock(for: $0.key) }
    }

    /// The larger clock of each process (CareKit's `merge(with:)`).
    public func merged(with other: KnowledgeVector) -> KnowledgeVector {
        KnowledgeVector(clocks.merging(other.clocks, uniquingKeysWith: max))
    }

    /// The smaller clock of each process: what both vectors know.
    public func common(with other: KnowledgeVector) -> KnowledgeVector {
        var both: [UUID: Int] = [:]
        for (process, clock) in clocks { both[process] = min(clock, other.clock(for: process)) }
        return KnowledgeVector(both)
    }

    /// This vector with one process's clock set.
    public func setting(_ process: UUID, to clock: Int) -> KnowledgeVector {
        var copy = clocks
        copy[process] = clock
        return KnowledgeVector(copy)
    }

    /// The processes in a stable order (by uuid), as a revision record lists them.
    public var processes: [RevisionRecord.Process] {
        clocks.map { RevisionRecord.Process(id: $0.key, clock: $0.value) }.sorted { $0.id.uuidString < $1.id.uuidString }
    }

    /// Compact JSON, `{"processes":[{"id":"…","clock":3}]}`, processes in uuid order: also the
    /// form a stamp is stored in, so that equal vectors are equal strings.
    public var json: String {
        "{\"processes\":[" + processes.map { "{\"id\":\"\($0.id.uuidString)\",\"clock\":\($0.clock)}" }.joined(separator: ",") + "]}"
    }

    public var description: String { json }
}

/// Why a knowledge vector cannot be used.
public enum KnowledgeVectorError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A process listed twice.
    case duplicateProcess(UUID)
    /// Not a knowledge vector's JSON; the reason.
    case malformed(String)

    public var description: String {
        switch self {
        case .duplicateProcess(let id): "knowledge vector names process \(id.uuidString) twice"
        case .malformed(let reason): "knowledge vector: \(reason)"
        }
    }
}
