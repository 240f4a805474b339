import Foundation

/// Drawing a `CartesianChart`: SVG for the eye, and the same numbers as a table for screen
/// readers (pages put it beside or under the chart). Everything is inline: no scripts, no fonts
/// or styles from the network.
extension CartesianChart {
    /// CareKit's tints (system blue, pink, orange, green, purple, teal).
    static let tints = ["#007AFF", "#FF2D55", "#FF9500", "#34C759", "#AF52DE", "#5AC8FA"]

    /// The plot's frame in the SVG's coordinates.
    struct Frame {
        static let width = 640.0, height = 330.0, top = 84.0, bottom = 280.0
        let left: Double, right: Double
        var plotWidth: Double { right - left }
        func y(_ value: Double, ceiling: Double) -> Double { Frame.bottom - (Frame.bottom - Frame.top) * min(value, ceiling) / ceiling }
    }

    /// The chart as an SVG element; `id` makes its title and description referable (unique on a page).
    public func svg(id: String) -> String {
        let scales = Array(self.scales.prefix(2))
        let frame = Frame(left: 56, right: Frame.width - (scales.count > 1 ? 56 : 16))
        let maxima = scales.map { group in
            let peak = group.map { series[$0].peak }.max() ?? 0
            if group.contains(where: { !series[$0].bands.isEmpty }) { return peak > 0 ? peak : 1 }
            return group.allSatisfy { series[$0].counts } ? Self.wholeCeiling(peak) : Self.niceCeiling(peak)
        }
        var scaleOf: [Int: Int] = [:]
        for (s, group) in scales.enumerated() { for i in group { scaleOf[i] = s } }
        var out = ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \##(Int(Frame.width)) \##(Int(Frame.height))" role="img" aria-labelledby="\##(id)-title \##(id)-desc" class="chart">"##
        out += ##"<title id="\##(id)-title">\##(HTMLText.escaped(title))</title><desc id="\##(id)-desc">\##(HTMLText.escaped(subtitle))</desc>"##
        out += ##"<text x="0" y="18" class="chart-title" font-size="16" font-weight="600">\##(HTMLText.escaped(title))</text>"##
        out += ##"<text x="0" y="36" class="chart-subtitle" font-size="12" fill="#6b6b70">\##(HTMLText.escaped(subtitle))</text>"##
        out += legend()
        for (s, group) in scales.enumerated() {
            let bands = group.flatMap { series[$0].bands }
            let marks = bands.isEmpty ? (0...4).map { maxima[s] * Double($0) / 4 } : Set(bands.map(\.range.lowerBound) + [0, maxima[s]]).sorted()
            out += valueAxis(series[group[0]].unit, marks: marks, ceiling: maxima[s], right: s == 1, frame: frame)
        }
        for (i, item) in series.enumerated() {
            guard let s = scaleOf[i] else { continue }
            out += scoreBands(item.bands, ceiling: maxima[s], tint: Self.tints[i % Self.tints.count], frame: frame)
            if let target = item.target { out += band(target, ceiling: maxima[s], tint: Self.tints[i % Self.tints.count], frame: frame) }
        }
        out += timeAxis(frame)
        let bars = series.indices.filter { series[$0].style == .bar && scaleOf[$0] != nil }
        for (i, item) in series.enumerated() {
            guard let s = scaleOf[i] else { continue }
            let tint = Self.tints[i % Self.tints.count]
            out += item.style == .bar ? barMarks(i, slot: bars.firstIndex(of: i)!, of: bars.count, ceiling: maxima[s], tint: tint, frame: frame)
                : pointMarks(i, line: item.style == .line, ceiling: maxima[s], tint: tint, frame: frame)
        }
        return out + "</svg>"
    }

    func legend() -> String {
        var out = ""
        var x = 0.0
        for (i, item) in series.enumerated() {
            out += ##"<rect x="\##(x)" y="44" width="10" height="10" rx="2" fill="\##(Self.tints[i % Self.tints.count])"/>"##
            out += ##"<text x="\##(x + 14)" y="53" font-size="11">\##(HTMLText.escaped(item.name))</text>"##
            x += 24 + Double(item.name.count) * 6.5
        }
        return out
    }

