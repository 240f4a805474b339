// CareGateRemote: the CareKit side of `caregate serve`'s sync API, for an iOS app (CareKit 3.x
// or 4.0, CareKitStore's OCKRemoteSynchronizable). Copy this file into the app; it needs only
// CareKitStore and Foundation. It is not built on Linux (CareKit is Apple-only); the gateway's
// tests parse it and exercise the same wire format over HTTP.
//
//     let remote = CareGateRemote(server: URL(string: "https://caregate.example.org")!, token: savedToken)
//     let store = OCKStore(name: "care", type: .onDisk(), remote: remote)
//     remote.store = store          // lets the remote keep duplicate outcomes out (see pullRevisions)
//     store.synchronize { error in … }
//
// Enrolment: `CareGateRemote.enroll(server:code:)` exchanges the code `caregate enroll` printed for
// a device token; keep it in the Keychain.

import CareKitStore
import Foundation

public final class CareGateRemote: OCKRemoteSynchronizable {
    public weak var delegate: OCKRemoteSynchronizationDelegate?
    /// CareKit syncs after every change; the gateway answers an up-to-date device at once.
    public var automaticallySynchronizes = true
    /// The store this remote serves, to look up outcomes already recorded on this device.
    public weak var store: OCKStore?

    let server: URL
    let token: String
    let session: URLSession

    public init(server: URL, token: String, session: URLSession = .shared) {
        self.server = server
        self.token = token
        self.session = session
    }

    public struct GatewayError: LocalizedError {
        public let status: Int
        public let message: String
        public var errorDescription: String? { "CareGate answered \(status): \(message)" }
    }

