import ArgumentParser
import CarePages
import CareStore
import FHIR
import Foundation

/// `caregate report`
struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Write a patient's care over a range as one self-contained HTML file, ready to print to PDF.",
        discussion: """
            The report has the patient and plans, adherence per day, tasks done beside a measurement, a \
            chart of each task's recorded values and a table of every outcome. Styles and charts are \
            inline: it opens offline and prints from any browser. Dates are YYYY-MM-DD (midnight in --tz) \
            or ISO 8601 date-times; --to is exclusive.

              caregate report --patient Patient/maria-lopez --from 2026-11-01 --to 2026-12-01 -o report.html
            """)

    @OptionGroup var options: StoreOptions

    @Option(help: "The patient's id in the store (Patient/ID for patients imported from FHIR).")
    var patient: String

    @OptionGroup var range: DateRangeOptions

    @Option(name: .shortAndLong, help: "The HTML file to write (replaced only once complete).", completion: .file())
    var output: String

    func run() throws {
        let (zone, start, end) = try range.resolved()
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let store = try options.open()
        let summary: PatientCareSummary
        do {
            summary = try store.read { reader in
                try PatientCareSummary(patientID: patient, range: DateInterval(start: start, end: end), calendar: calendar, in: reader)
            }
        } catch {
            throw CommandError.message("\(error); no report was written")
        }
        // Written whole or not at all, owner-only: a report is PHI.
        do {
            let sink = try FHIROutput(path: output)
            do {
                try sink.write(Array(CarePlanReport(summary).html().utf8) + [0x0A])
                try sink.close()
            } catch {
                sink.discard()
                throw error
            }
        } catch {
            throw CommandError.message("cannot write \(output): \(error)")
        }
        StandardError.print("wrote the report of \(summary.outcomes.count) outcome\(summary.outcomes.count == 1 ? "" : "s") over \(summary.days.count) day\(summary.days.count == 1 ? "" : "s") to \(output)")
    }
}
