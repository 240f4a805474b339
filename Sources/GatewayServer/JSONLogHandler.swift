import Foundation
import JSON
import Hummingbird
import Logging

/// swift-log's handler for the server: one JSON object per line on standard error
/// (`{"time", "level", "label", "message", …metadata}`), so log collectors need no parsing rules.
/// Callers log ids and counts, never names, values or tokens.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    let label: String

    public init(label: String) {
        self.label = label
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields: [(String, JSONValue)] = [
            ("time", .string(Self.timestamp(Date()))),
            ("level", .string(event.level.rawValue)),
            ("label", .string(label)),
            ("message", .string(event.message.description)),
        ]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }).sorted(by: { $0.key < $1.key }) {
            fields.append((key, .string(value.description)))
        }
        var line = JSONValue.object(fields).serialized()
        line += "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// UTC, to the millisecond: `2026-11-25T02:30:00.123Z`. Written by hand: a formatter made
    /// for each line cost more than the rest of a `/healthz` request.
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1_000).rounded(.down))
        var seconds = time_t(milliseconds / 1_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ count: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, count - text.count)) + text
        }
        return "\(digits(parts.tm_year + 1900, 4))-\(digits(parts.tm_mon + 1, 2))-\(digits(parts.tm_mday, 2))T"
            + "\(digits(parts.tm_hour, 2)):\(digits(parts.tm_min, 2)):\(digits(parts.tm_sec, 2)).\(digits(Int32(milliseconds % 1_000), 3))Z"
    }
}

/// One log line per request, after its answer: method, route pattern, status and milliseconds,
/// with Hummingbird's request id. The route is the pattern matched (`/fhir/notify/{type}/{id}`),
/// never the path or query sent: those carry resource ids and knowledge vectors.
struct RouteLogMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        func log(_ status: Int) {
            let elapsed = ContinuousClock.now - started
            let milliseconds = Double(elapsed.components.seconds) * 1_000 + Double(elapsed.components.attoseconds) / 1e15
            context.logger.info("request", metadata: ["method": "\(request.method.rawValue)", "route": "\(context.endpointPath ?? "NotFound")",
                                                      "status": "\(status)", "ms": "\(Int(milliseconds.rounded()))"])
        }
        do {
            let response = try await next(request, context)
            log(response.status.code)
            return response
        } catch let error as any HTTPResponseError {
            log(error.status.code)
            throw error
        } catch {
            log(500)
            throw error
        }
    }
}
