import FHIR

/// Answer value sets a form names by url (`answerValueSet: http://loinc.org/vs/LL358-3`): the
/// gateway checks answers against a set it can list, and ResearchKitOnFHIR offers choices only
/// from a set the form contains. So a set found among the run's resources, a `--questionnaires`
/// folder or the EHR, and listable (an `expansion`, or `compose.include`s of listed concepts
/// only), is put in the kept form's `contained` under its own url, and the item names it by
/// `#id`; the form means what it meant. One not found, or not listable (a filter, another value
/// set), is reported and its answers are taken as given.
extension QuestionnaireCatalog {
    /// An answerValueSet the catalog could not put in the form, and why.
    public struct UnlistedAnswerSet: Sendable, Equatable {
        /// The item naming it.
        public var linkId: String
        /// The value set's canonical, as the item names it.
        public var canonical: String
        /// Why it is not listed: not found, or not listable.
        public var reason: String
    }

    /// `form` with every external answerValueSet the catalog can list contained, and those it cannot.
    public func containingAnswerSets(_ form: Element) -> (form: Element, unlisted: [UnlistedAnswerSet]) {
        var result = form
        var added: [Element] = []
        var ids: [String: String] = [:]
        var taken = Set(form.children(named: "contained").compactMap { $0.string("id") })
        var unlisted: [UnlistedAnswerSet] = []
        func walk(_ element: inout Element) {
            for index in element.children.indices where element.children[index].name == "item" {
                var item = element.children[index]
                if let named = item.string("answerValueSet"), !named.hasPrefix("#") {
                    if let id = ids[named] ?? contained(named, &added, &taken, &unlisted, linkId: item.string("linkId") ?? "?") {
                        ids[named] = id
                        item.setValue("#" + id, for: "answerValueSet")
                    }
                }
                walk(&item)
                element.children[index] = item
            }
        }
        walk(&result)
        guard !added.isEmpty else { return (result, unlisted) }
        // Contained resources go after the resource's own header (id, meta, implicitRules, language, text) and its other contained ones.
        let header: Set<String> = ["resourceType", "id", "meta", "implicitRules", "language", "text", "contained"]
        let at = result.children.firstIndex { !header.contains($0.name) } ?? result.children.count
        result.children.insert(contentsOf: added, at: at)
        return (result, unlisted)
    }

    /// The value set `named` as a contained resource under a new id (added to `added`), or nil
    /// with the reason in `unlisted`.
    private func contained(_ named: String, _ added: inout [Element], _ taken: inout Set<String>, _ unlisted: inout [UnlistedAnswerSet],
                           linkId: String) -> String? {
        guard let canonical = Canonical(named), let source = valueSet(canonical) else {
            unlisted.append(UnlistedAnswerSet(linkId: linkId, canonical: named, reason: "is not in the imported data, the questionnaires folder or the EHR"))
            return nil
        }
        guard let codes = Self.listedCodes(source.resource), !codes.isEmpty else {
            unlisted.append(UnlistedAnswerSet(linkId: linkId, canonical: named,
                                              reason: "cannot be listed (\(source.origin) has no expansion, and its compose uses filters or other value sets)"))
            return nil
        }
        var n = added.count + 1
        while taken.contains("answers-\(n)") { n += 1 }
        let id = "answers-\(n)"
        taken.insert(id)
        var copy = source.resource
        copy.name = "contained"
        // A contained resource has no meta of its own, nor contained ones (dom-2, dom-4).
        copy.children.removeAll { ["meta", "contained", "text"].contains($0.name) }
        copy.setValue(id, for: "id")
        added.append(copy)
        return id
    }

    /// A value set's codes as `valueCoding`s: its expansion's (nested `contains` flattened,
    /// abstract ones left out) when it has one, else its compose's when every include lists its
    /// concepts and nothing is excluded; nil when the set cannot be listed so.
    public static func listedCodes(_ valueSet: Element) -> [Element]? {
        if let expansion = valueSet["expansion"] {
            func flattened(_ element: Element) -> [Element] {
                element.children(named: "contains").flatMap { entry -> [Element] in
                    let own = entry.string("code").flatMap { code -> Element? in
                        entry.string("abstract") == "true" ? nil
                            : AnswerValue.codingElement(system: entry.string("system"), code: code, display: entry.string("display"), extensions: entry.children(named: "extension"))
                    }
                    return (own.map { [$0] } ?? []) + flattened(entry)
                }
            }
            return flattened(expansion)
        }
        guard let compose = valueSet["compose"], compose.children(named: "exclude").isEmpty else { return nil }
        let includes = compose.children(named: "include")
        guard !includes.isEmpty, includes.allSatisfy({ !$0.children(named: "concept").isEmpty && $0.children(named: "filter").isEmpty && $0.children(named: "valueSet").isEmpty })
        else { return nil }
        return Questionnaire.codings(of: valueSet)
    }
}

extension Questionnaire {
    /// The answerValueSets a form's items name by url (not `#id` of one it contains), each once,
    /// in order: what an import looks for besides the form.
    public static func externalAnswerSets(in form: Element) -> [String] {
        var found: [String] = []
        func walk(_ element: Element) {
            for item in element.children(named: "item") {
                if let named = item.string("answerValueSet"), !named.hasPrefix("#"), !found.contains(named) { found.append(named) }
                walk(item)
            }
        }
        walk(form)
        return found
    }
}
