// Read an EHR's capabilities and a patient's care plans, every page.
import FHIRClient
import Foundation

// The server, and a bearer token from the environment (never from the command line).
let environment = ProcessInfo.processInfo.environment
let base = environment["EHR_BASE"] ?? "https://ehr.example.org/fhir"
let authentication = try environment["EHR_TOKEN"].map { try Authentication.bearer(secret: $0, source: "EHR_TOKEN") } ?? .none

let client = FHIRRESTClient(base: base, authentication: authentication)
let capabilities = try await client.capabilities()
let plans = try await client.search("CarePlan", [("patient", "maria-lopez")])   // every page
print(capabilities.first("fhirVersion")?.value ?? "-", plans.count)
