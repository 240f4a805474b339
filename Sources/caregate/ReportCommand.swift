import ArgumentParser
import CarePages
import CareStore
import FHIR
import Foundation

/// `caregate report`
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Write a patient's care over a range as one self-contained HTML file (or PDF), ready to print.",
        discussion: """
            The report has the patient and plans, adherence per day, tasks done beside a measurement, a \
            chart of each task's recorded values and a table of every outcome. Styles and charts are \
            inline: it opens offline and prints from any browser. Dates are YYYY-MM-DD (midnight in --tz) \
            or ISO 8601 date-times; --to is exclusive. --format pdf renders the same HTML with \
            WeasyPrint (Debian's weasyprint package), without a browser.

              caregate report --patient Patient/maria-lopez --from 2026-11-01 --to 2026-12-01 -o report.html
              caregate report --patient Patient/maria-lopez --from 2026-11-01 --to 2026-12-01 --format pdf -o report.pdf
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable { case html, pdf }

    @OptionGroup var options: StoreOptions

    @Option(help: "The patient's id in the store (Patient/ID for patients imported from FHIR).")
    var patient: String

    @OptionGroup var range: DateRangeOptions

    @Option(name: .shortAndLong, help: "The file to write (replaced only once complete).", completion: .file())
    var output: String

    @Option(help: "html (self-contained) or pdf (through WeasyPrint).")
    var format: Format = .html

    func run() throws {
        let (zone, start, end) = try range.resolved()
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let store = try options.open(.existing)
        let access = CommandAccess("report", trail: store)
        let summary: PatientCareSummary
        do {
            summary = try store.read { reader in
                try PatientCareSummary(patientID: patient, range: DateInterval(start: start, end: end), calendar: calendar, in: reader)
            }
        } catch {
            try access.record(.read, patients: [patient], outcome: .refused) { _ in "\(error)" }
            throw CommandError.message("\(error); no report was written")
        }
        try access.record(.read, patients: [patient]) { _ in "\(summary.outcomes.count) outcomes over \(summary.days.count) days" }
        let html = Array(CarePlanReport(summary).html().utf8) + [0x0A]
        let bytes = format == .pdf ? try Self.pdf(html) : html
        // Written whole or not at all, owner-only: a report is PHI.
        do {
            try FHIROutput.writing(to: output) { try $0.write(bytes) }
        } catch {
            throw CommandError.message("cannot write \(output): \(error)")
        }
        StandardError.print("wrote the report of \(summary.outcomes.count) outcome\(summary.outcomes.count == 1 ? "" : "s") over \(summary.days.count) day\(summary.days.count == 1 ? "" : "s") to \(output)")
    }

    /// The report as PDF: WeasyPrint reads the HTML on its standard input and writes the PDF to a
    /// private temporary file (a report is PHI), read back and removed.
    static func pdf(_ html: [UInt8]) throws -> [UInt8] {
        guard let weasyprint = ProcessInfo.processInfo.environment["PATH"]?.split(separator: ":").map({ "\($0)/weasyprint" })
            .first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw CommandError.message("--format pdf needs WeasyPrint (Debian: apt-get install weasyprint), or write HTML and print it from a browser; no report was written")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-report-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        defer { try? FileManager.default.removeItem(at: folder) }
        let (input, pdf, errors) = (folder.appendingPathComponent("report.html"), folder.appendingPathComponent("report.pdf"), folder.appendingPathComponent("errors.txt"))
        _ = FileManager.default.createFile(atPath: input.path, contents: Data(html), attributes: [.posixPermissions: 0o600])
        _ = FileManager.default.createFile(atPath: errors.path, contents: nil, attributes: [.posixPermissions: 0o600])
        let process = Process()
        process.executableURL = URL(fileURLWithPath: weasyprint)
        process.arguments = ["--quiet", "--encoding", "utf-8", input.path, pdf.path]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(forWritingTo: errors)
        try process.run()
        process.waitUntilExit()
        let bytes = try? FileBytes.read(pdf.path)
        guard process.terminationStatus == 0, let bytes, bytes.starts(with: Array("%PDF".utf8)) else {
            let said = String(decoding: (try? FileBytes.read(errors.path)) ?? [], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            throw CommandError.message("WeasyPrint could not render the report (exit \(process.terminationStatus)\(said.isEmpty ? "" : ": " + said)); no report was written")
        }
        return bytes
    }
}
