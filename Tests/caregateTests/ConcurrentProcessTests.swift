import Foundation
import Testing

/// Two `caregate import` processes on one store at the same time, as a refresh worker and a
/// person at the command line would be.
@Suite("caregate import from two processes")
struct ConcurrentProcessTests {
    let cli = CommandLineTests()

    @Test("20 rounds of two processes importing different versions of one CarePlan: every version kept, one tip, no failure")
    func twoProcesses() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-two-processes-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let samples = CommandLineTests.projectRoot.appendingPathComponent("FHIRSamples/json")
        let plan = try String(contentsOf: samples.appendingPathComponent("CarePlan-maria-lopez-home-care.json"), encoding: .utf8)
        let patient = samples.appendingPathComponent("Patient-maria-lopez.json").path
        let store = folder.appendingPathComponent("care.sqlite").path
        var titles: [String] = []
        for round in 0..<20 {
            let pair = ["A", "B"].map { "Plan \(round)\($0)" }
            titles += pair
            let files = try pair.map { title in
                let file = folder.appendingPathComponent("\(title).json")
                try plan.replacingOccurrences(of: "Home care after hospital discharge", with: title).write(to: file, atomically: true, encoding: .utf8)
                return file.path
            }
            // Not throttled: the two must run at once.
            async let a = cli.caregate(["import", patient, files[0], "--store", store, "--tz", "America/New_York"], throttled: false)
            async let b = cli.caregate(["import", patient, files[1], "--store", store, "--tz", "America/New_York"], throttled: false)
            for run in try await [a, b] { #expect(run.status == 0, "round \(round): \(run.stdout) \(run.stderr)") }
        }
        let exported = try await cli.caregate(["store", "export", "--carekit", "--store", store])
        let record = try #require(try JSONSerialization.jsonObject(with: Data(exported.stdout.utf8)) as? [String: Any])
        let plans = (record["entities"] as? [[String: Any]] ?? []).filter { $0["type"] as? String == "carePlan" }.compactMap { $0["object"] as? [String: Any] }
        #expect(Set(plans.compactMap { $0["title"] as? String }) == Set(titles), "every version is in the history")
        #expect(plans.count == titles.count)
        let tips = plans.filter { ($0["nextVersionUUIDs"] as? [Any] ?? []).isEmpty }
        #expect(tips.count == 1, "one tip: each version linked after the one before it")
    }
}
