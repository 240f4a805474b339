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
        var emitter = JSONEmitter(pretty: pretty)
        emitter.writeResource(resource, indent: 0)
        return emitter.out.bytes
    }

    /// The resource as a JSON string.
    public func string(_ resource: Element) -> String {
        var emitter = JSONEmitter(pretty: pretty)
        emitter.writeResource(resource, indent: 0)
        return emitter.out.withBytes { String(decoding: $0, as: UTF8.self) }
    }

    /// Any element as JSON (a FHIRPath result, for instance): a resource or datatype as an object,
    /// a primitive as its JSON value (`"2026-11"`, `500`, `true`; `null` when it has only extensions).
    public func writeValue(_ element: Element) -> [UInt8] {
        var emitter = JSONEmitter(pretty: pretty)
        if element.isResource {
            emitter.writeResource(element, indent: 0)
        } else if element.isPrimitive || element.isUnknown {
            emitter.primitiveValue(element)
        } else {
            emitter.writeObject(element, indent: 0)
        }
        return emitter.out.bytes
    }

    /// Appends the resource's JSON to `out`.
    public func write(_ resource: Element, into out: inout [UInt8]) {
        var emitter = JSONEmitter(pretty: pretty)
        emitter.writeResource(resource, indent: 0)
        emitter.out.withBytes { out.append(contentsOf: $0) }
    }
}

/// Writes elements as FHIR JSON into a byte buffer. Children are read in place (never copied out
/// of their arrays) and definitions are held without reference counting: the model lives as long
/// as the program.
struct JSONEmitter: ~Copyable {
    var out = JSONBytes(capacity: 4096)
    let pretty: Bool
    let model = ModelInfo.r4

    init(pretty: Bool) {
        self.pretty = pretty
    }

    @inline(__always) mutating func byte(_ b: UInt8) { out.append(b) }

    @inline(__always) mutating func raw(_ s: StaticString) { out.append(s) }

    @inline(__always) mutating func newline(_ indent: Int) {
        guard pretty else { return }
        out.reserve(1 + 2 * indent)
        let end = out.end
        end[0] = 0x0A
        (end + 1).initialize(repeating: 0x20, count: 2 * indent)
        out.advance(1 + 2 * indent)
    }

    /// A member name, with `suffix` (a choice's type) after it. A name the definitions gave
    /// (`defined`) is an identifier and goes out as it is; any other is escaped.
    mutating func key(_ name: String, suffix: String? = nil, defined: Bool = false, _ indent: Int) {
        newline(indent)
        byte(0x22)
        var name = name
        if defined {
            name.withUTF8 { out.append(contentsOf: $0) }
            if var suffix { suffix.withUTF8 { out.append(contentsOf: $0) } }
        } else {
            name.withUTF8 { JSONEscaping.appendEscaped($0, to: &out) }
            if var suffix { suffix.withUTF8 { JSONEscaping.appendEscaped($0, to: &out) } }
        }
        byte(0x22)
        byte(0x3A)
        if pretty { byte(0x20) }
    }

    /// A JSON string literal, escaped by the one rule (`JSONEscaping`).
    mutating func string(_ value: String) { JSONEscaping.appendQuoted(value, to: &out) }

    // The elements are read in place through pointers from here on: an element passed by value
    // out of an array is copied first (a reference count for each of its parts).

    /// A primitive's value in its JSON form.
    mutating func primitiveValue(_ element: borrowing Element) {
        withUnsafePointer(to: element) { primitiveValue(at: $0) }
    }

    mutating func writeResource(_ resource: borrowing Element, indent: Int) {
        withUnsafePointer(to: resource) { writeResource(at: $0, indent: indent) }
    }

    mutating func writeObject(_ element: borrowing Element, indent: Int) {
        withUnsafePointer(to: element) { writeObject(at: $0, indent: indent) }
    }

