/// "Did you mean" suggestions: the closest of the names a place allows, by edit distance.
public enum Suggestion {
    /// The closest candidate (case ignored) within a distance a typo can explain: two edits, or
    /// a third of the name's length for longer names; nil when none is that close.
    public static func closest(to name: String, among candidates: [String]) -> String? {
        let lowered = name.lowercased()
        let scored = candidates.map { ($0, editDistance(lowered, $0.lowercased())) }.min { $0.1 < $1.1 }
        guard let (best, distance) = scored, distance <= max(2, name.count / 3) else { return nil }
        return best
    }

    /// `; did you mean 'x'?` for the closest candidate, or "" when none is close.
    public static func didYouMean(_ name: String, among candidates: [String], suffix: String = "") -> String {
        closest(to: name, among: candidates).map { "; did you mean '\($0)\(suffix)'?" } ?? ""
    }

    /// Levenshtein distance between two strings, by characters.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a), y = Array(b)
        if x.isEmpty { return y.count }
        if y.isEmpty { return x.count }
        var previous = Array(0...y.count)
        var current = previous
        for i in 1...x.count {
            current[0] = i
            for j in 1...y.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
            }
            swap(&previous, &current)
        }
        return previous[y.count]
    }
}
