import FHIR
import FHIRClient
import Foundation

/// What a FHIR or authorization server sends back, read by the client: token answers, SMART
/// discovery documents, OperationOutcomes, transaction responses and `Retry-After` values. The
/// first byte picks which. A token taken is one bearer word with a lifetime within a day; a
/// discovered token endpoint taken is on the FHIR server's origin; errors carry no control
/// characters; a wait is finite and not negative.
public enum ServerAnswerHarness: FuzzHarness {
    public static let name = "server-answers"
    static let fhirBase = "https://ehr.example.org/fhir"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (selector, body) = input.selector
        switch selector % 5 {
        case 0: try tokenAnswer(status: [200, 400, 401, 503][Int(selector / 5) % 4], body)
        case 1: try discovery(body)
        case 2: _ = (try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(body)).flatMap { FHIRRESTClient.outcomeSummary($0.resource) }
        case 3: _ = (try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(body)).map { FHIRRESTClient.entryOutcomes($0.resource) }
        default: try retryAfter(body)
        }
    }

    static func tokenAnswer(status: Int, _ body: [UInt8]) throws(PropertyFailure) {
        let answer: TokenResponse
        do {
            answer = try TokenResponse(status: status, body: body, endpoint: fhirBase + "/token", clientID: "fuzz")
        } catch {
            return try printable(error.description)
        }
        guard !answer.accessToken.isEmpty, !answer.accessToken.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7F }) else {
            throw PropertyFailure("a token with spaces or control characters was taken: \(answer.accessToken.debugDescription)")
        }
        guard (0...TokenResponse.longestLifetime).contains(answer.lifetime) else {
            throw PropertyFailure("a token lifetime of \(answer.lifetime) s was taken")
        }
    }

    static func discovery(_ body: [UInt8]) throws(PropertyFailure) {
        guard let document = try? SMARTConfiguration(status: 200, document: body, url: fhirBase + "/.well-known/smart-configuration") else { return }
        guard (try? document.check(fhirBase: fhirBase, algorithm: "ES384")) != nil else { return }
        let url = URL(string: document.tokenEndpoint)
        guard url?.scheme?.lowercased() == "https", url?.host?.lowercased() == "ehr.example.org", url?.port ?? 443 == 443, url?.user == nil else {
            throw PropertyFailure("discovery sent the assertion to \(document.tokenEndpoint.debugDescription)")
        }
    }

    static func retryAfter(_ body: [UInt8]) throws(PropertyFailure) {
        guard let wait = FHIRRESTClient.retryAfterSeconds(String(decoding: body.prefix(256), as: UTF8.self)) else { return }
        guard wait.isFinite, wait >= 0 else { throw PropertyFailure("Retry-After gave a wait of \(wait) s") }
    }

    static func printable(_ message: String) throws(PropertyFailure) {
        guard !message.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PropertyFailure("an error carries control characters: \(message.debugDescription)")
        }
    }
}
