/// The regular files of a tar archive (POSIX ustar, with pax and GNU long names), as FHIR's
/// package tool and npm write them.
public struct TarArchive: Sendable {
    /// One regular file: its path inside the archive and its bytes.
    public struct File: Sendable {
        public let path: String
        public let bytes: [UInt8]
    }

    /// Why an archive could not be read, with the byte offset of the header at fault.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let offset: Int
        public let message: String
        public var description: String { "at byte \(offset): \(message)" }
    }

    /// The archive's regular files, in archive order.
    public let files: [File]

    /// Reads every header; directories, links and other entries are skipped.
    public init(_ bytes: [UInt8]) throws(Failure) {
        var files: [File] = []
        var offset = 0
        var longName: String?
        while offset + 512 <= bytes.count {
            let header = bytes[offset..<(offset + 512)]
            if header.allSatisfy({ $0 == 0 }) { break }
            guard let size = Self.octal(header, at: 124, length: 12) else {
                throw Failure(offset: offset, message: "a tar header whose size is not an octal number (not a tar file?)")
            }
            let start = offset + 512
            guard start + size <= bytes.count else {
                throw Failure(offset: offset, message: "an entry of \(size) bytes runs past the end of the archive (truncated?)")
            }
            let body = Array(bytes[start..<(start + size)])
            switch header[header.startIndex + 156] {
            case UInt8(ascii: "0"), 0:
                let path = longName ?? Self.name(header)
                files.append(File(path: path, bytes: body))
                longName = nil
            case UInt8(ascii: "L"):
                longName = Self.string(body[...])
            case UInt8(ascii: "x"):
                longName = Self.paxPath(body) ?? longName
            default:
                longName = nil
            }
            offset = start + (size + 511) / 512 * 512
        }
        self.files = files
    }

    /// `prefix/name` from a ustar header.
    private static func name(_ header: ArraySlice<UInt8>) -> String {
        let name = string(header[(header.startIndex)..<(header.startIndex + 100)])
        let isUstar = header[(header.startIndex + 257)..<(header.startIndex + 262)].elementsEqual("ustar".utf8)
        let prefix = isUstar ? string(header[(header.startIndex + 345)..<(header.startIndex + 500)]) : ""
        return prefix.isEmpty ? name : prefix + "/" + name
    }

    /// The `path` record of a pax extended header (`<length> path=<value>\n`).
    private static func paxPath(_ body: [UInt8]) -> String? {
        for record in body.split(separator: UInt8(ascii: "\n")) {
            guard let space = record.firstIndex(of: UInt8(ascii: " ")) else { continue }
            let field = record[(space + 1)...]
            if field.starts(with: "path=".utf8) { return String(decoding: field.dropFirst(5), as: UTF8.self) }
        }
        return nil
    }

    private static func string(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    private static func octal(_ header: ArraySlice<UInt8>, at field: Int, length: Int) -> Int? {
        var value = 0
        var digits = 0
        for byte in header[(header.startIndex + field)..<(header.startIndex + field + length)] {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "7"):
                value = value * 8 + Int(byte - UInt8(ascii: "0"))
                digits += 1
            case UInt8(ascii: " "), 0:
                if digits > 0 { return value }
            default:
                return nil
            }
        }
        return digits > 0 ? value : nil
    }
}
