import FHIR
import Foundation
import Testing
@testable import FHIRClient

// A generous time bound: a loaded machine may pause a test between attempts.
let fast = RetryPolicy(maxAttempts: 4, baseDelay: 0.05, maxDelay: 2, maxTotal: 600)

@Suite("FHIR client over libcurl")
struct FHIRClientTests {
    @Test("reads a resource (gzip-compressed), sends Accept and the bearer token, and never puts the token in errors")
    func read() async throws {
        let server = try ScriptedServer([["path": "/fhir/Patient/p1", "responses": [["status": 200, "body": patient("p1"), "gzip": true]]]])
        let client = FHIRRESTClient(base: server.base, authentication: .bearer("s3cret-token"), retry: fast)
        let read = try await client.read("Patient", "p1")
        #expect(read.first("name.family")?.value == "López")
        let headers = try #require(server.requests.first?["headers"] as? [String: String])
        #expect(headers["Authorization"] == "Bearer s3cret-token")
        #expect(headers["Accept"] == "application/fhir+json")
        #expect(headers["Accept-Encoding"]?.contains("gzip") == true)
        do {
            _ = try await client.read("Patient", "missing")
            Issue.record("read a missing patient")
        } catch {
            #expect(error.description.contains("HTTP 404") && error.description.contains("no rule for /fhir/Patient/missing"))
            #expect(!error.description.contains("s3cret"))
            #expect(server.requests.count == 2)  // a 404 is not retried
        }
    }

    @Test("Retry-After: seconds or an IMF-fixdate; never negative, never infinite or NaN; anything else is no wait (found by fuzz-server-answers)")
    func retryAfterValues() {
        let now = Date(timeIntervalSince1970: 1_792_567_000)
        #expect(FHIRRESTClient.retryAfterSeconds("Wed, 21 Oct 2026 07:28:00 GMT", now: now) == 680)
        #expect(FHIRRESTClient.httpDate("Sun, 29 Feb 2032 23:59:59 GMT") == Date(timeIntervalSince1970: 1_961_711_999))
        #expect(FHIRRESTClient.httpDate("Tue, 01 Mar 2100 12:00:00 GMT") == Date(timeIntervalSince1970: 4_107_585_600))
        #expect(FHIRRESTClient.httpDate("Thu, 01 Jan 1970 00:00:00 GMT") == Date(timeIntervalSince1970: 0))
        #expect(FHIRRESTClient.retryAfterSeconds("Thu, 01 Jan 1970 00:00:00 GMT", now: now) == 0)
        #expect(FHIRRESTClient.retryAfterSeconds(" 120 ") == 120)
        #expect(FHIRRESTClient.retryAfterSeconds("-5") == 0)
        for junk in ["nan", "inf", "-inf", "1e400", "Wed, 32 Oct 2026 07:28:00 GMT", "Wed, 21 Oct 2026 07:28:00 CET", "\"response\"\u{10430A}", ""] {
            #expect(FHIRRESTClient.retryAfterSeconds(junk) == nil, "\(junk)")
        }
    }

    @Test("503 and 429 are retried, honouring Retry-After; repeated failures give up after the limit")
    func retries() async throws {
        let server = try ScriptedServer([
            ["path": "/fhir/Patient/p1", "responses": [["status": 503, "headers": ["Retry-After": "1"]], ["status": 429, "headers": ["Retry-After": "0"]], ["status": 200, "body": patient("p1")]]],
            ["path": "/fhir/Patient/down", "responses": [["status": 500]]],
        ])
        let client = FHIRRESTClient(base: server.base, retry: fast)
        let started = Date()
        #expect(try await client.read("Patient", "p1").string("id") == "p1")
        #expect(Date().timeIntervalSince(started) >= 1)
        #expect(server.requests.count == 3)
        do {
            _ = try await client.read("Patient", "down")
            Issue.record("no failure")
        } catch {
            guard case .gaveUp(let attempts, let last) = error else { Issue.record("\(error)"); return }
            #expect(attempts == 4 && last.contains("HTTP 500"))
        }
    }

    @Test("a dropped connection and a closed port are network errors, retried")
    func network() async throws {
        let server = try ScriptedServer([["path": "/fhir/Patient/p1", "responses": [["drop": true], ["status": 200, "body": patient("p1")]]]])
        let client = FHIRRESTClient(base: server.base, retry: fast)
        #expect(try await client.read("Patient", "p1").string("id") == "p1")
        // A minute in all: a loaded machine (the sanitizer runs beside fuzzers) can take seconds to refuse.
        let closed = FHIRRESTClient(base: "http://127.0.0.1:9/fhir", retry: RetryPolicy(maxAttempts: 2, baseDelay: 0.01, maxDelay: 0.1, maxTotal: 60))
        do {
            _ = try await closed.read("Patient", "p1")
            Issue.record("no failure")
        } catch {
            guard case .gaveUp(2, let last) = error else { Issue.record("\(error)"); return }
            #expect(last.contains("libcurl error"))
        }
    }

