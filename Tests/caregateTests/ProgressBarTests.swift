import Foundation
import Testing
@testable import caregate

@Suite("Progress on the terminal")
struct ProgressBarTests {
    let cli = CommandLineTests()

    @Test("the bar shows the count, the rate and the time left; numbers are grouped and times short")
    func line() {
        #expect(ProgressBar.line("storing", done: 4_512, total: 10_000, elapsed: 3.75)
            == "storing [#########-----------] 4,512/10,000 · 1,203/s · 5 s left")
        // Too early for a rate: the count alone.
        #expect(ProgressBar.line("reading", done: 1, total: 3, elapsed: 0.1) == "reading [######--------------] 1/3")
        #expect(ProgressBar.line("pushing", done: 50, total: 50, elapsed: 10) == "pushing [####################] 50/50 · 5/s")
        #expect(ProgressBar.duration(185) == "3 min 5 s")
        #expect(ProgressBar.duration(8_040) == "2 h 14 min")
        #expect(ProgressBar.grouped(1_234_567) == "1,234,567")
        // A stage is text from the command, but goes through the terminal's escaping all the same.
        #expect(!ProgressBar.line("a\u{1B}[2Jb", done: 0, total: 1, elapsed: 0).contains("\u{1B}"))
    }

    @Test("on a terminal, import draws the bar in place; in a pipe it prints no bar, only the lines it printed before")
    func terminalOrPipe() async throws {
        let store = cli.temporaryPath("progress.sqlite")
        defer { try? FileManager.default.removeItem(atPath: store) }
        let command = [CommandLineTests.binary, "import", "FHIRSamples/bundle/maria-lopez-demo-bundle.json", "FHIRSamples/json",
                       "--store", store, "--tz", "America/New_York"]
        // script(1) gives the command a pseudo-terminal for its standard streams.
        let onTerminal = try await cli.run(["/usr/bin/script", "-qec", command.map { "'\($0)'" }.joined(separator: " "), "/dev/null"])
        #expect(onTerminal.status == 0)
        #expect(onTerminal.stdout.contains("\rstoring ["))
        #expect(onTerminal.stdout.contains("\rreading ["))
        let piped = try await cli.caregate(Array(command.dropFirst()))
        #expect(piped.status == 0)
        #expect(!piped.stderr.contains("["))
        #expect(!piped.stderr.contains("\r"))
    }
}
