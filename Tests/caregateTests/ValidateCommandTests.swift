import Foundation
import Testing

@Suite("caregate validate")
struct ValidateCommandTests {
    let cli = CommandLineTests()

    func mappingFile(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-validate-\(UUID().uuidString).yaml").path
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    let broken = """
        caregate-mapping: 1
        resource: CarePlan
        patient: subject
        care-plan:
          id: "'CarePlan/' & id"
        tasks:
          - name: detail
            each: activity
            id: "%resource.id & '/' & %index.toString()"
            title: detial.description
        """

    @Test("the shipped mappings are clean: exit 0")
    func shipped() async throws {
        let run = try await cli.caregate(["validate", "Mappings"])
        #expect(run.status == 0, "\(run.stdout)\(run.stderr)")
        #expect(run.stdout.isEmpty)
        #expect(run.stderr.contains("11 mapping files checked: 0 errors, 0 warnings"))
    }

    @Test("errors print like a compiler's and exit 1; github and json formats")
    func errors() async throws {
        let path = try mappingFile(broken)
        let text = try await cli.caregate(["validate", path])
        #expect(text.status == 1)
        #expect(text.stdout == "\(path):10:12: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?\n")
        let github = try await cli.caregate(["validate", path, "--format", "github"])
        #expect(github.stdout == "::error file=\(path),line=10,col=12::'detial' is not an element of CarePlan.activity; did you mean 'detail'?\n")
        let json = try await cli.caregate(["validate", path, "--format", "json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as! [String: Any]
        let first = (object["diagnostics"] as! [[String: Any]])[0]
        #expect(first["line"] as? Int == 10 && first["column"] as? Int == 12 && first["severity"] as? String == "error")
    }

    @Test("usage errors exit 2")
    func usage() async throws {
        #expect(try await cli.caregate(["validate", "no-such-dir"]).status == 2)
        #expect(try await cli.caregate(["validate", "--format", "xml"]).status == 2)
    }
}
