import JSON
/// Writes `Element` trees as FHIR R4 JSON.
///
/// Choice elements get their typed names (`valueQuantity`), repeating elements become arrays,
/// primitive ids and extensions go to `_name` (with `null` padding in arrays), numbers and
/// booleans are written bare in their lexical form (a decimal `1.50` stays `1.50`), and unknown
/// content read from JSON is written back verbatim.
public struct FHIRJSONWriter: Sendable {
    /// Indent with two spaces and break lines (the default); false writes one compact line,
    /// as NDJSON needs.
    public var pretty: Bool

    /// A writer; `pretty` indents, otherwise one line.
    public init(pretty: Bool = true) {
        self.pretty = pretty
    }

    /// The resource as JSON bytes (UTF-8, no trailing newline).
    public func write(_ resource: Element) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(4096)
        write(resource, into: &out)
        return out
    }

    /// The resource as a JSON string.
    public func string(_ resource: Element) -> String {
        String(decoding: write(resource), as: UTF8.self)
    }

    /// Any element as JSON (a FHIRPath result, for instance): a resource or datatype as an object,
    /// a primitive as its JSON value (`"2026-11"`, `500`, `true`; `null` when it has only extensions).
    public func writeValue(_ element: Element) -> [UInt8] {
        var emitter = JSONEmitter(out: [], pretty: pretty)
        if element.isResource {
            emitter.writeResource(element, indent: 0)
        } else if element.isPrimitive || element.isUnknown {
            emitter.primitiveValue(element)
        } else {
            emitter.writeObject(element, indent: 0)
        }
        return emitter.out
    }

    /// Appends the resource's JSON to `out`.
    public func write(_ resource: Element, into out: inout [UInt8]) {
        var emitter = JSONEmitter(out: out, pretty: pretty)
        out = []
        emitter.writeResource(resource, indent: 0)
        out = emitter.out
    }
}

struct JSONEmitter {
    var out: [UInt8]
    let pretty: Bool
    let model = ModelInfo.r4

    @inline(__always) mutating func byte(_ b: UInt8) { out.append(b) }

