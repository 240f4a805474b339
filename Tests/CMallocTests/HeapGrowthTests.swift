import CMalloc
import Foundation
import Testing

/// Which commands grow glibc's heaps in large steps: `import` only, by the first argument.
@Suite("Heap growth by command")
struct HeapGrowthTests {
    /// The step for these arguments, as the constructor sees them (`argv[0]` first).
    static func step(_ arguments: [String]) -> Int {
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { pointers.forEach { free($0) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) {
                Int(caregate_heap_growth_step(Int32(arguments.count), $0))
            }
        }
    }

    @Test("`caregate import …` grows heaps 64 MiB at a time; every other command, and none, keeps glibc's default")
    func importOnly() {
        #expect(Self.step(["caregate", "import", "--store", "s.sqlite", "bundles/"]) == 64 << 20)
        #expect(Self.step(["/usr/local/bin/caregate", "import"]) == 64 << 20)
        for other in [["caregate"], ["caregate", "serve"], ["caregate", "export"], ["caregate", "importer"], ["caregate", "--help", "import"], ["caregate", ""]] {
            #expect(Self.step(other) == 0, "\(other)")
        }
    }
}
