internal import CLibCurl
import Foundation

/// One HTTP request.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    public var method: String
    /// The absolute URL.
    public var url: String
    /// Header fields in order (names as sent).
    public var headers: [(String, String)]
    /// The body, if any.
    public var body: [UInt8]?
    /// The whole exchange, connection included, must finish within this many seconds.
    public var timeout: TimeInterval

    /// A request.
    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8]? = nil, timeout: TimeInterval = 60) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
    }

    /// The first header field with this name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }
}

/// One HTTP response: status, header fields (names lowercased) and the (decompressed) body.
public struct HTTPResponse: Sendable {
    /// The HTTP status.
    public var status: Int
    /// The headers, names in lower case.
    public var headers: [String: String]
    /// The body, decompressed.
    public var body: [UInt8]

    /// An answer.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why no response arrived.
public enum TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The connection failed or broke (libcurl's code and message).
    case network(code: Int32, message: String, url: String)
    /// No answer within the request's timeout.
    case timedOut(url: String)
    /// The answer (decompressed) passed the transport's size limit; reading stopped there.
    case tooLarge(url: String, limit: Int)
    /// The answer decompressed to far more than was sent (a gzip bomb); reading stopped there.
    case decompressionBomb(url: String, received: Int, decompressed: Int)
    /// A download's file could not be made or written.
    case file(path: String, message: String)

    /// The failure without its URL or path (`FHIRClientError.kind`).
    public var kind: String {
        switch self {
        case .network(let code, _, _): "a network failure (libcurl error \(code))"
        case .timedOut: "no answer in time"
        case .tooLarge(_, let limit): "an answer over \(limit) bytes"
        case .decompressionBomb: "an answer that decompressed to far more than was sent"
        case .file: "a download that could not be written"
        }
    }

    public var description: String {
        switch self {
        case .network(let code, let message, let url): "\(url): \(message) (libcurl error \(code))"
        case .timedOut(let url): "\(url): no answer in time (or too slow an answer)"
        case .tooLarge(let url, let limit): "\(url): the answer is larger than \(limit) bytes once decompressed; not read further (see --max-response-size)"
        case .decompressionBomb(let url, let received, let decompressed):
            "\(url): \(received) bytes sent decompressed to more than \(decompressed) (a compression bomb); not read further"
        case .file(let path, let message): "\(path): \(message)"
        }
    }

    /// Whether trying again may help: not for a certificate that does not verify, a bad CA bundle
    /// or client certificate, or a URL libcurl cannot use; yes for connections refused, reset or
    /// cut, and for timeouts.
    public var isTransient: Bool {
        if case .tooLarge = self { return false }
        if case .decompressionBomb = self { return false }
        if case .file = self { return false }
        guard case .network(let code, _, _) = self else { return true }
        // 1 unsupported protocol, 3 malformed URL, 58 client certificate, 59 cipher, 60 peer
        // verification, 77 CA bundle, 80 TLS shutdown, 83 issuer, 90 pinned key, 91 certificate status.
        return ![1, 3, 58, 59, 60, 77, 83, 90, 91].contains(code)
    }
}

/// Sends HTTP requests: libcurl in production, other transports in tests.
public protocol HTTPTransport: Sendable {
    /// Sends the request and waits for the whole answer.
    func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse
    /// Sends the request and writes a 2xx answer's (decompressed) body to the file at `path`
    /// (made or emptied) as it arrives, at most `limit` bytes; the response's body is empty.
    /// Another status's body comes back in the response instead (an OperationOutcome).
    func download(_ request: HTTPRequest, to path: String, limit: Int) async throws(TransportError) -> HTTPResponse
}

extension HTTPTransport {
    /// For transports that hold answers in memory anyway: the answer, then the file.
    public func download(_ request: HTTPRequest, to path: String, limit: Int) async throws(TransportError) -> HTTPResponse {
        var response = try await send(request)
        guard (200...299).contains(response.status) else { return response }
        guard response.body.count <= limit else { throw .tooLarge(url: request.url, limit: limit) }
        guard FileManager.default.createFile(atPath: path, contents: Data(response.body)) else {
            throw .file(path: path, message: String(cString: strerror(errno)))
        }
        response.body = []
        return response
    }
}

/// TLS settings: verification is on unless turned off; a CA bundle, and a client certificate
/// and key for mutual TLS, can be given as PEM files.
public struct TLSOptions: Sendable, Equatable {
    /// Whether the server's certificate is checked (false for testing only).
    public var verify = true
    /// A PEM file of CAs to trust instead of the system's.
    public var caBundle: String?
    /// A PEM client certificate, for mutual TLS.
    public var clientCertificate: String?
    /// Its PEM private key.
    public var clientKey: String?