    @Test("search follows next links as given, and refuses a loop")
    func paging() async throws {
        let server = try ScriptedServer([])
        let base = server.base
        try server.replaceRules([
            ["path": "/fhir/Patient?_count=2", "responses": [["status": 200, "body": searchBundle(["a", "b"], next: "\(base)/Patient?page=2&_count=2")]]],
            ["path": "/fhir/Patient?page=2&_count=2", "responses": [["status": 200, "body": searchBundle(["c", "d"], next: "\(base)/Patient?page=3&_count=2")]]],
            ["path": "/fhir/Patient?page=3&_count=2", "responses": [["status": 200, "body": searchBundle(["e"], next: nil)]]],
            ["path": "/fhir/Observation?_count=2", "responses": [["status": 200, "body": searchBundle([], next: "\(base)/Observation?page=2")]]],
            ["path": "/fhir/Observation?page=2", "responses": [["status": 200, "body": searchBundle([], next: "\(base)/Observation?_count=2")]]],
        ])
        let client = FHIRRESTClient(base: base, retry: fast)
        let found = try await client.search("Patient", [("_count", "2")])
        #expect(found.compactMap { $0.string("id") } == ["a", "b", "c", "d", "e"])
        do {
            _ = try await client.search("Observation", [("_count", "2")])
            Issue.record("no loop detected")
        } catch {
            guard case .pagingLoop = error else { Issue.record("\(error)"); return }
        }
    }

    @Test("conditional create sends If-None-Exist; update sends If-Match; transaction posts to the base")
    func writes() async throws {
        let outcome: [String: Any] = ["resourceType": "Bundle", "type": "transaction-response", "entry": [["response": ["status": "201 Created"]]]]
        let server = try ScriptedServer([
            ["path": "/fhir/Observation", "method": "POST", "responses": [["status": 201, "headers": ["Location": "Observation/o1/_history/1"], "body": ["resourceType": "Observation", "id": "o1", "status": "final", "code": ["text": "x"]]]]],
            ["path": "/fhir/Observation/o1", "method": "PUT", "responses": [["status": 412, "body": ["resourceType": "OperationOutcome", "issue": [["severity": "error", "code": "conflict", "diagnostics": "version conflict"]]]]]],
            ["path": "/fhir", "method": "POST", "responses": [["status": 200, "body": outcome]]],
        ])
        let client = FHIRRESTClient(base: server.base, retry: fast)
        var observation = Element(resourceType: "Observation")
        observation.append(Element(name: "status", type: "code", value: "final"))
        observation.append(Element(name: "code", type: "CodeableConcept", children: [Element(name: "text", type: "string", value: "x")]))
        let created = try await client.create(observation, ifNoneExist: "identifier=urn:caregate:outcome|abc")
        #expect(created.status == 201 && created.location == "Observation/o1/_history/1")
        let first = server.requests[0]
        #expect((first["headers"] as? [String: String])?["If-None-Exist"] == "identifier=urn:caregate:outcome|abc")
        #expect((first["body"] as? String)?.contains("\"resourceType\":\"Observation\"") == true)
        do {
            _ = try await client.update(observation, at: "Observation/o1", ifMatch: "3")
            Issue.record("no conflict")
        } catch {
            #expect(error.description == "PUT \(server.base)/Observation/o1: HTTP 412: error (conflict): version conflict")
        }
        #expect((server.requests[1]["headers"] as? [String: String])?["If-Match"] == "W/\"3\"")
        let response = try await client.transaction(Element(resourceType: "Bundle"))
        #expect(response.string("type") == "transaction-response")
    }
}


@Suite("The client stays on its server")
struct ClientOriginTests {
    @Test("next links to another port, another scheme, file: or gopher:, or outside the base path are refused, and no other server sees the token")
    func pagingStaysOnServer() async throws {
        let server = try ScriptedServer([])
        let elsewhere = try ScriptedServer([["path": "/fhir/Patient?page=2", "responses": [["status": 200, "body": searchBundle(["stolen"], next: nil)]]]])
        let base = server.base
        let hostile = [
            "\(elsewhere.base)/Patient?page=2",                                  // another port
            "https://127.0.0.1:\(server.port)/fhir/Patient?page=2",              // another scheme
            "file:///etc/passwd",
            "gopher://127.0.0.1:\(elsewhere.port)/_GET%20/fhir%20HTTP/1.0",
            "http://127.0.0.1:\(server.port)/admin/Patient?page=2",              // outside the base path
            "http://user:pw@127.0.0.1:\(server.port)/fhir/Patient?page=2",       // credentials in the link
        ]
        var rules: [[String: Any]] = hostile.enumerated().map { i, link in
            ["path": "/fhir/Patient?case=\(i)", "responses": [["status": 200, "body": searchBundle(["p\(i)"], next: link)]]]
        }
        // A relative next link is resolved against the page and followed.
        rules.append(["path": "/fhir/Patient?case=relative", "responses": [["status": 200, "body": searchBundle(["a"], next: "Patient?page=2&case=relative")]]])
        rules.append(["path": "/fhir/Patient?page=2&case=relative", "responses": [["status": 200, "body": searchBundle(["b"], next: nil)]]])
        try server.replaceRules(rules)
        let client = FHIRRESTClient(base: base, authentication: .bearer("s3cret-token"), retry: fast)
        for (i, link) in hostile.enumerated() {
            do {
                _ = try await client.search("Patient", [("case", "\(i)")])
                Issue.record("followed \(link)")
            } catch {
                guard case .outsideServer(let url, _) = error else { Issue.record("\(link): \(error)"); continue }
                #expect(url == link)
                #expect(!error.description.contains("s3cret"))
            }
        }
        #expect(elsewhere.requests.isEmpty, "the other server saw \(elsewhere.requests)")
        #expect(try await client.search("Patient", [("case", "relative")]).compactMap { $0.string("id") } == ["a", "b"])
        // Direct requests outside the base are refused the same way.
        await #expect(throws: FHIRClientError.self) { try await client.execute("GET", "\(elsewhere.base)/metadata") }
        #expect(elsewhere.requests.isEmpty)
    }

