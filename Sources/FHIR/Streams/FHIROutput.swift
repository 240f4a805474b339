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

    /// Creates (or replaces, on `close`) the file at `path`, readable by its owner only unless
    /// `permissions` says otherwise (outputs hold patient data, as the store does). The data is
    /// written to a new file of an unpredictable name beside it, created exclusively and never
    /// through a symbolic link, so nothing planted there is followed.
    public init(path: String, permissions: mode_t = 0o600) throws(FHIRFormatError) {
        var fd: Int32 = -1
        var temporary = ""
        for _ in 0..<8 {
            temporary = FHIROutput.temporaryName(beside: path)
            fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, permissions)
            if fd >= 0 || errno != EEXIST { break }
        }
        guard fd >= 0 else { throw .io(path: path, reason: "cannot create: " + FileBytes.errnoDescription()) }
        self.fd = fd
        self.path = path
        self.temporaryPath = temporary
    }

    /// `.NAME.partial-RANDOM` in the folder of `path`.
    static func temporaryName(beside path: String) -> String {
        let slash = path.lastIndex(of: "/")
        let folder = slash.map { String(path[...$0]) } ?? ""
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        let random = (0..<4).map { _ in String(UInt32.random(in: 0...UInt32.max), radix: 36) }.joined()
        return "\(folder).\(name).partial-\(random)"
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
            let reason = FileBytes.errnoDescription()
            unlink(temporaryPath)
            throw .io(path: path, reason: "cannot move into place: " + reason)
        }
        // The rename is durable once the folder is on disk too.
        let folder = path.lastIndex(of: "/").map { String(path[...$0]) } ?? "."
        let directory = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directory >= 0 {
            _ = fsync(directory)
            _ = sysClose(directory)
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

extension FHIROutput {
    /// Runs `body` on the file at `path` (standard output when nil) and keeps the file only when
    /// `body` returns: on any error the partial file is removed and the target left as it was.
    /// The one way the commands write a file whole or not at all.
    ///
    /// ```swift
    /// try FHIROutput.writing(to: "events.ndjson") { sink in try sink.write(Array("{}\n".utf8)) }
    /// ```
    public static func writing<Result>(to path: String?, permissions: mode_t = 0o600, _ body: (FHIROutput) throws -> Result) throws -> Result {
        let sink = try path.map { path throws(FHIRFormatError) in try FHIROutput(path: path, permissions: permissions) } ?? .standardOutput()
        do {
            let result = try body(sink)
            try sink.close()
            return result
        } catch {
            sink.discard()
            throw error
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
