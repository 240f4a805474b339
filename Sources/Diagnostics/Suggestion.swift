/// "Did you mean" suggestions: the closest of the names a place allows, by edit distance.
public enum Suggestion {
    /// The closest candidate (case ignored) within a distance a typo can explain: two edits, or
    /// a third of the name's length for longer names; nil when none is that close. Of equally
    /// close candidates, the first.
    public static func closest(to name: String, among candidates: [String]) -> String? {
        let target = Array(name.lowercased())
        var best: (name: String, distance: Int)?
        var bound = max(2, name.count / 3)
        for candidate in candidates {
            guard let distance = editDistance(target, Array(candidate.lowercased()), atMost: bound) else { continue }
            best = (candidate, distance)
            // Only a strictly closer candidate replaces it; none is closer than 0.
            if distance == 0 { break }
            bound = distance - 1
        }
        return best?.name
    }

    /// `; did you mean 'x'?` for the closest candidate, or "" when none is close.
    public static func didYouMean(_ name: String, among candidates: [String], suffix: String = "") -> String {
        closest(to: name, among: candidates).map { "; did you mean '\($0)\(suffix)'?" } ?? ""
    }

    /// Levenshtein distance between two strings, by characters.
    public static func editDistance(_ a: String, _ b: String) -> Int {
        let x = Array(a), y = Array(b)
        return editDistance(x, y, atMost: max(x.count, y.count))!
    }

    /// The distance between `x` and `y` when it is at most `bound`, else nil. Gives up as soon
    /// as the lengths, or a whole row of the table, show the bound exceeded: suggestions look
    /// through hundreds of names for every unknown one, and almost all are far.
    static func editDistance(_ x: [Character], _ y: [Character], atMost bound: Int) -> Int? {
        guard abs(x.count - y.count) <= bound else { return nil }
        if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
        var previous = Array(0...y.count)
        var current = previous
        for i in 1...x.count {
            current[0] = i
            var rowMinimum = i
            for j in 1...y.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
                rowMinimum = min(rowMinimum, current[j])
            }
            if rowMinimum > bound { return nil }
            swap(&previous, &current)
        }
        return previous[y.count] <= bound ? previous[y.count] : nil
    }
}
