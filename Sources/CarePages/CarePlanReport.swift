import CareCharts
import CareStore
import Foundation

/// A patient's care over a range as one self-contained HTML file, in the spirit of CareKit's
/// `OCKDocument`: the patient and plan, adherence per day, adherence beside a measurement, a
/// chart of each task's values, and a table of every outcome. Styles and SVG are inline, nothing
/// comes from the network, and it prints to PDF from a browser. Every text is escaped.
///
/// ```swift
/// let html = CarePlanReport(summary).html()
/// ```
public struct CarePlanReport: Sendable {
    public let summary: PatientCareSummary

    public init(_ summary: PatientCareSummary) {
        self.summary = summary
    }

    public func html() -> String {
        let name = HTMLText.escaped(summary.patient.name.displayName)
        var body = "<header><h1>Care plan report</h1><p class=\"patient\">\(name)</p><p class=\"range\">\(HTMLText.escaped(rangeText))</p></header>"
        let charts = PatientCharts(summary)
        body += plans() + section("Adherence", charts.adherence())
        if let combined = charts.combined() { body += section("Adherence and measurements", combined) }
        for (title, html) in charts.measurements() { body += section(HTMLText.escaped(title), html) }
        for (title, html) in charts.surveys() { body += section("Survey: " + HTMLText.escaped(title), html) }
        body += section("Every outcome", outcomeTable())
        return """
            <!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">\
            <title>Care plan report: \(name)</title><style>\(Self.style)</style></head><body>\(body)</body></html>
            """
    }

    var rangeText: String {
        let last = summary.range.end.addingTimeInterval(-1)
        return "\(Self.date(summary.range.start, summary.calendar)) to \(Self.date(last, summary.calendar))"
    }

    func section(_ title: String, _ content: String) -> String { "<section><h2>\(title)</h2>\(content)</section>" }

    func plans() -> String {
        var out = "<section><h2>Plans</h2>"
        for plan in summary.carePlans {
            let tasks = summary.tasks.filter { $0.carePlanUUID == plan.uuid }.map { "<li>\(HTMLText.escaped($0.title ?? $0.id))</li>" }
            out += "<h3>\(HTMLText.escaped(plan.title))</h3><ul>\(tasks.joined())</ul>"
        }
        return out + "</section>"
    }

    func outcomeTable() -> String {
        var out = "<table class=\"outcomes\"><thead><tr><th scope=\"col\">Event</th><th scope=\"col\">Task</th><th scope=\"col\">Values</th></tr></thead><tbody>"
        for outcome in summary.outcomes {
            let values = outcome.values.map { $0.text(number: CartesianChart.number) }.joined(separator: ", ")
            out += "<tr><td>\(HTMLText.escaped(Self.dateTime(outcome.event, summary.calendar)))</td><td>\(HTMLText.escaped(outcome.taskTitle))</td><td>\(HTMLText.escaped(values))</td></tr>"
        }
        return out + "</tbody></table>"
    }

    static func date(_ date: Date, _ calendar: Calendar) -> String {
        let c = calendar.dateComponents([.year, .month, .day], from: date)
        return "\(TimeBuckets.months[(c.month ?? 1) - 1]) \(c.day ?? 1), \(c.year ?? 0)"
    }

    static func dateTime(_ date: Date, _ calendar: Calendar) -> String {
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return Self.date(date, calendar) + String(format: " %02d:%02d", c.hour ?? 0, c.minute ?? 0)
    }

    static let style = """
        body{font-family:-apple-system,system-ui,sans-serif;margin:2rem auto;max-width:720px;padding:0 1rem;color:#1c1c1e}\
        h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #e5e5ea}\
        .patient{font-size:1.1rem;font-weight:600;margin:0}.range{color:#6b6b70;margin-top:.2rem}\
        svg.chart{width:100%;height:auto;display:block;margin:1rem 0}\
        table{border-collapse:collapse;width:100%;font-size:.85rem;margin-bottom:1rem}caption{text-align:left;font-weight:600;padding:.3rem 0}\
        th,td{text-align:left;padding:.2rem .4rem;border-bottom:1px solid #e5e5ea}\
        @media print{body{margin:0;max-width:none}section{break-inside:avoid-page}}
        """
}
