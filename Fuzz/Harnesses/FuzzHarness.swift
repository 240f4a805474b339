import Foundation

/// A property a harness checks that did not hold: a finding, like a crash.
public struct PropertyFailure: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// One input surface under fuzzing. `run` takes any bytes; it must not crash, leak or hang, and
/// throws `PropertyFailure` when a property of the surface does not hold (a round trip that
/// changes the tree, a value for an expression the checker refused...). Refusing the input with
/// the surface's own error is fine: that is what hostile input should get.
public protocol FuzzHarness {
    /// The harness's name: its corpus folder (`Fuzz/Corpus/fhir-json`) and executable (`fuzz-fhir-json`).
    static var name: String { get }
    static func run(_ input: [UInt8]) throws(PropertyFailure)
}

/// Every harness, for the corpus replay tests and the fuzz script.
public enum FuzzHarnesses {
    public static var all: [any FuzzHarness.Type] {
        [FHIRJSONHarness.self, FHIRXMLHarness.self, FHIRStreamHarness.self, FHIRPathHarness.self,
         MappingHarness.self, CareKitHarness.self, TimingHarness.self, ServerAnswerHarness.self, SyncHarness.self, ServerConfigHarness.self,
         BulkManifestHarness.self, PatientBoundaryHarness.self, QuestionnaireHarness.self]
    }

    /// The body of a fuzz executable's `LLVMFuzzerTestOneInput`: a property failure stops the
    /// fuzzer like a crash, so libFuzzer keeps the input.
    public static func fuzz(_ harness: any FuzzHarness.Type, _ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
            try harness.run(input)
        } catch {
            fatalError("\(harness.name): property failed: \(error)")
        }
        return 0
    }
}

/// A file holding one input, for the surfaces that read paths (streams, mapping files): made in
/// a folder of its own, removed afterwards. Plain system calls (`mkdtemp`, `open`, `unlink`,
/// `rmdir`): Foundation's file manager took a tenth of the stream harness's time.
struct ScratchFile {
    let folder: URL
    let path: String

    init(_ bytes: [UInt8], name: String) throws(PropertyFailure) {
        var template = Array((NSTemporaryDirectory() + "/caregate-fuzz-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw PropertyFailure("cannot make a scratch folder: errno \(errno)") }
        let folderPath = String(cString: made)
        folder = URL(fileURLWithPath: folderPath, isDirectory: true)
        path = folderPath + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw PropertyFailure("cannot write the scratch file \(path): errno \(errno)") }
        defer { close(fd) }
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count else { throw PropertyFailure("cannot write the scratch file \(path): errno \(errno)") }
    }

    func remove() {
        unlink(path)
        rmdir(folder.path)
    }
}

extension Collection where Element == UInt8 {
    /// The input split at its first byte: a selector, and the rest.
    var selector: (UInt8, [UInt8]) {
        guard let first else { return (0, []) }
        return (first, Array(dropFirst()))
    }
}
