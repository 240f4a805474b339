import FHIR
import Testing
@testable import FHIRClient

@Suite("What a server's CapabilityStatement says")
struct ServerCapabilitiesTests {
    let statement = try! FHIRJSONReader().read(Array(#"""
        {"resourceType": "CapabilityStatement", "status": "active", "date": "2026-11-25", "kind": "instance", "fhirVersion": "4.0.1",
         "format": ["json"],
         "rest": [
           {"mode": "server", "interaction": [{"code": "batch"}], "searchParam": [{"name": "_lastUpdated", "type": "date"}],
            "resource": [
              {"type": "CarePlan", "interaction": [{"code": "read"}, {"code": "search-type"}],
               "searchInclude": ["CarePlan:activity-reference"], "searchParam": [{"name": "subject", "type": "reference"}]},
              {"type": "CareTeam", "interaction": [{"code": "read"}]},
              {"type": "Observation", "interaction": [{"code": "create"}, {"code": "search-type"}], "conditionalCreate": true,
               "searchParam": [{"name": "identifier", "type": "token"}]}]},
           {"mode": "client", "interaction": [{"code": "transaction"}],
            "resource": [{"type": "CareTeam", "interaction": [{"code": "search-type"}], "searchParam": [{"name": "subject", "type": "reference"}]}]}]}
        """#.utf8)).resource

    @Test("the server-mode rest entry only: its interactions, includes, search parameters (its own and every type's) and conditional writes")
    func readsServerMode() {
        let capabilities = ServerCapabilities(statement)
        #expect(capabilities.interactions == ["batch"])
        #expect(capabilities.canSearch("CarePlan", by: "subject", "_lastUpdated"))
        #expect(!capabilities.canSearch("CarePlan", by: "patient"))
        #expect(!capabilities.canSearch("CareTeam") && !capabilities.canSearch("CareTeam", by: "subject"), "listed as a client only")
        #expect(!capabilities.canSearch("MedicationRequest"))
        #expect(capabilities.resources["CarePlan"]?.includes == ["CarePlan:activity-reference"])
        #expect(capabilities.resources["Observation"]?.conditionalCreate == true && capabilities.resources["Observation"]?.conditionalUpdate == false)
    }

    @Test("a search page's matches leave out the OperationOutcome a server adds about the search")
    func outcomesAreNotMatches() throws {
        let page = try FHIRJSONReader().read(Array(#"""
            {"resourceType": "Bundle", "type": "searchset", "total": 1, "entry": [
              {"resource": {"resourceType": "CareTeam", "id": "t1"}, "search": {"mode": "match"}},
              {"resource": {"resourceType": "OperationOutcome", "id": "o1", "issue": [{"severity": "warning", "code": "not-supported",
                "diagnostics": "Unknown search parameter 'subject' for CareTeam; parameter ignored"}]}, "search": {"mode": "outcome"}},
              {"resource": {"resourceType": "Practitioner", "id": "p1"}, "search": {"mode": "include"}}]}
            """#.utf8)).resource
        #expect(FHIRRESTClient.matches(page).compactMap { $0.string("id") } == ["t1", "p1"])
    }
}