    /// TLS options; the defaults verify against the system's CAs.
    public init(verify: Bool = true, caBundle: String? = nil, clientCertificate: String? = nil, clientKey: String? = nil) {
        self.verify = verify
        self.caBundle = caBundle
        self.clientCertificate = clientCertificate
        self.clientKey = clientKey
    }
}

/// HTTP through libcurl: one easy handle per transport, reused so that connections are kept
/// alive between requests, on its own serial queue (requests from many tasks wait their turn);
/// gzip and deflate answers are decompressed; proxies come from the environment (`https_proxy`,
/// `no_proxy`), as libcurl reads them.
public final class CurlTransport: HTTPTransport, @unchecked Sendable {
    private let queue = DispatchQueue(label: "caregate.curl")
    private let handle: UnsafeMutableRawPointer
    /// Certificates to trust and to present.
    public let tls: TLSOptions
    /// Seconds to connect.
    public let connectTimeout: TimeInterval
    /// The `User-Agent` header.
    public let userAgent: String
    /// The largest answer read, after decompression: a gzip bomb stops here, not in memory.
    public let maximumResponseSize: Int
    /// An answer slower than `bytesPerSecond` for `seconds` is given up (a server trickling bytes).
    public let lowSpeed: (bytesPerSecond: Int, seconds: Int)

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// A transport; answers larger than `maximumResponseSize` once decompressed are refused.
    public init(tls: TLSOptions = TLSOptions(), connectTimeout: TimeInterval = 10, userAgent: String = "CareGate/0.1",
                maximumResponseSize: Int = CurlTransport.defaultMaximumResponseSize, lowSpeed: (bytesPerSecond: Int, seconds: Int) = (1, 30)) {
        _ = CurlTransport.globalInit
        handle = curl_easy_init()!
        self.tls = tls
        self.connectTimeout = connectTimeout
        self.userAgent = userAgent
        self.maximumResponseSize = maximumResponseSize
        self.lowSpeed = lowSpeed
    }

    /// 256 MiB: far more than any FHIR page, far less than the machine.
    public static let defaultMaximumResponseSize = 256 << 20

    deinit { curl_easy_cleanup(handle) }

