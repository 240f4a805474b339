import Foundation
import Testing
@testable import Gateway

/// The scopes each job asks a SMART EHR for by default, and the table the pushing guide shows.
@Suite("SMART scopes")
struct SMARTScopesTests {
    @Test("the pushing guide's table of default scopes is what each job asks for")
    func guideTable() throws {
        let guide = try String(contentsOf: projectRoot.appendingPathComponent("docs/pushing.md"), encoding: .utf8)
        func row(_ job: String) -> String? {
            guide.split(separator: "\n").first { $0.hasPrefix("| `\(job)` |") }?.split(separator: "`").dropFirst(3).first.map(String.init)
        }
        #expect(row("import --from") == SMARTScopes.pull)
        #expect(row("push") == SMARTScopes.push)
        #expect(SMARTScopes.serve == SMARTScopes.pull + " " + SMARTScopes.push + " system/Subscription.cru")
    }

    @Test("every type a pull follows, and every type a survey's push writes, is granted; none twice")
    func covered() {
        let pull = SMARTScopes.pull.split(separator: " ").map(String.init)
        #expect(Set(pull).count == pull.count)
        #expect(PatientPull.followedTypes.allSatisfy { pull.contains("system/\($0).rs") })
        let push = SMARTScopes.push.split(separator: " ")
        #expect(["Observation", "QuestionnaireResponse", "MedicationAdministration"].allSatisfy { push.contains("system/\($0).cru") })
    }
}
