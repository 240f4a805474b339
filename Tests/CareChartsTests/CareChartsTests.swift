import Foundation
import Testing
@testable import CareCharts

private let newYork = TimeZone(identifier: "America/New_York")!
private var calendar: Calendar {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = newYork
    calendar.firstWeekday = 1
    return calendar
}

private func day(_ text: String) -> Date {
    let parts = text.split(separator: "-").map { Int($0)! }
    return calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2], hour: 0))!
}

/// How many times `needle` occurs in `text`.
private func count(_ needle: String, in text: String) -> Int { text.components(separatedBy: needle).count - 1 }

@Suite("Charts: time axes, scales, SVG and text tables")
struct CareChartsTests {
    @Test("a week of days is labelled by weekday; 60 days stay days; 90 days become weeks and two years months, labels short and the unit named once")
    func consolidation() {
        let week = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-29"), calendar: calendar)
        #expect(week.unit == .day)
        #expect(week.labels == ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"])
        let sixty = TimeBuckets(from: day("2026-09-01"), to: day("2026-10-31"), calendar: calendar)
        #expect(sixty.unit == .day && sixty.starts.count == 60)
        #expect(sixty.labels.prefix(2) == ["Sep 1", "Sep 2"])
        let ninety = TimeBuckets(from: day("2026-09-01"), to: day("2026-11-30"), calendar: calendar)
        #expect(ninety.unit == .week)
        #expect(ninety.labels.first == "Aug 30")  // the Sunday that starts the week of Sep 1
        #expect(ninety.caption == "Week starting")
        let years = TimeBuckets(from: day("2025-11-15"), to: day("2027-11-15"), calendar: calendar)
        #expect(years.unit == .month && years.starts.count == 25)
        #expect(years.labels.prefix(3) == ["Nov 2025", "Dec", "Jan 2026"])
        // Daylight-saving days are still one bucket each (Nov 1, 2026 has 25 hours in New York).
        let dst = TimeBuckets(from: day("2026-10-31"), to: day("2026-11-03"), calendar: calendar)
        #expect(dst.starts.count == 3)
        #expect(dst.index(of: day("2026-11-01").addingTimeInterval(24.5 * 3600)) == 1)
    }

    @Test("consolidating gives the mean or the sum of each bucket's values, and a gap, not zero, where there are none")
    func consolidate() {
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-25"), calendar: calendar)
        let values: [(date: Date, value: Double)] = [(day("2026-11-22").addingTimeInterval(3600), 80), (day("2026-11-22").addingTimeInterval(7200), 82),
                                                     (day("2026-11-24").addingTimeInterval(60), 81), (day("2026-12-01"), 99)]
        #expect(axis.consolidate(values, .mean) == [81, nil, 81])
        #expect(axis.consolidate(values, .sum) == [162, nil, 81])
    }

    @Test("a bar per day with a value, a point per measurement, lines broken at gaps, a target band, and the same numbers in the table")
    func marks() {
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-29"), calendar: calendar)
        let chart = CartesianChart(title: "Medication and pain", subtitle: "Doses taken per day against the pain score", axis: axis, series: [
            .init(name: "Doses", unit: "doses", style: .bar, values: [2, 2, 1, nil, 2, 0, 2]),
            .init(name: "Pain", unit: "score (0–10)", style: .line, values: [6, 5, nil, 4, 4, 3, 3], target: 0...3),
        ])
        let svg = chart.svg(id: "pain")
        #expect(count(#"class="bar""#, in: svg) == 6)
        #expect(count(#"class="point""#, in: svg) == 6)
        #expect(count(#"class="line""#, in: svg) == 1)
        #expect(count("M", in: svg.components(separatedBy: #" d=""#)[1].components(separatedBy: "\"")[0]) == 2)  // two runs around the gap
        #expect(count(#"class="target""#, in: svg) == 1)
        #expect(count(#"class="axis-marker""#, in: svg) == 7)
        #expect(svg.contains(#"aria-labelledby="pain-title pain-desc""#))
        // Two units: a left and a right value axis, each unit named once.
        #expect(count(#"class="axis-unit""#, in: svg) == 2)
        #expect(count(">doses<", in: svg) == 1)
        let table = chart.table()
        #expect(count("<tr>", in: table) == 8)
        #expect(table.contains("<th scope=\"row\">Wed</th><td>–</td><td>4</td>"))
    }