    @inline(__always) mutating func raw(_ s: StaticString) {
        s.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    @inline(__always) mutating func newline(_ indent: Int) {
        guard pretty else { return }
        out.append(0x0A)
        for _ in 0..<indent { out.append(0x20); out.append(0x20) }
    }

    mutating func key(_ name: String, _ indent: Int) {
        newline(indent)
        string(name)
        byte(0x3A)
        if pretty { byte(0x20) }
    }

    /// A JSON string literal, escaped by the one rule (`JSONEscaping`).
    mutating func string(_ value: String) { JSONEscaping.appendQuoted(value, to: &out) }

    /// A primitive's value in its JSON form.
    mutating func primitiveValue(_ element: Element) {
        guard let value = element.value else { raw("null"); return }
        switch element.definition?.primitiveKind?.jsonForm ?? .string {
        case .string:
            string(value)
        case .boolean:
            if value == "true" || value == "false" { out.append(contentsOf: value.utf8) } else { string(value) }
        case .number:
            var v = value
            let isNumber = v.withUTF8 { Lexical.isDecimal($0) }
            if isNumber {
                out.append(contentsOf: value.utf8)
            } else if value.hasPrefix("+"), Lexical.isDecimal(Array(value.utf8.dropFirst()).withUnsafeBufferPointer({ $0 })) {
                out.append(contentsOf: value.utf8.dropFirst())
            } else {
                string(value)
            }
        }
    }

    mutating func writeResource(_ resource: Element, indent: Int) {
        byte(0x7B)
        key("resourceType", indent + 1)
        string(resource.typeName ?? resource.name)
        writeMembers(of: resource, indent: indent + 1, hasFirst: true)
        newline(indent)
        byte(0x7D)
    }

    /// Writes a complex element, backbone element or primitive's id/extension part as an object.
    mutating func writeObject(_ element: Element, indent: Int) {
        byte(0x7B)
        writeMembers(of: element, indent: indent + 1, hasFirst: false)
        newline(indent)
        byte(0x7D)
    }

    /// Writes the children of `element` as object members, grouping repeats into arrays.
    mutating func writeMembers(of element: Element, indent: Int, hasFirst: Bool) {
        var first = !hasFirst
        let children = element.children
        let parentType = element.definition
        var i = 0
        while i < children.count {
            let child = children[i]
            if child.isUnknown {
                i += 1
                guard child.typeIndex == Element.unknownJSON, let rawValue = child.value else { continue }
                if !first { byte(0x2C) }
                first = false
                key(child.name, indent)
                out.append(contentsOf: rawValue.utf8)
                continue
            }
            let definition = parentType?.element(of: child)
            let j = Self.groupEnd(children, from: i, isChoice: definition?.isChoice ?? false)
            // Several values of a single-valued element (kept by a lenient read) stay an array:
            // writing one of them would drop the others without a word.
            let isRepeating = (definition?.isRepeating ?? false) || j - i > 1
            var name = child.name
            if definition?.isChoice == true, let typeName = child.typeName {
                name += ElementDefinition.choiceSuffix(for: typeName)
            }
            let group = children[i..<j]
            let written = group.allSatisfy { $0.hasContent(in: .json) } ? group : ArraySlice(group.filter { $0.hasContent(in: .json) })
            i = j
            guard !written.isEmpty else { continue }
            if !first { byte(0x2C) }
            first = false
            writeGroup(written, name: name, repeating: isRepeating, indent: indent)
        }
    }

    /// The end of the run of siblings starting at `start` that form one JSON property (or one
    /// XML element name): same name, and for choice elements the same type.
    static func groupEnd(_ children: [Element], from start: Int, isChoice: Bool) -> Int {
        let first = children[start]
        var j = start + 1
        while j < children.count && children[j].name == first.name && !children[j].isUnknown
                && (!isChoice || children[j].typeIndex == first.typeIndex) {
            j += 1
        }
        return j
    }

    /// Whether a primitive has an id or extensions to write in its `_name` object.
    static func hasParts(_ primitive: Element) -> Bool {
        primitive.children.contains { $0.isUnknown ? $0.typeIndex == Element.unknownJSON : $0.hasContent(in: .json) }
    }

    mutating func writeGroup(_ group: ArraySlice<Element>, name: String, repeating: Bool, indent: Int) {
        let sample = group[group.startIndex]
        guard let type = sample.definition else { return }
        switch type.kind {
        case .primitive:
            let hasValues = group.contains { $0.value != nil }
            let hasParts = group.contains(where: Self.hasParts)
            if hasValues {
                key(name, indent)
                if repeating {
                    byte(0x5B)
                    for (n, e) in group.enumerated() {
                        if n > 0 { byte(0x2C) }
                        if pretty { byte(0x20) }
                        primitiveValue(e)
                    }
                    if pretty { byte(0x20) }
                    byte(0x5D)
                } else {
                    primitiveValue(sample)
                }
            }
            if hasParts {
                if hasValues { byte(0x2C) }
                key("_" + name, indent)
                if repeating {
                    byte(0x5B)
                    for (n, e) in group.enumerated() {
                        if n > 0 { byte(0x2C) }
                        newline(indent + 1)
                        if Self.hasParts(e) { writeObject(e, indent: indent + 1) } else { raw("null") }
                    }
                    newline(indent)
                    byte(0x5D)
                } else {
                    writeObject(sample, indent: indent)
                }
            }
        case .complex, .backbone, .resource:
            key(name, indent)
            let isResource = type.kind == .resource
            if repeating {
                byte(0x5B)
                for (n, e) in group.enumerated() {
                    if n > 0 { byte(0x2C) }
                    newline(indent + 1)
                    if isResource { writeResource(e, indent: indent + 1) } else { writeObject(e, indent: indent + 1) }
                }
                newline(indent)
                byte(0x5D)
            } else if isResource {
                writeResource(sample, indent: indent)
            } else {
                writeObject(sample, indent: indent)
            }
        }
    }
}