    mutating func primitiveValue(at element: UnsafePointer<Element>) {
        guard var value = element.pointee.value else { raw("null"); return }
        switch model.type(at: element)?.primitiveKind?.jsonForm ?? .string {
        case .string:
            string(value)
        case .boolean:
            if value == "true" || value == "false" { value.withUTF8 { out.append(contentsOf: $0) } } else { string(value) }
        case .number:
            let written = value.withUTF8 { utf8 -> Bool in
                if Lexical.isDecimal(utf8) {
                    out.append(contentsOf: utf8)
                } else if utf8.first == 0x2B, Lexical.isDecimal(UnsafeBufferPointer(rebasing: utf8.dropFirst())) {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8.dropFirst()))
                } else {
                    return false
                }
                return true
            }
            if !written { string(value) }
        }
    }

    mutating func writeResource(at resource: UnsafePointer<Element>, indent: Int) {
        byte(0x7B)
        key("resourceType", defined: true, indent + 1)
        string(model.type(at: resource)?.name ?? resource.pointee.name)
        writeMembers(of: resource, indent: indent + 1, hasFirst: true)
        newline(indent)
        byte(0x7D)
    }

    /// Writes a complex element, backbone element or primitive's id/extension part as an object.
    mutating func writeObject(at element: UnsafePointer<Element>, indent: Int) {
        byte(0x7B)
        writeMembers(of: element, indent: indent + 1, hasFirst: false)
        newline(indent)
        byte(0x7D)
    }

    /// Writes the children of `element` as object members, grouping repeats into arrays.
    mutating func writeMembers(of element: UnsafePointer<Element>, indent: Int, hasFirst: Bool) {
        unowned(unsafe) let parentType = model.type(at: element)
        element.pointee.children.withUnsafeBufferPointer { children in
            var first = !hasFirst
            var i = 0
            while i < children.count {
                let child = children.baseAddress! + i
                if child.pointee.isUnknown {
                    i += 1
                    guard child.pointee.typeIndex == Element.unknownJSON, var rawValue = child.pointee.value else { continue }
                    if !first { byte(0x2C) }
                    first = false
                    key(child.pointee.name, indent)
                    rawValue.withUTF8 { out.append(contentsOf: $0) }
                    continue
                }
                let traits = parentType?.traits(of: child) ?? (known: false, isChoice: false, isRepeating: false)
                let isChoice = traits.isChoice
                let j = Self.groupEnd(children, from: i, isChoice: isChoice)
                // Several values of a single-valued element (kept by a lenient read) stay an array:
                // writing one of them would drop the others without a word.
                let isRepeating = traits.isRepeating || j - i > 1
                let suffix = isChoice ? model.type(at: child)?.choiceSuffix : nil
                let group = UnsafeBufferPointer(rebasing: children[i..<j])
                i = j
                if Self.allHaveContent(group) {
                    if !first { byte(0x2C) }
                    first = false
                    writeGroup(group, suffix: suffix, defined: traits.known, repeating: isRepeating, indent: indent)
                } else {
                    let written = group.filter { $0.hasContent(in: .json) }
                    guard !written.isEmpty else { continue }
                    if !first { byte(0x2C) }
                    first = false
                    written.withUnsafeBufferPointer { writeGroup($0, suffix: suffix, defined: traits.known, repeating: isRepeating, indent: indent) }
                }
            }
        }
    }

    /// The end of the run of siblings starting at `start` that form one JSON property: same
    /// name, and for choice elements the same type.
    static func groupEnd(_ children: UnsafeBufferPointer<Element>, from start: Int, isChoice: Bool) -> Int {
        var j = start + 1
        while j < children.count && children[j].name == children[start].name && !children[j].isUnknown
                && (!isChoice || children[j].typeIndex == children[start].typeIndex) {
            j += 1
        }
        return j
    }

    /// Whether a primitive has an id or extensions to write in its `_name` object.
    static func hasParts(_ primitive: UnsafePointer<Element>) -> Bool {
        primitive.pointee.children.withUnsafeBufferPointer { children in
            for i in children.indices {
                let child = children.baseAddress! + i
                if child.pointee.isUnknown ? child.pointee.typeIndex == Element.unknownJSON : Element.hasContent(at: child, in: .json) {
                    return true
                }
            }
            return false
        }
    }

    /// Whether every element of a group has something to write.
    static func allHaveContent(_ group: UnsafeBufferPointer<Element>) -> Bool {
        for n in group.indices where !Element.hasContent(at: group.baseAddress! + n, in: .json) { return false }
        return true
    }

    /// Writes one property: the group's name (with a choice's `suffix`; `defined` when the
    /// definitions gave it) and its value or array.
    mutating func writeGroup(_ group: UnsafeBufferPointer<Element>, suffix: String?, defined: Bool, repeating: Bool, indent: Int) {
        let first = group.baseAddress!
        guard let type = model.type(at: first) else { return }
        let name = first.pointee.name
        switch type.kind {
        case .primitive:
            var hasValues = false, hasParts = false
            for n in group.indices {
                hasValues = hasValues || first[n].value != nil
                hasParts = hasParts || Self.hasParts(first + n)
            }
            if hasValues {
                key(name, suffix: suffix, defined: defined, indent)
                if repeating {
                    byte(0x5B)
                    for n in group.indices {
                        if n > 0 { byte(0x2C) }
                        if pretty { byte(0x20) }
                        primitiveValue(at: first + n)
                    }
                    if pretty { byte(0x20) }
                    byte(0x5D)
                } else {
                    primitiveValue(at: first)
                }
            }
            if hasParts {
                if hasValues { byte(0x2C) }
                key("_" + name, suffix: suffix, defined: defined, indent)
                if repeating {
                    byte(0x5B)
                    for n in group.indices {
                        if n > 0 { byte(0x2C) }
                        newline(indent + 1)
                        if Self.hasParts(first + n) { writeObject(at: first + n, indent: indent + 1) } else { raw("null") }
                    }
                    newline(indent)
                    byte(0x5D)
                } else {
                    writeObject(at: first, indent: indent)
                }
            }
        case .complex, .backbone, .resource:
            key(name, suffix: suffix, defined: defined, indent)
            let isResource = type.kind == .resource
            if repeating {
                byte(0x5B)
                for n in group.indices {
                    if n > 0 { byte(0x2C) }
                    newline(indent + 1)
                    if isResource { writeResource(at: first + n, indent: indent + 1) } else { writeObject(at: first + n, indent: indent + 1) }
                }
                newline(indent)
                byte(0x5D)
            } else if isResource {
                writeResource(at: first, indent: indent)
            } else {
                writeObject(at: first, indent: indent)
            }
        }
    }
}