    @Test("an id from data is one percent-encoded path segment")
    func encodedIDs() async throws {
        let server = try ScriptedServer([["path": "/fhir/Patient/a%2F..%2Fadmin", "responses": [["status": 200, "body": patient("a/../admin")]]]])
        let client = FHIRRESTClient(base: server.base, retry: fast)
        #expect(try await client.read("Patient", "a/../admin").string("id") == "a/../admin")
        #expect(server.requests.first?["path"] as? String == "/fhir/Patient/a%2F..%2Fadmin")
    }
}

@Suite("Bearer tokens from secrets")
struct BearerSecretTests {
    func token(_ text: String) throws -> String {
        guard case .bearer(let token) = try Authentication.bearer(secret: text, source: "ehr.token") else { return "" }
        return token
    }

    @Test("the first line, trimmed, whatever the line ends (CRLF is one Character in Swift)")
    func firstLine() throws {
        #expect(try token("abc.def\r\nX-Injected: 1\r\n") == "abc.def")
        #expect(try token("abc.def\nX-Injected: 1") == "abc.def")
        #expect(try token("  abc.def  \r\n") == "abc.def")
        #expect(try token("abc.def") == "abc.def")
    }

    @Test("control characters, inner spaces and empty secrets are refused without showing the token")
    func refused() {
        for text in ["abc\u{1B}def", "abc def", "", "\r\nabc", "a\u{7F}b"] {
            #expect(throws: FHIRClientError.self) { try Authentication.bearer(secret: text, source: "ehr.token") }
            do { _ = try Authentication.bearer(secret: text, source: "ehr.token") } catch {
                #expect(error.description.contains("ehr.token") && (text.isEmpty || !error.description.contains(text)))
            }
        }
    }

    @Test("a CRLF token file sends one Authorization header and nothing more")
    func noHeaderInjection() async throws {
        let server = try ScriptedServer([["path": "/fhir/Patient/p1", "responses": [["status": 200, "body": patient("p1")]]]])
        let client = FHIRRESTClient(base: server.base, authentication: try Authentication.bearer(secret: "s3cret\r\nX-Injected: yes\r\n", source: "t"), retry: fast)
        _ = try await client.read("Patient", "p1")
        let headers = try #require(server.requests.first?["headers"] as? [String: String])
        #expect(headers["Authorization"] == "Bearer s3cret")
        #expect(headers["X-Injected"] == nil)
    }
}

@Suite("Bounded answers")
struct BoundedAnswerTests {
    @Test("a gzip bomb stops at the size limit after decompression, with a clear error and no retry")
    func decompressionBomb() async throws {
        var huge = patient("p1")
        huge["text"] = ["status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">" + String(repeating: "a", count: 2_000_000) + "</div>"]
        let server = try ScriptedServer([["path": "/fhir/Patient/p1", "responses": [["status": 200, "body": huge, "gzip": true]]]])
        let client = FHIRRESTClient(base: server.base, transport: CurlTransport(maximumResponseSize: 100_000), retry: fast)
        do {
            _ = try await client.read("Patient", "p1")
            Issue.record("read a 2 MB answer with a 100 kB limit")
        } catch {
            #expect(error.description.contains("larger than 100000 bytes once decompressed"), "\(error)")
            #expect(server.requests.count == 1, "not retried")
        }
        // Within the limit the same answer reads.
        let roomy = FHIRRESTClient(base: server.base, transport: CurlTransport(maximumResponseSize: 4_000_000), retry: fast)
        #expect(try await roomy.read("Patient", "p1").string("id") == "p1")
    }

    @Test("a search gathers at most maxResources, whatever the server pages")
    func boundedSearch() async throws {
        let server = try ScriptedServer([])
        try server.replaceRules([["path": "/fhir/Patient", "responses": [["status": 200, "body": searchBundle(["a", "b", "c"], next: "\(server.base)/Patient?page=2")]]],
                                 ["path": "/fhir/Patient?page=2", "responses": [["status": 200, "body": searchBundle(["d", "e"], next: nil)]]]])
        var client = FHIRRESTClient(base: server.base, retry: fast)
        client.maxResources = 4
        await #expect(throws: FHIRClientError.self) { try await client.search("Patient") }
        client.maxResources = 5
        #expect(try await client.search("Patient").count == 5)
    }
}
