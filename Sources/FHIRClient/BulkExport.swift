import FHIR
import Foundation
import JSON

/// What a FHIR Bulk Data export asks the server for: every resource, the Patient compartments of
/// every patient, or those of a Group's members; optionally only resources changed since an
/// instant, and only some types. Files always come as NDJSON.
public struct BulkExportRequest: Sendable, Hashable {
    /// Whose data: the whole server, every patient, or a Group's members.
    public enum Level: Sendable, Hashable {
        /// `$export` of the whole server.
        case system
        /// `Patient/$export`: every patient's compartment.
        case patients
        /// `Group/<id>/$export`: the members' compartments.
        case group(String)
    }

    /// Whose data is exported.
    public var level: Level
    /// `_since`: resources changed after this FHIR instant.
    public var since: String?
    /// `_type`: only these resource types (all when empty).
    public var types: [String]

    /// A request; `since` is an instant (`_since`), `types` narrows to these resource types.
    public init(level: Level, since: String? = nil, types: [String] = []) {
        self.level = level
        self.since = since
        self.types = types
    }

    /// The kick-off path under the base: `$export`, `Patient/$export`, `Group/{id}/$export`.
    var path: String {
        switch level {
        case .system: "$export"
        case .patients: "Patient/$export"
        case .group(let id): "Group/\(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-."))) ?? id)/$export"
        }
    }

    var parameters: [(String, String)] {
        var parameters = [("_outputFormat", "application/fhir+ndjson")]
        if let since { parameters.append(("_since", since)) }
        if !types.isEmpty { parameters.append(("_type", types.joined(separator: ","))) }
        return parameters
    }
}

/// A completed export's manifest: when the server took its snapshot, whether the files need the
/// access token, and the NDJSON files (resources, and OperationOutcomes for what failed).
public struct BulkManifest: Sendable, Equatable {
    /// One file of the manifest.
    public struct File: Sendable, Equatable {
        /// The resource type the file holds.
        public var type: String
        /// Where to download it.
        public var url: String
        /// How many resources it holds, when the server says.
        public var count: Int?

        /// A file entry.
        public init(type: String, url: String, count: Int? = nil) {
            self.type = type
            self.url = url
            self.count = count
        }
    }

    /// The instant the export reflects: the `_since` of the next incremental export.
    public var transactionTime: String
    /// Whether the files need the access token (only then is it sent, and only to the same server).
    public var requiresAccessToken: Bool
    /// The files of resources.
    public var output: [File]
    /// The files of OperationOutcomes the server reports.
    public var error: [File]
    /// The manifest as the server sent it (kept so that an interrupted import resumes).
    public var bytes: [UInt8]

    /// Reads a manifest; `url` names where it came from in errors.
    public static func read(_ bytes: [UInt8], url: String) throws(FHIRClientError) -> BulkManifest {
        func invalid(_ reason: String) -> FHIRClientError { .invalidResponse(url: url, reason: "the export's manifest \(reason)") }
        guard let json = try? JSONValue.parse(bytes), case .object = json else { throw invalid("is not a JSON object") }
        guard let time = json["transactionTime"]?.stringValue else { throw invalid("has no transactionTime") }
        func files(_ key: String) throws(FHIRClientError) -> [File] {
            guard let list = json[key] else { return [] }
            guard let items = list.arrayValue else { throw invalid("has an \(key) that is not an array") }
            var files: [File] = []
            for (i, item) in items.enumerated() {
                guard let type = item["type"]?.stringValue, let url = item["url"]?.stringValue else {
                    throw invalid("has an \(key)[\(i)] without type or url")
                }
                files.append(File(type: type, url: url, count: item["count"]?.numberValue.flatMap { $0 >= 0 && $0 < 1e15 ? Int($0) : nil }))
            }
            return files
        }
        return BulkManifest(transactionTime: time, requiresAccessToken: json["requiresAccessToken"]?.boolValue ?? true,
                            output: try files("output"), error: try files("error"), bytes: bytes)
    }
}

