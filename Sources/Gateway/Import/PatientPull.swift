import FHIR
import FHIRClient
import Foundation
import Mapping

/// Why a pull failed: the server, the patient and the client's error.
public struct PatientPullError: Error, Sendable, CustomStringConvertible {
    /// The server's base URL.
    public var base: String
    /// The patient's id on the server.
    public var patient: String
    /// What the client met.
    public var cause: FHIRClientError
    public var description: String { "\(base): Patient/\(patient): \(cause)" }
}

/// What `caregate import --from URL --patient ID` reads from an EHR: the Patient, the patient's
/// CarePlans with the resources their activities reference, the CareTeams (the patient's and
/// those the plans name) and the Practitioners and PractitionerRoles in them. The result goes
/// through the same mapping and store as files do; each resource's origin is the URL it came from.
public struct PatientPull: Sendable {
    /// The EHR's client.
    public let client: FHIRRESTClient
    /// Resources per search page.
    public var pageSize = 100
    /// The forms the pulled resources' survey activities ask that they do not hold
    /// (`FHIRImporter.missingQuestionnaires`): fetched from the server too, when given.
    public var formsAsked: (@Sendable ([SourcedResource]) -> [Canonical])?

    /// A pull through `client`.
    public init(client: FHIRRESTClient) {
        self.client = client
    }

    /// What was pulled, and notes on what could not be (a reference the server does not have).
    public struct Result: Sendable {
        /// The resources, each with the URL it came from as its origin.
        public var resources: [SourcedResource] = []
        /// What could not be pulled.
        public var notes: [ImportNote] = []
        /// The interactions made, for the report (`GET CarePlan?subject=...`).
        public var requests: [String] = []
        /// An empty result.
        public init() {}
    }

    /// Pulls several patients; the first that fails stops the pull (`patient` names it).
    public func pull(patients ids: [String]) async throws(PatientPullError) -> Result {
        var result = Result()
        var capabilities: ServerCapabilities?
        for id in ids {
            do throws(FHIRClientError) {
                if capabilities == nil { capabilities = ServerCapabilities(try await client.capabilities()) }
                let one = try await pull(patient: id, capabilities: capabilities)
                result.resources += one.resources
                result.notes += one.notes
                result.requests += one.requests
            } catch {
                throw PatientPullError(base: client.base, patient: id, cause: error)
            }
        }
        return result
    }

    /// Pulls one patient's care plan data. A patient the server does not have, a server that
    /// cannot search CarePlans, or a network failure after retries is an error and nothing is
    /// returned; a dangling reference is a note and the rest goes on.
    /// `capabilities`: the server's CapabilityStatement when the caller has it (read once for
    /// several patients), else it is read here.
    public func pull(patient id: String, capabilities known: ServerCapabilities? = nil) async throws(FHIRClientError) -> Result {
        var result = Result()
        var have: [String: Element] = [:]
        var order: [String] = []
        func keep(_ resource: Element) {
            guard let type = resource.resourceType, let rid = resource.string("id") else { return }
            let key = "\(type)/\(rid)"
            if have[key] == nil { order.append(key) }
            have[key] = resource
        }

        let supported: ServerCapabilities
        if let known { supported = known } else { supported = ServerCapabilities(try await client.capabilities()) }
        guard supported.canSearch("CarePlan") else {
            throw .unsupported("search CarePlans (its CapabilityStatement has no search-type for CarePlan)")
        }
        result.requests.append("GET Patient/\(id)")
        do throws(FHIRClientError) {
            keep(try await client.read("Patient", id))
        } catch .http(status: 404, _, _, _) {
            throw .invalidResponse(url: client.url("Patient/\(id)"), reason: "the server has no Patient/\(id)")
        } catch .http(status: 410, _, _, _) {
            throw .invalidResponse(url: client.url("Patient/\(id)"), reason: "Patient/\(id) was deleted on the server")
        }

        // CarePlans, with their activities' references included when the server can.
        var parameters = [("subject", "Patient/\(id)"), ("_count", String(pageSize))]
        let include = "CarePlan:activity-reference"
        if supported.resources["CarePlan"]?.includes.contains(include) ?? false { parameters.append(("_include", include)) }
        result.requests.append("GET CarePlan?" + parameters.map { "\($0.0)=\($0.1)" }.joined(separator: "&"))
        let plans = try await client.search("CarePlan", parameters)
        for resource in own(plans, patient: id, notes: &result.notes) { keep(resource) }

        // CareTeams of the patient, when the server has them.
        if supported.canSearch("CareTeam", by: "subject") {
            result.requests.append("GET CareTeam?subject=Patient/\(id)")
            let teams = try await client.search("CareTeam", [("subject", "Patient/\(id)"), ("_count", String(pageSize))])
            for team in own(teams, patient: id, notes: &result.notes) { keep(team) }
        }

        // What the plans and teams name that is not in hand yet: read it, one level at a time
        // (activity → MedicationRequest; team → PractitionerRole → Practitioner).
        var reported: Set<String> = []
        for _ in 0..<3 {
            var wanted: [(key: String, from: String, path: String)] = []
            for key in order {
                guard let resource = have[key] else { continue }
                for (path, reference) in Self.references(in: resource) {
                    guard let target = Self.localKey(reference, base: client.base), have[target] == nil,
                          !wanted.contains(where: { $0.key == target }) else { continue }
                    wanted.append((target, key, path))
                }
            }
            if wanted.isEmpty { break }
            for item in wanted {
                let parts = item.key.split(separator: "/")
                result.requests.append("GET \(item.key)")
                do throws(FHIRClientError) {
                    keep(try await client.read(String(parts[0]), String(parts[1])))
                } catch .http(let status, _, _, let outcome) where status == 404 || status == 410 || status == 403 {
                    guard reported.insert(item.key).inserted else { continue }
                    result.notes.append(ImportNote(kind: .warning, resource: item.from, path: item.path, origin: client.url(item.from),
                                                   message: "references \(item.key), which the server does not give (HTTP \(status)\(outcome.map { ": \($0)" } ?? ""))"))
                }
            }
        }
        result.resources = order.compactMap { key in have[key].map { SourcedResource(resource: $0, origin: client.url(key)) } }
        if let formsAsked { try await fetchForms(formsAsked(result.resources), into: &result) }
        return result
    }

