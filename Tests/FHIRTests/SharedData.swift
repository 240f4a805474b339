import Foundation
import FHIR

/// Locates `../shared` (the read-only FHIR data beside the clone) and the project's own files.
enum SharedData {
    /// The project root (the folder holding Package.swift).
    static let projectRoot: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    /// `../shared`, or nil (with a visible notice) when it is not there.
    static let root: URL? = {
        let url = projectRoot.deletingLastPathComponent().appendingPathComponent("shared")
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("fhir-r4").path) { return url }
        return nil
    }()

    static var isAvailable: Bool { root != nil }

    /// Prints the skip notice tests show when ../shared is absent.
    static func skipNotice(_ test: String) {
        print("SKIPPED \(test): ../shared is not present beside the project; conformance data unavailable")
    }

    static func files(_ relative: String, suffix: String) -> [URL] {
        guard let root else { return [] }
        let dir = root.appendingPathComponent(relative)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir.path)) ?? []
        return names.filter { $0.hasSuffix(suffix) && !$0.hasPrefix("_") }.sorted().map { dir.appendingPathComponent($0) }
    }
}

/// A JSON value with numbers kept as their literal text, for comparing documents as JSON values
/// with decimals compared by lexical form.
indirect enum JSONValue: Equatable, CustomStringConvertible {
    case object([String: JSONValue])
    case array([JSONValue])
    case string(String)
    case number(String)
    case bool(Bool)
    case null

    static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        var p = Parser(bytes: bytes)
        let v = try p.value()
        p.ws()
        guard p.i == bytes.count else { throw p.fail("trailing content") }
        return v
    }

    var description: String {
        switch self {
        case .object(let o): "{" + o.keys.sorted().map { "\"\($0)\": \(o[$0]!)" }.joined(separator: ", ") + "}"
        case .array(let a): "[" + a.map(\.description).joined(separator: ", ") + "]"
        case .string(let s): "\"\(s)\""
        case .number(let n): n
        case .bool(let b): b ? "true" : "false"
        case .null: "null"
        }
    }

    /// The first difference between two values, as a path and a reason, or nil when equal.
    static func difference(_ a: JSONValue, _ b: JSONValue, path: String = "$") -> String? {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            for k in Set(x.keys).union(y.keys).sorted() {
                guard let xv = x[k] else { return "\(path).\(k): missing on the left" }
                guard let yv = y[k] else { return "\(path).\(k): missing on the right" }
                if let d = difference(xv, yv, path: "\(path).\(k)") { return d }
            }
            return nil
        case (.array(let x), .array(let y)):
            if x.count != y.count { return "\(path): \(x.count) items vs \(y.count)" }
            for (i, (xv, yv)) in zip(x, y).enumerated() {
                if let d = difference(xv, yv, path: "\(path)[\(i)]") { return d }
            }
            return nil
        default:
            return a == b ? nil : "\(path): \(a) vs \(b)"
        }
    }

    struct Parser {
        let bytes: [UInt8]
        var i = 0
        struct Failure: Error, CustomStringConvertible { var description: String }
        func fail(_ m: String) -> Failure { Failure(description: "JSON at \(i): \(m)") }
        mutating func ws() { while i < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[i]) { i += 1 } }
        mutating func value() throws -> JSONValue {
            ws()
            guard i < bytes.count else { throw fail("end") }
            switch bytes[i] {
            case 0x7B:
                i += 1; var o: [String: JSONValue] = [:]; ws()
                if bytes[i] == 0x7D { i += 1; return .object(o) }
                while true {
                    ws(); guard case .string(let k) = try value() else { throw fail("key") }
                    ws(); i += 1
                    o[k] = try value(); ws()
                    let c = bytes[i]; i += 1
                    if c == 0x7D { return .object(o) }
                }
            case 0x5B:
                i += 1; var a: [JSONValue] = []; ws()
                if bytes[i] == 0x5D { i += 1; return .array(a) }
                while true {
                    a.append(try value()); ws()
                    let c = bytes[i]; i += 1
                    if c == 0x5D { return .array(a) }
                }
            case 0x22:
                let start = i
                i += 1
                while bytes[i] != 0x22 { if bytes[i] == 0x5C { i += 1 }; i += 1 }
                i += 1
                let s = try JSONSerialization.jsonObject(with: Data(bytes[start..<i]), options: [.fragmentsAllowed]) as! String
                return .string(s)
            case 0x74: i += 4; return .bool(true)
            case 0x66: i += 5; return .bool(false)
            case 0x6E: i += 4; return .null
            default:
                let start = i
                while i < bytes.count, "-+.eE0123456789".utf8.contains(bytes[i]) { i += 1 }
                return .number(String(decoding: bytes[start..<i], as: UTF8.self))
            }
        }
    }
}
