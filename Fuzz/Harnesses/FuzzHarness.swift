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
         MappingHarness.self, CareKitHarness.self, TimingHarness.self, ServerAnswerHarness.self, SyncHarness.self, ServerConfigHarness.self]
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
/// a folder of its own, removed afterwards.
struct ScratchFile {
    let folder: URL
    let path: String

    init(_ bytes: [UInt8], name: String) throws(PropertyFailure) {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-fuzz-\(UUID().uuidString)")
        path = folder.appendingPathComponent(name).path
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: path))
        } catch {
            throw PropertyFailure("cannot write the scratch file \(path): \(error)")
        }
    }

    func remove() {
        try? FileManager.default.removeItem(at: folder)
    }
}

extension Collection where Element == UInt8 {
    /// The input split at its first byte: a selector, and the rest.
    var selector: (UInt8, [UInt8]) {
        guard let first else { return (0, []) }
        return (first, Array(dropFirst()))
    }
}