    func valueAxis(_ unit: String, marks: [Double], ceiling: Double, right: Bool, frame: Frame) -> String {
        let x = right ? frame.right : frame.left
        let anchor = right ? "start" : "end"
        let labelX = right ? x + 6 : x - 6
        var out = ##"<text x="\##(labelX)" y="\##(Frame.top - 12)" text-anchor="\##(anchor)" font-size="11" class="axis-unit">\##(HTMLText.escaped(unit))</text>"##
        for value in marks {
            let y = frame.y(value, ceiling: ceiling)
            if !right { out += ##"<line x1="\##(frame.left)" x2="\##(frame.right)" y1="\##(y)" y2="\##(y)" stroke="#e5e5ea"/>"## }
            out += ##"<text x="\##(labelX)" y="\##(y + 4)" text-anchor="\##(anchor)" font-size="11" fill="#6b6b70">\##(Self.number(value))</text>"##
        }
        return out
    }

    func band(_ target: ClosedRange<Double>, ceiling: Double, tint: String, frame: Frame) -> String {
        let top = frame.y(target.upperBound, ceiling: ceiling), bottom = frame.y(target.lowerBound, ceiling: ceiling)
        return ##"<rect class="target" x="\##(frame.left)" y="\##(top)" width="\##(frame.plotWidth)" height="\##(bottom - top)" fill="\##(tint)" fill-opacity="0.12"/>"##
    }

    /// A score's bands, shaded in turn from its lowest, each named at its left edge. A band is
    /// drawn up to where the next begins when the two are whole numbers apart (0–4 then 5–9),
    /// so that the scale has no gaps.
    func scoreBands(_ bands: [Band], ceiling: Double, tint: String, frame: Frame) -> String {
        var out = ""
        for (n, item) in bands.enumerated() {
            let next = n + 1 < bands.count ? bands[n + 1].range.lowerBound : nil
            let upper = next.map { $0 > item.range.upperBound && $0 - item.range.upperBound <= 1 ? $0 : item.range.upperBound } ?? item.range.upperBound
            let top = frame.y(upper, ceiling: ceiling), bottom = frame.y(item.range.lowerBound, ceiling: ceiling)
            guard bottom > top else { continue }
            out += ##"<rect class="score-band" x="\##(frame.left)" y="\##(top)" width="\##(frame.plotWidth)" height="\##(bottom - top)" fill="\##(tint)" fill-opacity="\##(n % 2 == 0 ? "0.05" : "0.11")"><title>\##(HTMLText.escaped(Self.bandText(item)))</title></rect>"##
            if bottom - top >= 12 {
                out += ##"<text x="\##(frame.left + 4)" y="\##(top + 11)" font-size="10" fill="#48484a" class="score-band-label">\##(HTMLText.escaped(item.label))</text>"##
            }
        }
        return out
    }

    /// A band in words: `Mild depression (5–9)`.
    static func bandText(_ band: Band) -> String {
        "\(band.label) (\(number(band.range.lowerBound))–\(number(band.range.upperBound)))"
    }

    func timeAxis(_ frame: Frame) -> String {
        let count = axis.labels.count
        let every = max(1, (count + 11) / 12)
        var out = ##"<line x1="\##(frame.left)" x2="\##(frame.right)" y1="\##(Frame.bottom)" y2="\##(Frame.bottom)" stroke="#8e8e93"/>"##
        for (i, label) in axis.labels.enumerated() where i % every == 0 {
            out += ##"<text x="\##(center(i, frame))" y="\##(Frame.bottom + 16)" text-anchor="middle" font-size="11" class="axis-marker">\##(HTMLText.escaped(label))</text>"##
        }
        return out + ##"<text x="\##((frame.left + frame.right) / 2)" y="\##(Frame.height - 8)" text-anchor="middle" font-size="11" fill="#6b6b70" class="axis-caption">\##(HTMLText.escaped(axis.caption))</text>"##
    }

    func center(_ bucket: Int, _ frame: Frame) -> Double {
        frame.left + frame.plotWidth * (Double(bucket) + 0.5) / Double(max(axis.labels.count, 1))
    }

    func barMarks(_ i: Int, slot: Int, of slots: Int, ceiling: Double, tint: String, frame: Frame) -> String {
        let band = frame.plotWidth / Double(max(axis.labels.count, 1))
        let width = band * 0.7 / Double(slots)
        var out = ""
        for (bucket, value) in series[i].values.enumerated() {
            guard let value, bucket < axis.labels.count else { continue }
            let x = center(bucket, frame) - band * 0.35 + width * Double(slot)
            let y = frame.y(value, ceiling: ceiling)
            out += ##"<rect class="bar" data-series="\##(i)" x="\##(x)" y="\##(y)" width="\##(width)" height="\##(Frame.bottom - y)" rx="2" fill="\##(tint)"/>"##
        }
        return out
    }

    func pointMarks(_ i: Int, line: Bool, ceiling: Double, tint: String, frame: Frame) -> String {
        var out = ""
        var path = ""
        var penDown = false
        for (bucket, value) in series[i].values.enumerated() {
            guard let value, bucket < axis.labels.count else { penDown = false; continue }
            let (x, y) = (center(bucket, frame), frame.y(value, ceiling: ceiling))
            path += "\(penDown ? "L" : "M")\(Self.coordinate(x)) \(Self.coordinate(y)) "
            penDown = true
            out += ##"<circle class="point" data-series="\##(i)" cx="\##(x)" cy="\##(y)" r="3" fill="\##(tint)"/>"##
        }
        if line && !path.isEmpty {
            out = ##"<path class="line" data-series="\##(i)" d="\##(path.dropLast())" fill="none" stroke="\##(tint)" stroke-width="2"/>"## + out
        }
        return out
    }

    /// The numbers as an HTML table: one row per time bucket, one column per series (unit in
    /// its heading); a gap is shown as "–".
    public func table() -> String {
        var out = ##"<table class="chart-data"><caption>\##(HTMLText.escaped(title))</caption><thead><tr><th scope="col">\##(HTMLText.escaped(axis.caption))</th>"##
        for item in series { out += ##"<th scope="col">\##(HTMLText.escaped(item.name)) (\##(HTMLText.escaped(item.unit)))</th>"## }
        out += "</tr></thead><tbody>"
        for (bucket, label) in axis.labels.enumerated() {
            out += ##"<tr><th scope="row">\##(HTMLText.escaped(label))</th>"##
            for item in series {
                let value = bucket < item.values.count ? item.values[bucket] : nil
                out += "<td>\(value.map { Self.number($0) + (Band.of($0, in: item.bands).map { " (\(HTMLText.escaped($0.label)))" } ?? "") } ?? "–")</td>"
            }
            out += "</tr>"
        }
        out += "</tbody>"
        let banded = series.filter { !$0.bands.isEmpty }
        if !banded.isEmpty {
            out += ##"<tfoot><tr><td colspan="\##(series.count + 1)">"##
            out += banded.map { item in "\(HTMLText.escaped(item.name)): " + item.bands.map { HTMLText.escaped(Self.bandText($0)) }.joined(separator: "; ") }
                .joined(separator: ". ")
            out += "</td></tr></tfoot>"
        }
        return out + "</table>"
    }

    /// The smallest 1, 2, 2.5 or 5 × 10ⁿ at or above `value` (1 for nothing to show).
    static func niceCeiling(_ value: Double) -> Double {
        guard value > 0, value.isFinite else { return 1 }
        let magnitude = pow(10, floor(log10(value)))
        return [1, 2, 2.5, 5, 10].map { $0 * magnitude }.first { $0 >= value * (1 - 1e-12) } ?? 10 * magnitude
    }

    /// The top of a count's axis: four equal whole steps (1, 2, 3, 5, 10 … each) reaching `value`,
    /// so that no marker reads 1.3 tasks.
    static func wholeCeiling(_ value: Double) -> Double {
        4 * max(1, niceCeiling(value / 4).rounded(.up))
    }

    /// A value as axis markers and tables show it: at most one decimal, none when whole.
    public static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        guard abs(rounded) < 1e15 else { return String(format: "%.3g", value) }
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(format: "%.1f", rounded)
    }

    static func coordinate(_ value: Double) -> String { String(format: "%.1f", value) }
}
