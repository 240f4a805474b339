import CareStore
import Foundation
import Gateway
@testable import GatewayServer
import JSON
import Testing

/// `GET /carekit/v1/questionnaires` over loopback: a device gets its own patient's forms, by url,
/// version or content hash, and nothing of another patient's.
@Suite("Questionnaire route")
struct QuestionnaireRouteTests {
    static let url = "https://clinic.example.org/fhir/Questionnaire/phq-9"

    static func form(_ patient: String, version: String, title: String, digest: String, at seconds: Double) -> StoredQuestionnaire {
        let json = #"{"resourceType":"Questionnaire","url":"\#(url)","version":"\#(version)","title":"\#(title)","status":"active"}"#
        return StoredQuestionnaire(patientID: patient, url: url, version: version, digest: digest, title: title, resource: Array(json.utf8),
                                   storedAt: Date(timeIntervalSinceReferenceDate: seconds))
    }

    @Test("a device fetches its patient's form by url, url|version and hash; another patient's form, by any of them, is a 404 like none at all",
          arguments: Backend.allCases)
    func ownFormsOnly(backend: Backend) async throws {
        guard let (store, _) = try twoPatientStore(backend) else { return }
        try store.keep([
            Self.form("maria", version: "2.0", title: "Maria's PHQ-9, first", digest: "a1", at: 100),
            Self.form("maria", version: "2.0", title: "Maria's PHQ-9, revised", digest: "a2", at: 200),
            Self.form("john", version: "2.0", title: "John's PHQ-9", digest: "b1", at: 300),
            Self.form("john", version: "3.0", title: "John's newer PHQ-9", digest: "b2", at: 400),
        ])
        let server = try await RunningServer(store: store)
        defer { Task { try? await server.stop() } }
        let code = try DeviceEnrollment(store: store).issueCode(patientID: "maria").code
        let token = try #require(try await server.send("POST", "/carekit/v1/enroll", json: #"{"code": "\#(code)"}"#).body?["token"]?.stringValue)
        let query = { (value: String) in value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }
        func get(_ parameters: String, token: String? = token) async throws -> (status: Int, headers: [String: String], body: JSONValue?) {
            try await server.send("GET", "/carekit/v1/questionnaires?\(parameters)", token: token)
        }

        #expect(try await get("url=\(query(Self.url))", token: nil).status == 401)
        #expect(try await get("url=\(query(Self.url))", token: "not-a-token").status == 401)
        #expect(try await get("").status == 400)
        let newest = try await get("url=\(query(Self.url))")
        #expect(newest.status == 200 && newest.body?["title"]?.stringValue == "Maria's PHQ-9, revised")
        #expect(newest.headers.first { $0.key.lowercased() == "content-type" }?.value == "application/fhir+json")
        #expect(try await get("url=\(query(Self.url + "|2.0"))").body?["title"]?.stringValue == "Maria's PHQ-9, revised")
        #expect(try await get("url=\(query(Self.url + "|2.0"))&hash=a1").body?["title"]?.stringValue == "Maria's PHQ-9, first")
        // John's forms: his version, his hash, under the same url. Each answer is the one a form no one has gets.
        let nobody = try await get("url=\(query("https://clinic.example.org/fhir/Questionnaire/none"))")
        #expect(nobody.status == 404)
        for asked in ["url=\(query(Self.url + "|3.0"))", "url=\(query(Self.url))&hash=b1", "url=\(query(Self.url))&hash=b2"] {
            let answer = try await get(asked)
            #expect(answer.status == 404, "\(asked)")
            #expect(answer.body?["error"]?["message"]?.stringValue?.contains("John") == false)
        }
        // A revoked device gets nothing.
        let device = try #require(try store.devices(patientID: "maria").first)
        #expect(try store.revokeDevice(id: device.id, at: Date()))
        #expect(try await get("url=\(query(Self.url))").status == 401)
    }
}
