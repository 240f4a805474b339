import CareStore
import Foundation
import Mapping
import Testing
@testable import Gateway

@Suite("Mapping golden tests on every backend")
struct GoldenBackendTests {
    @Test("the built-in mappings' golden tests give their snapshots on a store of each backend (a new store per test)", arguments: Backend.allCases)
    func snapshots(backend: Backend) throws {
        // The fresh-store check first, so that without PostgreSQL the test says SKIPPED once.
        guard try backend.freshStore() != nil else { return }
        let set = try MappingSet.load([projectRoot.appendingPathComponent("Mappings").path])
        let runner = GoldenTestRunner(mappings: set, emptyStore: { try #require(try backend.freshStore("golden snapshot")) })
        let outcomes = runner.run()
        #expect(outcomes.count >= 3, "the built-in files have golden tests")
        for outcome in outcomes where !outcome.passed {
            Issue.record("\(outcome.mapping) → \(outcome.expect): \(outcome.error ?? (outcome.difference ?? []).prefix(20).joined(separator: "\n"))")
        }
    }
}
