import Diagnostics

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whole-file and chunked reads with POSIX calls, reporting failures as `FHIRFormatError.io`.
/// Every file CareGate reads whole goes through here, not through Foundation's
/// `FileManager.contents(atPath:)`, which leaks 4 KiB on every empty file on Linux.
public enum FileBytes {
    /// Reads a whole file, refusing files larger than `limit` bytes.
    public static func read(_ path: String, limit: Int = Int.max) throws(FHIRFormatError) -> [UInt8] {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .io(path: path, reason: "cannot read: " + errnoDescription()) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .io(path: path, reason: "cannot read: " + errnoDescription()) }
        if (info.st_mode & S_IFMT) == S_IFDIR { throw .io(path: path, reason: "cannot read: is a directory") }
        let size = Int(info.st_size)
        if size > limit {
            throw .limitExceeded(ParseIssue(.error, .limit,
                "file is \(size) bytes, larger than the limit of \(limit)", at: SourceLocation(file: path)))
        }
        // Not zeroed first: `read` fills it, and only what it filled is kept.
        var failure: Int32?
        let bytes = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            var total = 0
            while total < size {
                let n = sysRead(fd, buffer.baseAddress! + total, size - total)
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    break
                }
                if n == 0 { break }
                total += n
            }
            count = total
        }
        if let failure {
            errno = failure
            throw .io(path: path, reason: "cannot read: " + errnoDescription())
        }
        return bytes
    }

    /// The file's size in bytes, or nil when it cannot be found. A `stat`, not Foundation's
    /// `attributesOfItem`, which also looks up the owner's and group's names (reading the
    /// password and group files for every file asked about).
    public static func size(_ path: String) -> Int? {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : nil
    }

    /// The first bytes of a file (up to `limit`), to sniff its format or check its prolog.
    static func head(_ path: String, limit: Int = 64 * 1024) throws(FHIRFormatError) -> [UInt8] {
        let reader = try ChunkedFileReader(path: path)
        var head: [UInt8] = []
        while head.count < limit, try reader.read(into: &head, count: 16 * 1024) > 0 {}
        return head
    }

    /// The reason `errno` gives, as `strerror` words it.
    public static func errnoDescription() -> String {
        String(cString: strerror(errno))
    }
}

/// Reads a file in chunks, so that streams (NDJSON, Bundle entries) never hold the whole file.
final class ChunkedFileReader {
    let path: String
    private let fd: Int32
    private(set) var isAtEnd = false

    init(path: String) throws(FHIRFormatError) {
        self.path = path
        fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw .io(path: path, reason: "cannot read: " + FileBytes.errnoDescription()) }
        var info = stat()
        if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR {
            close(fd)
            throw .io(path: path, reason: "cannot read: is a directory")
        }
    }

    /// Where `read(into:count:)` reads before appending: only the bytes read are copied, so a
    /// small file costs its size, not the chunk's (the chunk is never zero-filled).
    private var scratch = UnsafeMutableRawBufferPointer(start: nil, count: 0)

    /// Appends up to `count` bytes to `buffer`; returns how many were read (0 at the end).
    func read(into buffer: inout [UInt8], count: Int) throws(FHIRFormatError) -> Int {
        if scratch.count < count {
            scratch.deallocate()
            scratch = .allocate(byteCount: count, alignment: 16)
        }
        while true {
            let n = sysRead(fd, scratch.baseAddress!, count)
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(path: path, reason: "cannot read: " + FileBytes.errnoDescription())
            }
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: scratch[..<n]))
            if n == 0 { isAtEnd = true }
            return n
        }
    }

    deinit {
        scratch.deallocate()
        close(fd)
    }
}

@inline(__always)
func sysRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.read(fd, buffer, count)
    #else
    return Darwin.read(fd, buffer, count)
    #endif
}
