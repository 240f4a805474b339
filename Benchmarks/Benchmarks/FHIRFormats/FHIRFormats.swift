// FHIR format benchmarks (package-benchmark): reading and writing the 20 Synthea bundles in
// ../../shared/synthea (25 MB). Each iteration handles the whole set; MB/s = 25.5 / seconds.
import Benchmark
import FHIR
import Foundation

/// The Synthea bundles, loaded once; empty (with a notice) when ../shared is absent.
let syntheaFiles: [[UInt8]] = {
    var dir = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { dir.deleteLastPathComponent() }
    let synthea = dir.deletingLastPathComponent().appendingPathComponent("shared/synthea")
    let names = (try? FileManager.default.contentsOfDirectory(atPath: synthea.path))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
    if names.isEmpty { print("SKIPPED: \(synthea.path) not found; FHIR format benchmarks need ../shared") }
    return names.compactMap { try? Array(Data(contentsOf: synthea.appendingPathComponent($0))) }
}()

let syntheaTrees: [Element] = syntheaFiles.compactMap { try? FHIRJSONReader().read($0).resource }
let syntheaXML: [[UInt8]] = syntheaTrees.map { FHIRXMLWriter().write($0) }

let benchmarks: @Sendable () -> Void = {
    let configuration = Benchmark.Configuration(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .peakMemoryResident],
        maxDuration: .seconds(10),
        maxIterations: 30
    )

    Benchmark("Synthea JSON parse (25 MB)", configuration: configuration) { benchmark in
        for file in syntheaFiles {
            blackHole(try FHIRJSONReader().read(file))
        }
    }

    Benchmark("Synthea JSON write (25 MB)", configuration: configuration) { benchmark in
        for tree in syntheaTrees {
            blackHole(FHIRJSONWriter(pretty: false).write(tree))
        }
    }

    Benchmark("Synthea XML parse (18 MB)", configuration: configuration) { benchmark in
        for xml in syntheaXML {
            blackHole(try FHIRXMLReader().read(xml))
        }
    }

    Benchmark("Synthea XML write (18 MB)", configuration: configuration) { benchmark in
        for tree in syntheaTrees {
            blackHole(FHIRXMLWriter().write(tree))
        }
    }
}