    /// Fetches survey forms: `Questionnaire/id` (relative, or under this server's base) read by
    /// id, any other canonical searched by url (and version). A form the server does not have is
    /// a note, and the mapping reports the activity it leaves out.
    func fetchForms(_ canonicals: [Canonical], into result: inout Result) async throws(FHIRClientError) {
        var forms: [Element] = []
        for canonical in canonicals {
            var found: [Element] = []
            var asked: String
            if let key = Self.localKey(canonical.url, base: client.base), key.hasPrefix("Questionnaire/") {
                asked = "GET \(key)"
                do throws(FHIRClientError) {
                    found = [try await client.read("Questionnaire", String(key.dropFirst("Questionnaire/".count)))]
                } catch .http(let status, _, _, _) where status == 404 || status == 410 || status == 403 {}
            } else {
                var parameters = [("url", canonical.url)]
                if let version = canonical.version { parameters.append(("version", version)) }
                asked = "GET Questionnaire?" + parameters.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
                // A server that ignores a parameter answers with other forms: only the one asked for is kept.
                found = try await client.search("Questionnaire", parameters).filter { form in
                    form.resourceType == "Questionnaire" && form.string("url") == canonical.url
                        && (canonical.version == nil || form.string("version") == canonical.version)
                }
            }
            result.requests.append(asked)
            if found.isEmpty {
                result.notes.append(ImportNote(kind: .warning, resource: "Questionnaire", path: nil, origin: client.base,
                                               message: "the server has no Questionnaire \(canonical) (\(asked))"))
            }
            result.resources += found.map { SourcedResource(resource: $0, origin: client.url($0.relativeReference ?? "Questionnaire")) }
            forms += found
        }
        try await fetchAnswerSets(forms.flatMap(Questionnaire.externalAnswerSets(in:)), into: &result)
    }

    /// Fetches the value sets fetched forms name by url (`answerValueSet`): searched by url (and
    /// version, first page only); one the search does not give listed is asked of `ValueSet/$expand`. One the
    /// server cannot give listed is a note (its answers are then taken as given).
    func fetchAnswerSets(_ named: [String], into result: inout Result) async throws(FHIRClientError) {
        for text in Set(named).sorted() {
            guard let canonical = Canonical(text) else { continue }
            var parameters = [("url", canonical.url)]
            if let version = canonical.version { parameters.append(("version", version)) }
            result.requests.append("GET ValueSet?" + parameters.map { "\($0.0)=\($0.1)" }.joined(separator: "&"))
            // One page: a server that ignores `url` would otherwise list every set it has.
            var found: Element?
            do throws(FHIRClientError) {
                found = try await client.firstPage("ValueSet", parameters + [("_count", "50")]).last { set in
                    set.resourceType == "ValueSet" && set.string("url") == canonical.url && (canonical.version == nil || set.string("version") == canonical.version)
                }
            } catch .http {
                // A server that does not search ValueSets (or will not here): $expand is asked next.
            }
            if found.flatMap(QuestionnaireCatalog.listedCodes) == nil {
                result.requests.append("GET ValueSet/$expand?url=\(text)")
                do throws(FHIRClientError) {
                    var expanded = try await client.expand(valueSet: canonical.url, version: canonical.version)
                    // Indexed by the url asked, whatever the expansion says of itself.
                    expanded.setValue(canonical.url, for: "url")
                    if let version = canonical.version { expanded.setValue(version, for: "version") }
                    if QuestionnaireCatalog.listedCodes(expanded) != nil { found = expanded }
                } catch .http {
                    // A server without the operation (404, 501) or that cannot expand this set: noted below.
                }
            }
            guard let found, QuestionnaireCatalog.listedCodes(found) != nil else {
                result.notes.append(ImportNote(kind: .warning, resource: "ValueSet", path: nil, origin: client.base,
                                               message: "the server gives no listed ValueSet \(text) (searched, then $expand): answers to the items naming it are taken as given"))
                continue
            }
            result.resources.append(SourcedResource(resource: found, origin: client.url(found.relativeReference ?? "ValueSet")))
        }
    }

