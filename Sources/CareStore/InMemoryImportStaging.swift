import Foundation

/// A staging area in the process's memory, for an import small enough to hold whole (see
/// `InMemoryImportStaging.limit`): it spares writing every resource to a scratch file and
/// reading it back. It keeps items as `SQLiteImportStaging` does: in the order staged, replaced
/// in place, groups in the order of their first items, and a `write` that throws leaves nothing.
///
/// ```swift
/// let staging = InMemoryImportStaging()
/// try staging.write { try $0.insert(StagedItem(group: "Patient/p1", identity: "Patient/p1", fullURL: nil, container: 0, origin: "a.json", bytes: json)) }
/// for group in try staging.groups() { let items = try staging.items(group: group) }
/// ```
public final class InMemoryImportStaging: ImportStaging {
    /// The most bytes of files an import stages in memory; larger ones go to a scratch file:
    /// 256 MiB, or a sixteenth of the machine's memory when that is less (never under 64 MiB).
    /// Staged in memory, 128 MB of Bundles imported 1.30× faster (112 → 145 MB/s) with a peak of
    /// 206 MB instead of 96 (docs/performance.md); a gigabyte still stages on disk.
    public static let limit = min(256 << 20, max(64 << 20, Int(clamping: ProcessInfo.processInfo.physicalMemory / 16)))

    /// Text is held as the file has it: copying it is faster than compacting it.
    public var prefersCompactText: Bool { false }

    /// Every item, at `sequence - 1`, with the look-ups reading needs.
    struct Items: Sendable {
        var all: [StagedItem] = []
        var byIdentity: [String: Int64] = [:]
        var byFullURL: [String: [Int64]] = [:]
        var byGroup: [String: [Int64]] = [:]
        /// The groups in the order of their first items, the empty group left out.
        var groups: [String] = []

        func item(_ sequence: Int64) -> StagedItem { all[Int(sequence) - 1] }

        mutating func append(_ item: StagedItem) -> Int64 {
            var item = item
            item.sequence = Int64(all.count + 1)
            all.append(item)
            if byGroup[item.group, default: []].isEmpty, !item.group.isEmpty { groups.append(item.group) }
            byGroup[item.group, default: []].append(item.sequence)
            if let url = item.fullURL { byFullURL[url, default: []].append(item.sequence) }
            if let identity = item.identity { byIdentity[identity] = item.sequence }
            return item.sequence
        }

        /// Takes back the last item appended; `identityBefore` is the sequence its identity named
        /// before it came (nil: none).
        mutating func removeLast(identityBefore: Int64?) {
            let item = all.removeLast()
            byGroup[item.group]?.removeLast()
            if byGroup[item.group]?.isEmpty == true {
                byGroup[item.group] = nil
                if !item.group.isEmpty { groups.removeLast() }
            }
            if let url = item.fullURL { Self.remove(item.sequence, from: &byFullURL, url) }
            if let identity = item.identity { byIdentity[identity] = identityBefore }
        }

        /// Puts `item` at `sequence`, keeping the sequence, group and identity there.
        mutating func set(_ sequence: Int64, to item: StagedItem) {
            var replaced = self.item(sequence)
            if let url = replaced.fullURL { Self.remove(sequence, from: &byFullURL, url) }
            if let url = item.fullURL { byFullURL[url, default: []].append(sequence); byFullURL[url]!.sort() }
            replaced.fullURL = item.fullURL
            replaced.container = item.container
            replaced.origin = item.origin
            replaced.bytes = item.bytes
            all[Int(sequence) - 1] = replaced
        }

        static func remove(_ sequence: Int64, from index: inout [String: [Int64]], _ key: String) {
            index[key]?.removeAll { $0 == sequence }
            if index[key]?.isEmpty == true { index[key] = nil }
        }
    }

    let state = Locked(Items())

    /// An empty staging area.
    public init() {}

    public func write<T>(_ body: (any ImportStagingWriter) throws -> T) throws(StoreError) -> T {
        try state.withLock { (items: inout Items) throws(StoreError) -> T in
            // The writer holds the only copy while it works (no copy made on its first change).
            let writer = Writer(items)
            items = Items()
            defer { items = writer.items }
            do { return try body(writer) } catch {
                writer.undo()
                if let error = error as? StoreError { throw error }
                throw .database(path: ":memory:", message: "\(error)")
            }
        }
    }

    /// A `write`'s changes, each noted so that a failing body's are undone.
    final class Writer: ImportStagingWriter {
        var items: Items
        var undoing: [Change] = []

        enum Change {
            case appended(identityBefore: Int64?)
            case replaced(StagedItem)
        }

        init(_ items: Items) { self.items = items }

        @discardableResult
        func insert(_ item: StagedItem) throws -> Int64 {
            undoing.append(.appended(identityBefore: item.identity.flatMap { items.byIdentity[$0] }))
            return items.append(item)
        }

        func item(identity: String) throws -> StagedItem? {
            items.byIdentity[identity].map(items.item)
        }

        func replace(_ sequence: Int64, with item: StagedItem) throws {
            guard sequence >= 1, Int(sequence) <= items.all.count else { return }
            undoing.append(.replaced(items.item(sequence)))
            items.set(sequence, to: item)
        }

        func undo() {
            for change in undoing.reversed() {
                switch change {
                case .appended(let before): items.removeLast(identityBefore: before)
                case .replaced(let earlier): items.set(earlier.sequence, to: earlier)
                }
            }
            undoing = []
        }
    }

    public func groups() throws(StoreError) -> [String] {
        state.withLock { $0.groups }
    }

    public func items(group: String, readingBytesOf wanted: (StagedItem) -> Bool) throws(StoreError) -> [StagedItem] {
        let items = state.withLock { items in (items.byGroup[group] ?? []).map(items.item) }
        return items.map { item in
            var outline = item
            outline.bytes = []
            return wanted(outline) ? item : outline
        }
    }

    public func readingBytes(of items: [StagedItem]) throws(StoreError) -> [StagedItem] {
        state.withLock { staged in
            items.map { item in
                var item = item
                if item.sequence >= 1, Int(item.sequence) <= staged.all.count { item.bytes = staged.item(item.sequence).bytes }
                return item
            }
        }
    }

    public func items(identities: [String], fullURLs: [String]) throws(StoreError) -> [StagedItem] {
        state.withLock { items in
            let byIdentity = Set(identities).compactMap { items.byIdentity[$0] }.sorted()
            let byURL = Set(fullURLs).flatMap { items.byFullURL[$0] ?? [] }.sorted()
            return (byIdentity + byURL).map(items.item)
        }
    }

    public func count() throws(StoreError) -> Int {
        state.withLock { $0.all.count }
    }
}
