import CZlib

/// zlib's inflate and deflate over whole buffers: FHIR packages are gzipped tar files, and the
/// R4 core's conformance resources are built into the program deflated.
public enum Gzip {
    /// Why bytes could not be inflated (zlib's own words).
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    /// Inflates a gzip stream (or a zlib stream: the header says which), every member of it.
    public static func inflate(_ compressed: [UInt8]) throws(Failure) -> [UInt8] {
        var stream = z_stream()
        // 32 + 15: detect gzip or zlib from the header, with the largest window.
        guard caregate_inflate_init(&stream, 32 + 15) == Z_OK else { throw Failure(message: "zlib could not start inflating") }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        output.reserveCapacity(compressed.count * 6)
        var chunk = [UInt8](repeating: 0, count: 1 << 18)
        var input = compressed
        let failure: String? = input.withUnsafeMutableBufferPointer { source in
            stream.next_in = source.baseAddress
            stream.avail_in = UInt32(source.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { buffer -> Int32 in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(buffer.count)
                    return CZlib.inflate(&stream, Z_NO_FLUSH)
                }
                output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
                switch status {
                case Z_STREAM_END:
                    // A gzip file may hold several members one after another.
                    guard stream.avail_in > 0 else { return nil }
                    guard inflateReset(&stream) == Z_OK else { return "zlib could not read the next gzip member" }
                case Z_OK:
                    if stream.avail_in == 0 && stream.avail_out > 0 { return "the compressed data ends early (truncated file?)" }
                case Z_BUF_ERROR:
                    if stream.avail_in == 0 { return "the compressed data ends early (truncated file?)" }
                default:
                    return stream.msg.map { String(cString: $0) } ?? "zlib status \(status)"
                }
            }
        }
        if let failure { throw Failure(message: failure) }
        return output
    }

    /// Deflates into a zlib stream at the best compression (deterministic for one zlib version).
    public static func deflate(_ bytes: [UInt8]) -> [UInt8] {
        var stream = z_stream()
        precondition(caregate_deflate_init(&stream, Z_BEST_COMPRESSION) == Z_OK, "zlib could not start deflating")
        defer { deflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 18)
        var input = bytes
        input.withUnsafeMutableBufferPointer { source in
            stream.next_in = source.baseAddress
            stream.avail_in = UInt32(source.count)
            var status = Z_OK
            while status != Z_STREAM_END {
                status = chunk.withUnsafeMutableBufferPointer { buffer -> Int32 in
                    stream.next_out = buffer.baseAddress
                    stream.avail_out = UInt32(buffer.count)
                    return CZlib.deflate(&stream, Z_FINISH)
                }
                output.append(contentsOf: chunk[0..<(chunk.count - Int(stream.avail_out))])
            }
        }
        return output
    }
}
