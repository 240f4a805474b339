import FHIR
import Synchronization

/// The elements already found to meet a definition with no issue at all, by definition and
/// content: a gateway's exports repeat most of their content (the same `meta`, `category`,
/// `code`, `subject` in every vital sign), and an element equal to one that met the same
/// definition cleanly meets it again, so its subtree is not walked twice.
///
/// Only verdicts that depend on nothing but the element are kept: a walk that reported anything
/// (even an issue reported only once per validation), or read outside the element (an invariant
/// reading `%resource` or calling `resolve()`, a reference resolved in the Bundle or among the
/// contained resources, an extension's context, a resource inside it) is not remembered; and a
/// verdict found outside a Bundle is not used inside one (where references resolve between
/// entries), nor the reverse.
/// Bounded: when full, it starts again empty; with a capacity of 0 nothing is remembered.
final class CleanVerdicts: Sendable {
    /// An element and the definition it met, or all the items of one name (a sliced element's)
    /// and the definition they met together (their slices and cardinalities).
    struct Key: Hashable, Sendable {
        /// What met the definition.
        enum Content: Equatable, Sendable {
            case element(Element)
            case items([Element])
        }

        let node: CompiledProfile.Node
        let profile: CompiledProfile
        let package: String?
        /// Whether the element is inside a Bundle, where references resolve between entries
        /// (a reference's verdict alone differs from its verdict there).
        let inBundle: Bool
        let content: Content
        /// The hash, worked out once (a lookup and an insertion follow each other).
        private let hash: Int
        /// About how many bytes the content holds (names, values and nodes), counted with the hash.
        let size: Int

        init(node: CompiledProfile.Node, profile: CompiledProfile, package: String?, inBundle: Bool, content: Content) {
            self.node = node
            self.profile = profile
            self.package = package
            self.inBundle = inBundle
            self.content = content
            var hasher = Hasher()
            hasher.combine(ObjectIdentifier(node))
            hasher.combine(ObjectIdentifier(profile))
            hasher.combine(package)
            hasher.combine(inBundle)
            var size = 0
            switch content {
            case .element(let element):
                Self.digest(element, into: &hasher, size: &size)
            case .items(let items):
                hasher.combine(items.count)
                for item in items { Self.digest(item, into: &hasher, size: &size) }
            }
            hash = hasher.finalize()
            self.size = size
        }

        /// What `==` compares (name, type, value, children), into the hash, and the bytes it holds.
        private static func digest(_ element: Element, into hasher: inout Hasher, size: inout Int) {
            hasher.combine(element.name)
            hasher.combine(element.typeIndex)
            hasher.combine(element.value)
            hasher.combine(element.children.count)
            size += 32 + element.name.utf8.count + (element.value?.utf8.count ?? 0)
            for child in element.children { digest(child, into: &hasher, size: &size) }
        }

        static func == (lhs: Key, rhs: Key) -> Bool {
            lhs.hash == rhs.hash && lhs.node === rhs.node && lhs.profile === rhs.profile
                && lhs.package == rhs.package && lhs.inBundle == rhs.inBundle && lhs.content == rhs.content
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(hash)
        }
    }

    private let known = Mutex<(keys: Set<Key>, bytes: Int)>(([], 0))
    /// How many verdicts are kept at most.
    let capacity: Int
    /// How many bytes of elements are kept at most (about), and the most one element may hold to
    /// be kept (a long narrative is walked each time rather than crowd out the rest).
    let byteCapacity: Int
    let largestElement: Int

    init(capacity: Int, byteCapacity: Int = 8 << 20, largestElement: Int = 16 << 10) {
        self.capacity = capacity
        self.byteCapacity = byteCapacity
        self.largestElement = largestElement
    }

    /// Whether verdicts are remembered at all.
    var isEnabled: Bool { capacity > 0 }

    func contains(_ key: Key) -> Bool {
        known.withLock { $0.keys.contains(key) }
    }

    func insert(_ key: Key) {
        guard key.size <= largestElement else { return }
        known.withLock { known in
            if known.keys.count >= capacity || known.bytes + key.size > byteCapacity {
                known.keys.removeAll(keepingCapacity: true)
                known.bytes = 0
            }
            if known.keys.insert(key).inserted { known.bytes += key.size }
        }
    }

    /// How many verdicts are kept now.
    var count: Int {
        known.withLock { $0.keys.count }
    }

    /// About how many bytes of elements are kept now.
    var bytes: Int {
        known.withLock { $0.bytes }
    }
}

/// How often elements walked against one definition were found among the clean verdicts: a
/// definition whose elements differ every time (an identifier, a time, a value) is not looked up
/// for long, so its elements are not hashed for nothing, nor crowd the memory. Looked up again
/// now and then, in case that changes.
final class VerdictHitRate: Sendable {
    private let seen = Atomic<Int>(0)
    private let lookups = Atomic<Int>(0)
    private let hits = Atomic<Int>(0)

    /// Whether to look this element up: always at first, then while at least one lookup in
    /// eight finds it, and one element in 64 whatever the rate.
    func shouldLookUp() -> Bool {
        let count = seen.wrappingAdd(1, ordering: .relaxed).newValue
        let asked = lookups.load(ordering: .relaxed)
        guard asked < 32 || hits.load(ordering: .relaxed) * 8 >= asked || count % 64 == 0 else { return false }
        lookups.wrappingAdd(1, ordering: .relaxed)
        return true
    }

    func noteHit() {
        hits.wrappingAdd(1, ordering: .relaxed)
    }

    /// How many lookups found the element (for tests).
    var hitCount: Int { hits.load(ordering: .relaxed) }
}
