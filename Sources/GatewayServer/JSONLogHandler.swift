import Foundation
import JSON
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
            ("time", .string(ISO8601DateFormatter().string(from: Date()))),
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
}
