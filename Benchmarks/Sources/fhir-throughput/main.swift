// fhir-throughput: measures CareGate's FHIR reading and writing in MB/s on a set of files.
//
//   fhir-throughput [--repeat N] [--ndjson-memory PATH] FILE...
//
// Prints one line per measurement, best of N runs:
//   parse-json <MB/s>, write-json, write-xml, parse-xml (of the XML CareGate wrote).
// With --ndjson-memory PATH it instead streams an NDJSON file and prints resources, MB/s and
// the peak resident set (VmHWM) in MB.
import FHIR
import Foundation

var arguments = Array(CommandLine.arguments.dropFirst())
var repeats = 3
var ndjsonPath: String?
if let i = arguments.firstIndex(of: "--repeat") { repeats = Int(arguments[i + 1])!; arguments.removeSubrange(i...(i + 1)) }
var only: String?
if let i = arguments.firstIndex(of: "--only") { only = arguments[i + 1]; arguments.removeSubrange(i...(i + 1)) }
if let i = arguments.firstIndex(of: "--ndjson-memory") { ndjsonPath = arguments[i + 1]; arguments.removeSubrange(i...(i + 1)) }

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func peakResidentMB() -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmHWM:") {
        let kb = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
        return kb / 1024
    }
    return 0
}

if let ndjsonPath {
    let size = Double((try FileManager.default.attributesOfItem(atPath: ndjsonPath)[.size] as? NSNumber)?.intValue ?? 0)
    let start = now()
    let reader = try NDJSONReader(path: ndjsonPath)
    var count = 0
    while let _ = try reader.next() { count += 1 }
    let seconds = now() - start
    print(String(format: "ndjson-stream %.1f MB/s  %d resources  %.0f MB file  peak RSS %.1f MB", size / seconds / 1e6, count, size / 1e6, peakResidentMB()))
    exit(0)
}

let files = arguments.map { try! Array(Data(contentsOf: URL(fileURLWithPath: $0))) }
let totalBytes = Double(files.reduce(0) { $0 + $1.count })

@MainActor func best(_ label: String, bytes: Double, _ body: () throws -> Void) rethrows {
    if let only, only != label { try body(); return }
    var fastest = Double.infinity
    for _ in 0..<repeats {
        let start = now()
        try body()
        fastest = min(fastest, now() - start)
    }
    print(String(format: "%@ %.1f MB/s (%.3f s for %.1f MB)", label, bytes / fastest / 1e6, fastest, bytes / 1e6))
}

var trees: [Element] = []
try best("parse-json", bytes: totalBytes) {
    trees = try files.map { try FHIRJSONReader().read($0).resource }
}
var jsonOut: [[UInt8]] = []
try best("write-json", bytes: totalBytes) {
    jsonOut = trees.map { FHIRJSONWriter(pretty: false).write($0) }
}
var xmlOut: [[UInt8]] = []
let xmlBytesEstimate = Double(trees.map { FHIRXMLWriter().write($0).count }.reduce(0, +))
try best("write-xml", bytes: xmlBytesEstimate) {
    xmlOut = trees.map { FHIRXMLWriter().write($0) }
}
try best("parse-xml", bytes: xmlBytesEstimate) {
    for xml in xmlOut { _ = try FHIRXMLReader().read(xml) }
}
_ = jsonOut.count
