import JSON

/// A conformance resource a package holds (StructureDefinition, ValueSet, CodeSystem, …), read as
/// JSON: what it is, its canonical, and where it came from, for messages that name it.
public struct ConformanceResource: Sendable {
    /// `StructureDefinition`, `ValueSet`, `CodeSystem`, …
    public let resourceType: String
    /// Its canonical URL (without a version).
    public let url: String
    /// Its business version, when it states one.
    public let version: String?
    /// The package (`hl7.fhir.us.core#6.1.0`) and file it was read from.
    public let origin: String
    /// The resource itself.
    public let json: JSONValue

    public init?(json: JSONValue, origin: String) {
        guard let type = json["resourceType"]?.stringValue, let url = json["url"]?.stringValue else { return nil }
        self.resourceType = type
        self.url = url
        self.version = json["version"]?.stringValue
        self.origin = origin
        self.json = json
    }

    /// `url|version`, as a versioned canonical names it.
    public var versionedURL: String { version.map { "\(url)|\($0)" } ?? url }
}

/// A canonical reference split into its URL and optional version (`url|6.1.0`).
public struct Canonical: Sendable, Hashable, CustomStringConvertible {
    public let url: String
    public let version: String?

    public init(_ text: String) {
        if let bar = text.lastIndex(of: "|") {
            url = String(text[..<bar])
            let version = String(text[text.index(after: bar)...])
            self.version = version.isEmpty ? nil : version
        } else {
            url = text
            version = nil
        }
    }

    public var description: String { version.map { "\(url)|\($0)" } ?? url }
}
