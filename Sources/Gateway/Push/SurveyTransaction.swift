import Crypto
import FHIR
import FHIRClient
import Foundation
import Mapping

/// A survey's transaction made fit for the server it goes to. Each entry is exported as a
/// conditional write by identifier (created once, updated by identifier after); for a type the
/// server cannot find by identifier but lets an update create at an id the client picks, the
/// entry becomes `PUT Type/<id>`, the id a digest of the identifier (the same for every version
/// of the outcome, and naming no patient), and references to it follow. A type the server can
/// write neither way refuses the whole transaction before anything is sent.
enum SurveyTransaction {
    static func fitted(_ bundle: Element, to strategies: [String: OutcomePush.Strategy], base: String) throws(FHIRClientError) -> Element {
        var fitted = bundle
        var moved: [String: String] = [:]  // fullUrl → Type/id
        for (i, entry) in bundle.children.enumerated() where entry.name == "entry" {
            guard let resource = entry["resource"], let type = resource.resourceType, let strategy = strategies[type] else { continue }
            // A Provenance is only ever created (each outcome version has its own), found by its tag.
            let provenanceTag = PatientSuppliedProvenance.tag(of: resource)
            if provenanceTag != nil && strategy.conditionalCreate { continue }
            if strategy.conditionalCreate && strategy.conditionalUpdate && strategy.searchable { continue }
            guard strategy.updateCreate else {
                throw .unsupported("write \(type)s exactly once (neither a conditional write by identifier nor an update at an id the gateway picks)")
            }
            guard let identifier = provenanceTag.map({ "\(PatientSuppliedProvenance.tagSystem)|\($0)" })
                    ?? resource.children(named: "identifier").first.map({ "\($0.string("system") ?? "")|\($0.string("value") ?? "")" }) else { continue }
            let id = clientID(for: identifier)
            var rewritten = entry
            rewritten.removeChildren(named: "request")
            if var inner = rewritten["resource"] {
                inner.removeChildren(named: "id")
                inner.children.insert(Element(name: "id", type: "id", value: id), at: 0)
                rewritten.removeChildren(named: "resource")
                rewritten.append(inner)
            }
            rewritten.append(Element(name: "request", type: "Bundle.entry.request", children: [
                Element(name: "method", type: "code", value: "PUT"), Element(name: "url", type: "uri", value: "\(type)/\(id)"),
            ]))
            if let fullURL = entry.string("fullUrl") { moved[fullURL] = "\(type)/\(id)" }
            rewritten.removeChildren(named: "fullUrl")
            rewritten.children.insert(Element(name: "fullUrl", type: "uri", value: "\(base)/\(type)/\(id)"), at: 0)
            fitted.children[i] = rewritten
        }
        return moved.isEmpty ? fitted : repointed(fitted, moved)
    }

    /// `cg-` and 40 hex digits of the SHA-256 of `system|value`.
    static func clientID(for identifier: String) -> String {
        "cg-" + SHA256.hash(data: Array(identifier.utf8)).map { String(format: "%02x", $0) }.joined().prefix(40)
    }

    /// References to a moved entry's old `fullUrl` name its new place.
    static func repointed(_ element: Element, _ moved: [String: String]) -> Element {
        var copy = element
        if copy.name == "reference", let value = copy.value, let target = moved[value] { copy.value = target }
        copy.children = copy.children.map { repointed($0, moved) }
        return copy
    }
}
