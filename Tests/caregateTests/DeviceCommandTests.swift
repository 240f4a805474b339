import Foundation
import Testing

@Suite("caregate enroll and devices")
struct DeviceCommandTests {
    let cli = CommandLineTests()

    @Test("enroll prints a one-time code for a patient the store holds; devices list and revoke say what they find")
    func enrollAndList() async throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-devices-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("care.sqlite").path
        _ = try await cli.caregate(["import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "--store", store, "--tz", "America/New_York"])
        let enrolled = try await cli.caregate(["enroll", "--patient", "Patient/maria-lopez", "--store", store])
        #expect(enrolled.status == 0, "\(enrolled.stderr)")
        let code = enrolled.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(code.range(of: #"^[A-HJKMNP-Z2-9]{5}-[A-HJKMNP-Z2-9]{5}$"#, options: .regularExpression) != nil, "\(code)")
        #expect(enrolled.stderr.contains("enrollment code for Patient/maria-lopez, valid once until "))
        let unknown = try await cli.caregate(["enroll", "--patient", "Patient/nobody", "--store", store])
        #expect(unknown.status == 1 && unknown.stderr.contains("error: the store holds no patient \"Patient/nobody\""), "\(unknown.stderr)")
        let list = try await cli.caregate(["devices", "list", "--store", store])
        #expect(list.status == 0 && list.stdout.isEmpty && list.stderr.contains("no devices enrolled"))
        let revoke = try await cli.caregate(["devices", "revoke", "abc", "--store", store])
        #expect(revoke.status == 1 && revoke.stderr.contains("no device \"abc\""), "\(revoke.stderr)")
    }
}