    /// Sends the request on a libcurl easy handle of its own, off Swift's cooperative threads.
    public func send(_ request: HTTPRequest) async throws(TransportError) -> HTTPResponse {
        let result: Result<HTTPResponse, TransportError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: self.perform(request, collector: Collector(limit: self.maximumResponseSize))) }
        }
        return try result.get()
    }

    /// Streams a 2xx body to the file (Bulk Data's NDJSON files: gigabytes, never held).
    public func download(_ request: HTTPRequest, to path: String, limit: Int) async throws(TransportError) -> HTTPResponse {
        let result: Result<HTTPResponse, TransportError> = await withCheckedContinuation { continuation in
            queue.async {
                let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else { return continuation.resume(returning: .failure(.file(path: path, message: String(cString: strerror(errno))))) }
                let collector = Collector(limit: limit)
                collector.file = (fd, path)
                var result = self.perform(request, collector: collector)
                if close(fd) != 0, case .success = result { result = .failure(.file(path: path, message: String(cString: strerror(errno)))) }
                continuation.resume(returning: result)
            }
        }
        return try result.get()
    }

    /// Collects what libcurl hands back: in memory, or a 2xx body into a file.
    final class Collector {
        /// Past this many decompressed bytes, an answer that decompressed to more than `bombRatio`
        /// times what was sent is a compression bomb: stopped there, long before the size limit
        /// (FHIR JSON compresses some 10 to 30 times; a gzip bomb, a thousand).
        static let bombFloor = 8 << 20
        static let bombRatio = 200
        /// The transfer's handle, to read how many bytes came over the wire.
        var handle: UnsafeMutableRawPointer?
        /// A compression bomb was found: libcurl was told to stop.
        var bomb: (received: Int, decompressed: Int)?
        var body: [UInt8] = []
        var headers: [String: String] = [:]
        var status = 0
        let limit: Int
        /// The body passed `limit`: libcurl was told to stop.
        var exceeded = false
        /// Where a download's 2xx body goes, and how much of it was written.
        var file: (fd: Int32, path: String)?
        var written = 0
        /// A write to the file failed (errno's text): libcurl was told to stop.
        var fileError: String?

        init(limit: Int) {
            self.limit = limit
        }

        /// Takes one piece of the body; false stops the transfer.
        func take(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            let delivered = written + body.count + bytes.count
            guard delivered <= limit else {
                exceeded = true
                return false
            }
            if delivered > Self.bombFloor, let handle {
                var received: curl_off_t = 0
                _ = caregate_curl_getinfo_off_t(handle, CURLINFO_SIZE_DOWNLOAD_T, &received)
                if delivered / Self.bombRatio > Int(received) {
                    bomb = (Int(received), delivered)
                    return false
                }
            }
            guard let file, (200...299).contains(status) else {
                body.append(contentsOf: bytes)
                return true
            }
            var offset = 0
            while offset < bytes.count {
                let n = write(file.fd, bytes.baseAddress! + offset, bytes.count - offset)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    fileError = String(cString: strerror(errno))
                    return false
                }
                offset += n
            }
            written += bytes.count
            return true
        }
    }

    private func perform(_ request: HTTPRequest, collector: Collector) -> Result<HTTPResponse, TransportError> {
        let h = handle
        curl_easy_reset(h)
        collector.handle = h
        let context = Unmanaged.passUnretained(collector).toOpaque()
        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for (name, value) in request.headers { list = curl_slist_append(list, "\(name): \(value)") }
        // libcurl adds "Expect: 100-continue" to larger bodies; FHIR servers do not need the round trip.
        list = curl_slist_append(list, "Expect:")
        _ = caregate_curl_setopt_string(h, CURLOPT_URL, request.url)
        _ = caregate_curl_setopt_slist(h, CURLOPT_HTTPHEADER, list)
        _ = caregate_curl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        _ = caregate_curl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0)
        // http and https only, for requests and any redirect: never file:, gopher: or the rest.
        _ = caregate_curl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = caregate_curl_setopt_string(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        _ = caregate_curl_setopt_string(h, CURLOPT_ACCEPT_ENCODING, "")
        _ = caregate_curl_setopt_string(h, CURLOPT_USERAGENT, userAgent)
        _ = caregate_curl_setopt_long(h, CURLOPT_TIMEOUT_MS, Int(request.timeout * 1000))
        _ = caregate_curl_setopt_long(h, CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout * 1000))
        _ = caregate_curl_setopt_long(h, CURLOPT_LOW_SPEED_LIMIT, lowSpeed.bytesPerSecond)
        _ = caregate_curl_setopt_long(h, CURLOPT_LOW_SPEED_TIME, lowSpeed.seconds)
        _ = caregate_curl_setopt_long(h, CURLOPT_SSL_VERIFYPEER, tls.verify ? 1 : 0)
        _ = caregate_curl_setopt_long(h, CURLOPT_SSL_VERIFYHOST, tls.verify ? 2 : 0)
        if let ca = tls.caBundle { _ = caregate_curl_setopt_string(h, CURLOPT_CAINFO, ca) }
        if let cert = tls.clientCertificate { _ = caregate_curl_setopt_string(h, CURLOPT_SSLCERT, cert) }
        if let key = tls.clientKey { _ = caregate_curl_setopt_string(h, CURLOPT_SSLKEY, key) }
        _ = caregate_curl_setopt_callback(h, CURLOPT_WRITEFUNCTION) { data, size, count, context in
            let n = size * count
            guard let data, let context else { return n }
            let collector = Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue()
            // 0 makes libcurl stop with a write error.
            return data.withMemoryRebound(to: UInt8.self, capacity: n) { collector.take(UnsafeBufferPointer(start: $0, count: n)) } ? n : 0
        }
        _ = caregate_curl_setopt_pointer(h, CURLOPT_WRITEDATA, context)
        _ = caregate_curl_setopt_callback(h, CURLOPT_HEADERFUNCTION) { data, size, count, context in
            let n = size * count
            guard let data, let context else { return n }
            let collector = Unmanaged<Collector>.fromOpaque(context).takeUnretainedValue()
            let line = data.withMemoryRebound(to: UInt8.self, capacity: n) { String(decoding: UnsafeBufferPointer(start: $0, count: n), as: UTF8.self) }
            if line.hasPrefix("HTTP/") {
                collector.headers = [:]  // a new response (after a 100 Continue or a redirect)
                collector.status = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
                collector.headers[name] = collector.headers[name].map { "\($0), \(value)" } ?? value
            }
            return n
        }
        _ = caregate_curl_setopt_pointer(h, CURLOPT_HEADERDATA, context)
        // libcurl's own words for a failure ("SSL certificate problem: unable to get local issuer
        // certificate"), which say more than the code's generic text.
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        _ = caregate_curl_setopt_pointer(h, CURLOPT_ERRORBUFFER, errorBuffer)
        let method = request.method.uppercased()
        let code: CURLcode
        if let body = request.body {
            _ = caregate_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, method)
            _ = caregate_curl_setopt_long(h, CURLOPT_POSTFIELDSIZE, body.count)
            code = body.withUnsafeBytes { raw in
                _ = caregate_curl_setopt_pointer(h, CURLOPT_POSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                return curl_easy_perform(h)
            }
        } else {
            if method == "HEAD" { _ = caregate_curl_setopt_long(h, CURLOPT_NOBODY, 1) }
            else if method != "GET" { _ = caregate_curl_setopt_string(h, CURLOPT_CUSTOMREQUEST, method) }
            code = curl_easy_perform(h)
        }
        guard code == CURLE_OK else {
            if collector.exceeded { return .failure(.tooLarge(url: request.url, limit: collector.limit)) }
            if let bomb = collector.bomb { return .failure(.decompressionBomb(url: request.url, received: bomb.received, decompressed: bomb.decompressed)) }
            if let message = collector.fileError, let file = collector.file { return .failure(.file(path: file.path, message: message)) }
            if code == CURLE_OPERATION_TIMEDOUT { return .failure(.timedOut(url: request.url)) }
            let detail = String(cString: errorBuffer)
            return .failure(.network(code: Int32(code.rawValue), message: detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail, url: request.url))
        }
        var status = 0
        _ = caregate_curl_getinfo_long(h, CURLINFO_RESPONSE_CODE, &status)
        return .success(HTTPResponse(status: status, headers: collector.headers, body: collector.body))
    }
}