    /// Survey forms fetched by canonical, outside a pull (a staged import's `formSource`): the
    /// forms found, a note for each the server lacks, and one naming the forms a failure left unfetched.
    public func forms(_ canonicals: [Canonical]) async -> (forms: [SourcedResource], notes: [ImportNote]) {
        var result = Result()
        do throws(FHIRClientError) { try await fetchForms(canonicals, into: &result) } catch {
            result.notes.append(ImportNote(kind: .warning, resource: "Questionnaire", path: nil, origin: client.base,
                                           message: "the forms \(canonicals.map(\.description).joined(separator: ", ")) could not all be fetched: \(error)"))
        }
        return (result.resources, result.notes)
    }

    /// What a search by the patient gave, without the CarePlans and CareTeams of other patients
    /// (a server that ignores a parameter it does not know answers for every patient), each left
    /// out with a warning; resources the search included alongside pass.
    func own(_ found: [Element], patient id: String, notes: inout [ImportNote]) -> [Element] {
        found.filter { resource in
            guard let type = resource.resourceType, ["CarePlan", "CareTeam"].contains(type) else { return true }
            let subject = resource.first("subject.reference")?.value
            if let subject, Self.localKey(subject, base: client.base) == "Patient/\(id)" { return true }
            let key = "\(type)/\(resource.string("id") ?? "?")"
            notes.append(ImportNote(kind: .warning, resource: key, path: "subject", origin: client.url(key),
                                    message: "the search for Patient/\(id)'s \(type)s gave this one, of \(subject ?? "no patient"); left out"))
            return false
        }
    }

    /// The references worth following from a pulled resource, with where they are.
    static func references(in resource: Element) -> [(path: String, reference: String)] {
        var found: [(String, String)] = []
        switch resource.resourceType {
        case "CarePlan":
            for (i, activity) in resource.children(named: "activity").enumerated() {
                if let reference = activity.first("reference.reference")?.value { found.append(("activity[\(i)].reference", reference)) }
            }
            for (i, team) in resource.children(named: "careTeam").enumerated() {
                if let reference = team.string("reference") { found.append(("careTeam[\(i)]", reference)) }
            }
        case "CareTeam":
            for (i, participant) in resource.children(named: "participant").enumerated() {
                if let reference = participant.first("member.reference")?.value { found.append(("participant[\(i)].member", reference)) }
            }
        case "PractitionerRole":
            if let reference = resource.first("practitioner.reference")?.value { found.append(("practitioner", reference)) }
        case "Task":
            // An SDC Task fulfilling a ServiceRequest: the request names the form and the schedule.
            if let reference = resource.first("focus.reference")?.value { found.append(("focus", reference)) }
        default:
            break
        }
        return found.filter { (_, reference) in
            followedTypes.contains(reference.split(separator: "/").dropLast().last.map(String.init) ?? "")
        }
    }

    /// The types a pull reads by reference: what plans' activities, teams and SDC Tasks name.
    public static let followedTypes = ["MedicationRequest", "ServiceRequest", "CareTeam", "Practitioner", "PractitionerRole", "Appointment",
                                       "CommunicationRequest", "DeviceRequest", "NutritionOrder", "Task", "VisionPrescription", "RequestGroup"]

    /// `Type/id` for a reference this server can give: relative, or absolute under its base.
    /// Contained (`#x`), versioned (`/_history/`) parts and other servers' URLs are left alone.
    static func localKey(_ reference: String, base: String) -> String? {
        var text = reference
        if text.hasPrefix("#") || text.hasPrefix("urn:") { return nil }
        if text.hasPrefix("http://") || text.hasPrefix("https://") {
            guard text.hasPrefix(base + "/") else { return nil }
            text = String(text.dropFirst(base.count + 1))
        }
        if let history = text.range(of: "/_history/") { text = String(text[..<history.lowerBound]) }
        let parts = text.split(separator: "/")
        guard parts.count == 2, parts[0].first?.isUppercase == true else { return nil }
        return "\(parts[0])/\(parts[1])"
    }

}
