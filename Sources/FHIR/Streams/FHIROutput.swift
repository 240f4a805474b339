#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A buffered byte sink: a file (written to a temporary name and renamed into place on `close`,
/// so a failed conversion never leaves half a file) or standard output.
public final class FHIROutput {
    private let fd: Int32
    private let path: String?
    private let temporaryPath: String?
    private var buffer: [UInt8] = []
    private var closed = false
    private static let flushSize = 1 << 20

    /// Standard output.
    public static func standardOutput() -> FHIROutput { FHIROutput(fd: 1) }

    private init(fd: Int32) {
        self.fd = fd
        self.path = nil
        self.temporaryPath = nil
    }

    /// Creates (or replaces, on `close`) the file at `path`.
    public init(path: String) throws(FHIRFormatError) {
        let temporary = path + ".partial-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard fd >= 0 else { throw .io(path: path, reason: "cannot create: " + FileBytes.errnoDescription()) }
        self.fd = fd
        self.path = path
        self.temporaryPath = temporary
    }

    /// Appends bytes.
    public func write(_ bytes: [UInt8]) throws(FHIRFormatError) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= FHIROutput.flushSize { try flush() }
    }

    /// Writes out what is buffered.
    public func flush() throws(FHIRFormatError) {
        var offset = 0
        while offset < buffer.count {
            let n = buffer.withUnsafeBytes { raw in
                sysWrite(fd, raw.baseAddress! + offset, buffer.count - offset)
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(path: path ?? "<stdout>", reason: "cannot write: " + FileBytes.errnoDescription())
            }
            offset += n
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// Flushes and, for files, moves the finished file into place.
    public func close() throws(FHIRFormatError) {
        guard !closed else { return }
        closed = true
        try flush()
        guard let path, let temporaryPath else { return }
        if fsync(fd) != 0 || sysClose(fd) != 0 {
            throw .io(path: path, reason: "cannot write: " + FileBytes.errnoDescription())
        }
        guard rename(temporaryPath, path) == 0 else {
            throw .io(path: path, reason: "cannot move into place: " + FileBytes.errnoDescription())
        }
    }

    /// Abandons a file output: the partial file is removed and nothing replaces the target.
    public func discard() {
        guard !closed else { return }
        closed = true
        if let temporaryPath {
            _ = sysClose(fd)
            unlink(temporaryPath)
        }
    }

    deinit {
        if !closed {
            if temporaryPath != nil { discard() } else { try? flush() }
        }
    }
}

@inline(__always)
func sysWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
    return Glibc.write(fd, buffer, count)
    #else
    return Darwin.write(fd, buffer, count)
    #endif
}

@inline(__always)
func sysClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
    return Glibc.close(fd)
    #else
    return Darwin.close(fd)
    #endif
}