    /// Exchanges a one-time enrolment code for this device's token.
    public static func enroll(server: URL, code: String, session: URLSession = .shared) async throws -> String {
        var request = URLRequest(url: server.appendingPathComponent("carekit/v1/enroll"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONEncoder().encode(["code": code])
        let (data, response) = try await session.data(for: request)
        try check(response, data)
        struct Enrolled: Decodable { let token: String }
        return try JSONDecoder().decode(Enrolled.self, from: data).token
    }

    // MARK: Pull

    /// Fetches every page first, then merges: a sync cut off between pages merges nothing, and
    /// the next one starts again from the same vector.
    public func pullRevisions(since knowledgeVector: OCKRevisionRecord.KnowledgeVector,
                              mergeRevision: @escaping (OCKRevisionRecord) -> Void,
                              completion: @escaping (Error?) -> Void) {
        Task {
            do {
                let since = try JSONEncoder().encode(knowledgeVector).base64URLEncodedString()
                var next: URL? = URL(string: "carekit/v1/revisions?since=\(since)", relativeTo: server)
                var records: [OCKRevisionRecord] = []
                var catchUp: OCKRevisionRecord.KnowledgeVector?
                while let url = next {
                    let (data, response) = try await session.data(for: authorized(URLRequest(url: url)))
                    try Self.check(response, data)
                    let page = try JSONDecoder().decode(PullPage.self, from: data)
                    records += page.revisions
                    catchUp = page.knowledgeVector
                    next = Self.nextLink(response).flatMap { URL(string: $0, relativeTo: server) }
                }
                for record in records { mergeRevision(try await withoutDuplicateOutcomes(record)) }
                if let catchUp { mergeRevision(OCKRevisionRecord(entities: [], knowledgeVector: catchUp)) }
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    struct PullPage: Decodable {
        let revisions: [OCKRevisionRecord]
        let knowledgeVector: OCKRevisionRecord.KnowledgeVector?
    }

    /// Leaves out outcomes for occurrences this device has already recorded with an outcome the
    /// incoming one does not supersede: CareKit cannot insert a second live outcome for one
    /// occurrence. This device's own outcome is pushed next, and the gateway settles the pair
    /// (the first recorded wins) with a version that replaces both, which the next pull brings.
    func withoutDuplicateOutcomes(_ record: OCKRevisionRecord) async throws -> OCKRevisionRecord {
        let incoming = record.entities.compactMap { entity -> OCKOutcome? in
            if case .outcome(let outcome) = entity { return outcome } else { return nil }
        }
        guard let store, !incoming.isEmpty else { return record }
        var query = OCKOutcomeQuery()
        query.taskUUIDs = Array(Set(incoming.map(\.taskUUID)))
        let local: [OCKOutcome] = try await withCheckedThrowingContinuation { continuation in
            store.fetchOutcomes(query: query, callbackQueue: .global()) { continuation.resume(with: $0) }
        }
        let recorded = Dictionary(local.map { ("\($0.taskUUID)#\($0.taskOccurrenceIndex)", $0.uuid) }, uniquingKeysWith: { a, _ in a })
        let kept = record.entities.filter { entity in
            guard case .outcome(let outcome) = entity,
                  let mine = recorded["\(outcome.taskUUID)#\(outcome.taskOccurrenceIndex)"] else { return true }
            return mine == outcome.uuid || outcome.previousVersionUUIDs.contains(mine)
        }
        return OCKRevisionRecord(entities: kept, knowledgeVector: record.knowledgeVector)
    }

    // MARK: Push

    public func pushRevisions(deviceRevisions: [OCKRevisionRecord],
                              deviceKnowledge: OCKRevisionRecord.KnowledgeVector,
                              completion: @escaping (Error?) -> Void) {
        Task {
            do {
                struct Push: Encodable {
                    let revisions: [OCKRevisionRecord]
                    let knowledgeVector: OCKRevisionRecord.KnowledgeVector
                }
                var request = authorized(URLRequest(url: server.appendingPathComponent("carekit/v1/revisions")))
                request.httpMethod = "POST"
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = try JSONEncoder().encode(Push(revisions: deviceRevisions, knowledgeVector: deviceKnowledge))
                let (data, response) = try await session.data(for: request)
                // 409: the gateway knows more; CareKit pulls again at its next sync.
                try Self.check(response, data)
                completion(nil)
            } catch {
                completion(error)
            }
        }
    }

    /// The device keeps the version it holds that was written last; the gateway only keeps
    /// conflicting versions side by side, as CareKit does.
    public func chooseConflictResolution(conflicts: [OCKEntity], completion: @escaping OCKResultClosure<OCKEntity>) {
        guard let newest = conflicts.max(by: { ($0.value.updatedDate ?? .distantPast) < ($1.value.updatedDate ?? .distantPast) }) else {
            completion(.failure(.remoteSynchronizationFailed(reason: "no versions to choose from")))
            return
        }
        completion(.success(newest))
    }

    // MARK: HTTP

    func authorized(_ request: URLRequest) -> URLRequest {
        var request = request
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        return request
    }

    static func check(_ response: URLResponse, _ data: Data) throws {
        guard let http = response as? HTTPURLResponse else { return }
        guard (200..<300).contains(http.statusCode) else {
            struct Failure: Decodable { struct Detail: Decodable { let message: String }; let error: Detail }
            let message = (try? JSONDecoder().decode(Failure.self, from: data).error.message) ?? HTTPURLResponse.localizedString(forStatusCode: http.statusCode)
            throw GatewayError(status: http.statusCode, message: message)
        }
    }

    /// The URL of `Link: <…>; rel="next"`, if any.
    static func nextLink(_ response: URLResponse) -> String? {
        guard let link = (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Link"), link.contains("rel=\"next\""),
              let start = link.firstIndex(of: "<"), let end = link.firstIndex(of: ">"), start < end else { return nil }
        return String(link[link.index(after: start)..<end])
    }
}

private extension OCKEntity {
    /// The entity's versioned value, for its dates.
    var value: any OCKVersionedObjectCompatible {
        switch self {
        case .patient(let patient): return patient
        case .carePlan(let plan): return plan
        case .contact(let contact): return contact
        case .task(let task): return task
        case .healthKitTask(let task): return task
        case .outcome(let outcome): return outcome
        }
    }
}

private extension Data {
    func base64URLEncodedString() -> String {
        base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
