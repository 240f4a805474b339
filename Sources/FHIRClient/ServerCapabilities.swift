import FHIR

/// What a server's CapabilityStatement says it does (its `rest` entries in server mode): for each
/// resource type its interactions, `_include` values, search parameters and conditional writes;
/// for the whole server its interactions (`batch`, `transaction`) and the search parameters it
/// lists for every type. Read once, asked by the pull, the refresh and the push.
public struct ServerCapabilities: Sendable {
    /// What the server says of one resource type.
    public struct ResourceType: Sendable {
        /// Interactions (`read`, `search-type`, `create`, ...).
        public var interactions: Set<String> = []
        /// The `_include` values it supports.
        public var includes: Set<String> = []
        /// Its search parameters' names.
        public var searchParameters: Set<String> = []
        /// Whether it does conditional creates (`If-None-Exist`).
        public var conditionalCreate = false
        /// Whether it does conditional updates.
        public var conditionalUpdate = false
        /// Whether an update may create the resource at an id the client chooses (`updateCreate`).
        public var updateCreate = false
    }

    /// By resource type.
    public var resources: [String: ResourceType] = [:]
    /// System interactions (`transaction`, `batch`, ...).
    public var interactions: Set<String> = []
    /// Search parameters listed for every resource type (`rest.searchParam`).
    public var searchParameters: Set<String> = []

    /// What a CapabilityStatement says, read from its first `rest` entry in server mode.
    public init(_ statement: Element) {
        func codes(_ element: Element, _ name: String, _ field: String) -> [String] {
            element.children(named: name).compactMap { $0.string(field) }
        }
        for rest in statement.children(named: "rest") where rest.string("mode") ?? "server" == "server" {
            interactions.formUnion(codes(rest, "interaction", "code"))
            searchParameters.formUnion(codes(rest, "searchParam", "name"))
            for resource in rest.children(named: "resource") {
                guard let type = resource.string("type") else { continue }
                var entry = resources[type] ?? ResourceType()
                entry.interactions.formUnion(codes(resource, "interaction", "code"))
                entry.includes.formUnion(resource.children(named: "searchInclude").compactMap(\.value))
                entry.searchParameters.formUnion(codes(resource, "searchParam", "name"))
                entry.conditionalCreate = entry.conditionalCreate || resource.string("conditionalCreate") == "true"
                entry.conditionalUpdate = entry.conditionalUpdate || resource.string("conditionalUpdate") == "true"
                entry.updateCreate = entry.updateCreate || resource.string("updateCreate") == "true"
                resources[type] = entry
            }
        }
    }

    /// Whether the server lists a search of `type`, and each of `parameters` for it. A server
    /// may ignore a parameter it does not know and answer as if it were not there (sekmet-fhir
    /// does, with a warning), which makes a search by patient a search of every patient.
    public func canSearch(_ type: String, by parameters: String...) -> Bool {
        guard let resource = resources[type], resource.interactions.contains("search-type") else { return false }
        return parameters.allSatisfy { searchParameters.contains($0) || resource.searchParameters.contains($0) }
    }
}
