/// A chart over a time axis in the manner of CareKit's `OCKCartesianChartView`: bar, line or
/// scatter series, a title and subtitle, the time unit under the axis, each unit named once on its
/// value axis, a target range drawn as a band behind its series, and a score's labelled bands
/// (a PHQ-9's "Mild" to "Severe") behind it, marked on its axis. Series of very different
/// size are never drawn on one scale: a second scale goes on a right-hand axis, and a chart
/// whose series need more than two scales is split (`separated()`).
///
/// ```swift
/// var chart = CartesianChart(title: "Medication and pain", subtitle: "Doses taken per day against the pain score",
///                            axis: TimeBuckets(from: start, to: end, calendar: calendar))
/// chart.series = [.init(name: "Doses", unit: "doses", style: .bar, values: doses),
///                 .init(name: "Pain", unit: "score", style: .line, values: pain, target: 0...3)]
/// let html = chart.svg() + chart.table()
/// ```
public struct CartesianChart: Sendable {
    public enum Style: String, Sendable { case bar, line, scatter }

    public struct Series: Sendable {
        public var name: String
        /// Named once, on the series' value axis (never on every point).
        public var unit: String
        public var style: Style
        /// One value per time bucket; nil is a gap (no data), never drawn as zero.
        public var values: [Double?]
        /// Where the values should be (a clinician's target), drawn as a band.
        public var target: ClosedRange<Double>?
        /// A count (tasks done): its axis is marked in whole numbers.
        public var counts: Bool
        /// How the values read (a score's severity bands), lowest first; the axis is marked at
        /// their edges and reaches the top one.
        public var bands: [Band]

        public init(name: String, unit: String, style: Style, values: [Double?], target: ClosedRange<Double>? = nil, counts: Bool = false,
                    bands: [Band] = []) {
            self.name = name
            self.unit = unit
            self.style = style
            self.values = values
            self.target = target
            self.counts = counts
            self.bands = bands.sorted { $0.range.lowerBound < $1.range.lowerBound }
        }

        /// The largest value, target bound or band top: what the series' scale must reach.
        var peak: Double {
            max(values.compactMap { $0 }.max() ?? 0, target?.upperBound ?? 0, bands.last?.range.upperBound ?? 0)
        }
    }

    /// A labelled range of values: what a score between its bounds means.
    public struct Band: Sendable, Equatable {
        public var label: String
        /// Inclusive at both ends, as scores' bands are written (0–4, 5–9).
        public var range: ClosedRange<Double>

        public init(label: String, range: ClosedRange<Double>) {
            self.label = label
            self.range = range
        }

        /// The band among `bands` a value falls in; a value between two whole-number bands (a
        /// mean of 4.5 between 0–4 and 5–9) falls in the lower.
        public static func of(_ value: Double, in bands: [Band]) -> Band? {
            bands.last { $0.range.contains(value) } ?? bands.last { $0.range.lowerBound <= value && value < $0.range.upperBound + 1 }
        }
    }

    public var title: String
    public var subtitle: String
    public var axis: TimeBuckets
    public var series: [Series] = []

    public init(title: String, subtitle: String, axis: TimeBuckets, series: [Series] = []) {
        self.title = title
        self.subtitle = subtitle
        self.axis = axis
        self.series = series
    }

    /// Series share a scale when they have the same unit and peaks within a factor of 10 of
    /// each other (a weight in kg beside a step count would lie flat on the floor otherwise).
    static func shareScale(_ a: Series, _ b: Series) -> Bool {
        guard a.unit == b.unit else { return false }
        let (low, high) = (min(a.peak, b.peak), max(a.peak, b.peak))
        return high <= 0 || (low > 0 && high / low <= 10)
    }

    /// The scales: groups of series indexes, in order of first appearance.
    public var scales: [[Int]] {
        var groups: [[Int]] = []
        for (i, candidate) in series.enumerated() {
            if let g = groups.firstIndex(where: { Self.shareScale(series[$0[0]], candidate) }) { groups[g].append(i) } else { groups.append([i]) }
        }
        return groups
    }

    /// This chart as charts of at most two scales each (left and right axes), same title
    /// numbered when split: series that cannot share are never flattened onto one scale.
    public func separated() -> [CartesianChart] {
        let groups = scales
        guard groups.count > 2 else { return [self] }
        return stride(from: 0, to: groups.count, by: 2).enumerated().map { n, start in
            var part = self
            part.title = "\(title) (\(n + 1) of \((groups.count + 1) / 2))"
            part.series = groups[start..<min(start + 2, groups.count)].flatMap { $0.map { series[$0] } }
            return part
        }
    }
}
