import Diagnostics

/// The issues found while reading XML, each with what to look for to give it a column: libxml2
/// reports the line of a tag, and the column is found afterwards on that line of the source.
struct XMLIssueLog {
    var issues: [ParseIssue] = []
    /// For each issue without a column yet: the tag (and attribute) to find on its line, and the
    /// number of the element it is on (issues on one element share its tag).
    private var pendingColumns: [(issue: Int, tag: String, attribute: String?, element: Int)] = []

    /// Where the source can be read again.
    enum Source {
        case none
        case memory([UInt8])
        case file(String)
    }

    /// Adds an issue found on a tag (or one of its attributes) of the given element.
    mutating func append(_ issue: ParseIssue, tag: String, attribute: String?, element: Int) {
        issues.append(issue)
        pendingColumns.append((issues.count - 1, tag, attribute, element))
    }

    /// Fills in the columns of pending issues: each is where its element's tag (or attribute)
    /// starts on its line, found in one pass over the source.
    mutating func resolveColumns(in source: Source) {
        guard !pendingColumns.isEmpty else { return }
        defer { pendingColumns.removeAll() }
        let wanted = Set(pendingColumns.map { issues[$0.issue].location.line })
        guard let maxLine = wanted.max() else { return }
        var lines: [Int: [UInt8]] = [:]
        func collect(_ bytes: some Sequence<UInt8>, startLine: inout Int, current: inout [UInt8]) {
            for b in bytes {
                if b == 0x0A {
                    if wanted.contains(startLine) { lines[startLine] = current }
                    startLine += 1
                    current.removeAll(keepingCapacity: true)
                    if startLine > maxLine { return }
                } else if wanted.contains(startLine) {
                    current.append(b)
                }
            }
        }
        var line = 1
        var current: [UInt8] = []
        if case .file(let path) = source, let file = try? ChunkedFileReader(path: path) {
            var chunk: [UInt8] = []
            while line <= maxLine, (try? file.read(into: &chunk, count: 1 << 20)) ?? 0 > 0 {
                collect(chunk[...], startLine: &line, current: &current)
                chunk.removeAll(keepingCapacity: true)
            }
        } else if case .memory(let bytes) = source {
            collect(bytes, startLine: &line, current: &current)
        }
        if line <= maxLine && wanted.contains(line) { lines[line] = current }
        // Issues come in document order: issues on the element of the line's last issue share its
        // tag, a later element's tag is searched for after it, and columns are counted from the
        // last one (forwards or back), so a line with 200,000 issues is read a few times, not
        // once per issue.
        var cursors: [Int: (tag: Int, element: Int, attribute: Int, counted: Int, column: Int)] = [:]
        for pending in pendingColumns {
            let line = issues[pending.issue].location.line
            guard let text = lines[line] else { continue }
            var cursor = cursors[line] ?? (tag: 0, element: -1, attribute: -1, counted: 0, column: 1)
            if pending.element != cursor.element {
                let tagBytes = Array(("<" + pending.tag).utf8)
                let from = cursor.element < 0 ? 0 : cursor.tag + 1
                guard let tag = firstIndex(of: tagBytes, in: text, from: from) else { continue }
                cursor.tag = tag
                cursor.element = pending.element
                cursor.attribute = -1
            }
            var index = cursor.tag
            if let attribute = pending.attribute {
                let name = Array((attribute + "=").utf8)
                if let at = firstIndex(of: name, in: text, from: max(cursor.tag, cursor.attribute + 1)) ?? firstIndex(of: name, in: text, from: cursor.tag) {
                    index = at
                    cursor.attribute = at
                }
            }
            let characters = { (range: Range<Int>) in text[range].reduce(0) { $1 & 0xC0 != 0x80 ? $0 + 1 : $0 } }
            cursor.column += index >= cursor.counted ? characters(cursor.counted..<index) : -characters(index..<cursor.counted)
            cursor.counted = index
            issues[pending.issue].location.column = cursor.column
            cursors[line] = cursor
        }
    }

    private func firstIndex(of needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard needle.count <= haystack.count else { return nil }
        var i = start
        while i + needle.count <= haystack.count {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

}