/// The FHIR Bulk Data client: kicks off an export (`Prefer: respond-async`), polls its status
/// (honouring `Retry-After`, passing on `X-Progress`), reads the manifest, downloads each file to
/// disk as it arrives (gzip decoded by libcurl), and deletes the job. Authentication, TLS and
/// retries are the REST client's.
///
/// ```swift
/// let bulk = BulkDataClient(client: FHIRRESTClient(base: "https://ehr.example.org/fhir"))
/// let status = try await bulk.kickOff(BulkExportRequest(level: .group("diabetes-cohort")))
/// let manifest = try await bulk.manifest(status) { print("export: \($0)") }
/// for file in manifest.output { _ = try await bulk.download(file, of: manifest, to: "/tmp/\(file.type).ndjson") }
/// try await bulk.delete(status)
/// ```
public struct BulkDataClient: Sendable {
    /// The client the export's requests go through.
    public let client: FHIRRESTClient
    /// The wait between polls when the server gives no `Retry-After`, and the longest wait taken.
    public var pollInterval: (default: TimeInterval, maximum: TimeInterval) = (2, 120)
    /// Polling gives up after this long.
    public var maximumWait: TimeInterval = 24 * 3600
    /// The largest file downloaded (after decompression).
    public var maximumFileSize = 64 << 30

    /// Bulk Data requests through `client`.
    public init(client: FHIRRESTClient) {
        self.client = client
    }

    /// The URL an export is started at.
    public func kickOffURL(_ request: BulkExportRequest) -> String { client.searchURL(request.path, request.parameters) }

    /// Starts an export; returns its status URL (from `Content-Location`).
    public func kickOff(_ request: BulkExportRequest) async throws(FHIRClientError) -> String {
        let url = kickOffURL(request)
        let answer = try await client.execute("GET", url, headers: [("Prefer", "respond-async")])
        guard answer.status == 202 else {
            throw .invalidResponse(url: url, reason: "the export was not started asynchronously (HTTP \(answer.status), expected 202)")
        }
        guard let location = answer.headers["content-location"] else {
            throw .invalidResponse(url: url, reason: "the export's answer has no Content-Location (its status URL)")
        }
        return try client.onServer(location, relativeTo: url)
    }

    /// Polls the status URL until the export is done; `progress` gets each `X-Progress` (or
    /// "in progress"). Throws the server's OperationOutcome when the export failed.
    public func manifest(_ statusURL: String, progress: (@Sendable (String) -> Void)? = nil) async throws(FHIRClientError) -> BulkManifest {
        let started = Date()
        var polls = 0
        while true {
            let answer = try await client.execute("GET", statusURL)
            if answer.status == 200 { return try BulkManifest.read(answer.body, url: statusURL) }
            guard answer.status == 202 else {
                throw .invalidResponse(url: statusURL, reason: "the export's status is HTTP \(answer.status) (expected 202 or 200)")
            }
            polls += 1
            progress?(answer.headers["x-progress"] ?? "in progress")
            let wait = min(pollInterval.maximum, answer.headers["retry-after"].flatMap { FHIRRESTClient.retryAfterSeconds($0) }
                           ?? pollInterval.default * pow(1.5, Double(min(polls, 10))))
            guard Date().timeIntervalSince(started) + wait <= maximumWait else {
                throw .gaveUp(attempts: polls, last: "the export at \(statusURL) was not done after \(Int(maximumWait)) seconds")
            }
            try? await Task.sleep(nanoseconds: UInt64(wait * 1_000_000_000))
            if Task.isCancelled { throw .gaveUp(attempts: polls, last: "cancelled while waiting for \(statusURL)") }
        }
    }

    /// Downloads one of the manifest's files to `path`, streaming; returns its size in bytes.
    /// The access token goes with it only when the manifest asks for it, and then only to this
    /// server.
    public func download(_ file: BulkManifest.File, of manifest: BulkManifest, to path: String) async throws(FHIRClientError) -> Int {
        _ = try await client.download(file.url, to: path, limit: maximumFileSize, authenticated: manifest.requiresAccessToken,
                                      headers: [("Accept", "application/fhir+ndjson")])
        return FileBytes.size(path) ?? 0
    }

    /// Deletes the job on the server (its files go with it).
    public func delete(_ statusURL: String) async throws(FHIRClientError) {
        _ = try await client.execute("DELETE", statusURL)
    }
}
