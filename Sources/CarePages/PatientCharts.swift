import CareCharts
import CareStore
import Foundation

/// The charts of a patient's care over a range, each an SVG with its text table, shared by the
/// report and the dashboard: adherence per day, tasks done beside the first measurement (what
/// shows a patient's progress), and each measured task's values against its target range.
public struct PatientCharts: Sendable {
    public let summary: PatientCareSummary
    /// The time axis: days, consolidated to weeks or months past 60 points.
    public let axis: TimeBuckets

    public init(_ summary: PatientCareSummary) {
        self.summary = summary
        axis = TimeBuckets(from: summary.range.start, to: summary.range.end, calendar: summary.calendar)
    }

    /// Each day's share done, in percent; nil on days with nothing due.
    var dailyAdherence: [(date: Date, value: Double)] {
        summary.days.compactMap { day in day.adherence.value.map { (day.start, 100 * $0) } }
    }

    /// Adherence per day (or week, or month) as bars.
    public func adherence() -> String {
        let chart = CartesianChart(title: "Adherence", subtitle: "Share of the day's tasks done (CareKit's rule: targets reached)", axis: axis, series: [
            .init(name: "Done", unit: "%", style: .bar, values: axis.consolidate(dailyAdherence, .mean))])
        return chart.svg(id: "adherence") + chart.table()
    }

    /// Tasks done per day beside the first measurement; nil when nothing was measured.
    public func combined() -> String? {
        guard let first = summary.measured.first, let measured = first.series.first else { return nil }
        let task = first.task
        let done = summary.days.map { (date: $0.start, value: $0.adherence.completed) }
        let chart = CartesianChart(title: "Tasks done and \(measured.kind)", subtitle: "Tasks done per day against \(task.title ?? task.id)", axis: axis, series: [
            .init(name: "Tasks done", unit: "tasks", style: .bar, values: axis.consolidate(done, .sum), counts: true),
            .init(name: measured.kind, unit: measured.units ?? measured.kind, style: .line,
                  values: axis.consolidate(measured.values, .mean), target: measured.target),
        ])
        return Self.drawn(chart, id: "combined")
    }

    /// One section per measured task, in plan order: its title and its charts.
    public func measurements() -> [(title: String, html: String)] {
        summary.measured.enumerated().map { i, measured in
            let task = measured.task
            let series = measured.series.map { m in
                CartesianChart.Series(name: m.kind, unit: m.units ?? m.kind, style: .line, values: axis.consolidate(m.values, .mean), target: m.target)
            }
            let chart = CartesianChart(title: task.title ?? task.id, subtitle: "Recorded values, mean per \(axis.unit.rawValue)", axis: axis, series: series)
            return (task.title ?? task.id, Self.drawn(chart, id: "task-\(i)"))
        }
    }

    /// One section per survey task: its scores and numeric answers over the range as a chart,
    /// and its latest answers as a table.
    public func surveys() -> [(title: String, html: String)] {
        summary.surveys.enumerated().map { i, survey in
            let task = survey.task
            var html = ""
            if !survey.series.isEmpty {
                let chart = CartesianChart(title: task.title ?? task.id, subtitle: "Scores and answers, mean per \(axis.unit.rawValue)", axis: axis,
                                           series: survey.series.map {
                    .init(name: $0.kind, unit: $0.units ?? "", style: .line, values: axis.consolidate($0.values, .mean), bands: $0.bands)
                })
                html += Self.drawn(chart, id: "survey-\(i)")
            }
            if let latest = survey.latest {
                html += "<table class=\"survey\"><caption>Latest answers, \(HTMLText.escaped(CarePlanReport.dateTime(latest.date, summary.calendar)))</caption><tbody>"
                for (question, answer) in latest.answers {
                    html += "<tr><th scope=\"row\">\(HTMLText.escaped(question))</th><td>\(HTMLText.escaped(answer))</td></tr>"
                }
                html += "</tbody></table>"
            } else if survey.problems.isEmpty {
                html += "<p>No answers in this range.</p>"
            }
            for problem in survey.problems { html += "<p class=\"problem\">\(HTMLText.escaped(problem))</p>" }
            return (task.title ?? task.id, html)
        }
    }

    /// A chart split where its scales cannot share, each part with its table.
    static func drawn(_ chart: CartesianChart, id: String) -> String {
        chart.separated().enumerated().map { i, part in part.svg(id: "\(id)-\(i)") + part.table() }.joined()
    }
}