    @Test("series of very different size get their own scale, never flattened onto another's; more than two scales split the chart")
    func scales() {
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-25"), calendar: calendar)
        let steps = CartesianChart.Series(name: "Steps", unit: "steps", style: .bar, values: [8000, 9500, 7000])
        let weight = CartesianChart.Series(name: "Weight", unit: "kg", style: .line, values: [81.2, 81.0, 80.7])
        let systolic = CartesianChart.Series(name: "Systolic", unit: "mmHg", style: .line, values: [128, 131, 125], target: 90...120)
        let diastolic = CartesianChart.Series(name: "Diastolic", unit: "mmHg", style: .line, values: [82, 85, 80], target: 60...80)
        let pressure = CartesianChart(title: "Blood pressure", subtitle: "", axis: axis, series: [systolic, diastolic])
        #expect(pressure.scales == [[0, 1]])
        // A count beside a measurement in the same unit but a thousand times larger: two scales.
        let counts = CartesianChart(title: "", subtitle: "", axis: axis, series: [
            steps, .init(name: "Flights", unit: "steps", style: .bar, values: [3, 4, 2])])
        #expect(counts.scales == [[0], [1]])
        let mixed = CartesianChart(title: "Week", subtitle: "", axis: axis, series: [steps, weight, systolic, diastolic])
        let parts = mixed.separated()
        #expect(parts.map(\.title) == ["Week (1 of 2)", "Week (2 of 2)"])
        #expect(parts.map { $0.series.map(\.name) } == [["Steps", "Weight"], ["Systolic", "Diastolic"]])
        // Each part's marks reach up its own plot: the smallest value of a scale sits well above the floor.
        let svg = parts[0].svg(id: "w")
        let weightY = svg.components(separatedBy: #"<circle class="point" data-series="1" cx=""#).dropFirst()
            .compactMap { Double($0.components(separatedBy: "cy=\"")[1].components(separatedBy: "\"")[0]) }
        #expect(weightY.count == 3)
        #expect(weightY.allSatisfy { $0 < CartesianChart.Frame.bottom - 60 })
    }

    @Test("axis steps are round numbers; values print with at most one decimal")
    func numbers() {
        #expect(CartesianChart.niceCeiling(9500) == 10000)
        #expect(CartesianChart.niceCeiling(131) == 200)
        #expect(CartesianChart.niceCeiling(81.2) == 100)
        #expect(CartesianChart.niceCeiling(2) == 2)
        #expect(CartesianChart.niceCeiling(0) == 1)
        #expect(CartesianChart.niceCeiling(2.2) == 2.5)
        #expect(CartesianChart.number(81.25) == "81.3" || CartesianChart.number(81.25) == "81.2")
        #expect(CartesianChart.number(8000) == "8000")
        #expect(CartesianChart.number(2.5) == "2.5")
    }

    @Test("an axis that counts tasks is marked in whole numbers; a measurement's keeps its round steps")
    func wholeCounts() {
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-25"), calendar: calendar)
        func markers(_ counts: Bool) -> [String] {
            let chart = CartesianChart(title: "", subtitle: "", axis: axis, series: [.init(name: "Tasks done", unit: "tasks", style: .bar, values: [5, 3, 4], counts: counts)])
            return chart.svg(id: "c").components(separatedBy: ##"fill="#6b6b70">"##).dropFirst().map { String($0.prefix { $0 != "<" }) }.filter { Double($0) != nil }
        }
        #expect(markers(true) == ["0", "2", "4", "6", "8"])
        #expect(markers(false).contains("1.3"), "\(markers(false))")
        #expect(CartesianChart.wholeCeiling(0) == 4 && CartesianChart.wholeCeiling(3) == 4 && CartesianChart.wholeCeiling(9) == 12 && CartesianChart.wholeCeiling(15) == 20)
    }

    @Test("a score's bands tile its scale behind the line, named; the axis is marked at their edges and ends at the top one; the table names each value's band")
    func scoreBands() {
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-25"), calendar: calendar)
        let bands = [CartesianChart.Band(label: "Severe <b>", range: 20...27), .init(label: "None to minimal", range: 0...4), .init(label: "Mild", range: 5...9),
                     .init(label: "Moderate", range: 10...14), .init(label: "Moderately severe", range: 15...19)]
        let chart = CartesianChart(title: "PHQ-9", subtitle: "", axis: axis, series: [.init(name: "Total score", unit: "", style: .line, values: [8, nil, 12], bands: bands)])
        let svg = chart.svg(id: "phq")
        #expect(count(#"class="score-band""#, in: svg) == 5)
        let markers = svg.components(separatedBy: ##"fill="#6b6b70">"##).dropFirst().map { String($0.prefix { $0 != "<" }) }.filter { Double($0) != nil }
        #expect(markers == ["0", "5", "10", "15", "20", "27"], "\(markers)")
        // The bands tile: each one's top is the next one's bottom (4 → 5 has no gap), the last reaches the ceiling.
        let rects = svg.components(separatedBy: #"<rect class="score-band""#).dropFirst().map { rect -> (y: Double, height: Double) in
            func attribute(_ name: String) -> Double { Double(rect.components(separatedBy: " \(name)=\"")[1].prefix { $0 != "\"" })! }
            return (attribute("y"), attribute("height"))
        }
        for (lower, upper) in zip(rects, rects.dropFirst()) { #expect(abs(upper.y + upper.height - lower.y) < 0.001) }
        #expect(abs(rects.last!.y - CartesianChart.Frame.top) < 0.001, "the top band ends at the scale's ceiling, 27, not a rounded 50")
        #expect(svg.contains("<title>None to minimal (0–4)</title>") && svg.contains("Severe &lt;b&gt;") && !svg.contains("<b>"))
        let table = chart.table()
        #expect(table.contains("<td>8 (Mild)</td>") && table.contains("<td>12 (Moderate)</td>") && table.contains("<td>–</td>"))
        #expect(table.contains("<tfoot>") && table.contains("Total score: None to minimal (0–4); Mild (5–9)"))
        // A mean between two whole-number bands reads in the lower; a chart without bands keeps its round steps and no footer.
        #expect(CartesianChart.Band.of(4.5, in: chart.series[0].bands)?.label == "None to minimal")
        #expect(CartesianChart.Band.of(28, in: chart.series[0].bands) == nil)
        let plain = CartesianChart(title: "", subtitle: "", axis: axis, series: [.init(name: "Pain", unit: "", style: .line, values: [8, nil, 12])])
        #expect(!plain.svg(id: "p").contains("score-band") && !plain.table().contains("<tfoot>"))
    }

    @Test("every text a person or an EHR typed is escaped: titles, series names, labels, ring summaries")
    func escaping() {
        let hostile = "<script>alert(1)</script> & \"quotes\" 'too'"
        #expect(HTMLText.escaped(hostile) == "&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot; &#39;too&#39;")
        let axis = TimeBuckets(from: day("2026-11-22"), to: day("2026-11-23"), calendar: calendar)
        let chart = CartesianChart(title: hostile, subtitle: hostile, axis: axis,
                                   series: [.init(name: hostile, unit: hostile, style: .scatter, values: [1])])
        let strip = WeekStrip(days: [.init(label: hostile, done: 1, due: 2)])
        for page in [chart.svg(id: "x"), chart.table(), strip.svg(id: "s")] {
            #expect(!page.contains("<script"))
            #expect(!page.contains("\"quotes\""))
            #expect(page.contains("&lt;script&gt;"))
        }
    }

    @Test("a week strip fills each ring by the day's share done, says it in words, and leaves a day with nothing due empty")
    func weekStrip() {
        let strip = WeekStrip(days: [.init(label: "Mon", done: 3, due: 4), .init(label: "Tue", done: 0, due: 0),
                                     .init(label: "Wed", done: 5, due: 4, isToday: true)])
        let svg = strip.svg(id: "week")
        #expect(count(#"class="ring""#, in: svg) == 3)
        #expect(count(#"class="ring-fill""#, in: svg) == 2)
        #expect(svg.contains("Mon: 3 of 4 done; Tue: nothing due; Wed: 5 of 4 done"))
        let full = String(format: "%.2f", WeekStrip.circumference)
        #expect(svg.contains(#"stroke-dasharray="\#(String(format: "%.2f", WeekStrip.circumference * 0.75)) \#(full)""#))
        #expect(svg.contains(#"stroke-dasharray="\#(full) \#(full)""#))  // more done than due: full, not past it
    }
}
