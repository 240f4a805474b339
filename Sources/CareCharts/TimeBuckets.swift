import Foundation

/// The time axis of a chart: days, consolidated into weeks or months when a range has more
/// points than a chart can show readably (CareKit's guidelines: keep the time unit visible, and
/// consolidate long ranges). Labels are short and the unit is named once, in `caption`.
///
/// ```swift
/// let axis = TimeBuckets(from: start, to: start.addingTimeInterval(90 * 86_400), calendar: calendar)
/// axis.unit      // .week: 90 days are more than 60 points
/// axis.labels    // ["Nov 2", "Nov 9", …]
/// ```
public struct TimeBuckets: Sendable, Equatable {
    public enum Unit: String, Sendable { case day, week, month }

    public let unit: Unit
    /// Where each bucket starts (local midnight), and where the last one ends.
    public let starts: [Date]
    public let end: Date
    /// One short marker per bucket: weekdays for a week or less of days, else dates or months.
    public let labels: [String]
    /// The unit, named once under the axis.
    public let caption: String
    let calendar: Calendar

    /// The days from the one holding `start` up to the one holding `end` (exclusive), as days
    /// while they are at most `maxPoints`, else weeks (starting on the calendar's first weekday)
    /// while those are, else months.
    public init(from start: Date, to end: Date, calendar: Calendar, maxPoints: Int = 60) {
        self.calendar = calendar
        let first = calendar.startOfDay(for: start)
        let days = max(1, calendar.dateComponents([.day], from: first, to: end).day ?? 1)
        let weekStart = calendar.dateInterval(of: .weekOfYear, for: first)?.start ?? first
        let weeks = ((calendar.dateComponents([.day], from: weekStart, to: end).day ?? 0) + 6) / 7
        let (unit, origin): (Unit, Date) = days <= maxPoints ? (.day, first)
            : weeks <= maxPoints ? (.week, weekStart)
            : (.month, calendar.dateInterval(of: .month, for: first)?.start ?? first)
        var starts: [Date] = []
        var next = origin
        while next < end || starts.isEmpty {
            starts.append(next)
            next = calendar.date(byAdding: unit.component, value: 1, to: next) ?? end
        }
        self.unit = unit
        self.starts = starts
        self.end = next
        self.labels = Self.labels(starts, unit: unit, calendar: calendar)
        self.caption = switch unit {
        case .day: "Day"
        case .week: "Week starting"
        case .month: "Month"
        }
    }

    /// The bucket holding `date`, if the axis covers it.
    public func index(of date: Date) -> Int? {
        guard let first = starts.first, date >= first, date < end else { return nil }
        return starts.lastIndex { $0 <= date }
    }

    /// Values per bucket: the mean (measurements, adherence) or the sum (counts) of the dated
    /// values each bucket holds; nil for a bucket with none (drawn as a gap, never as zero).
    public func consolidate(_ values: [(date: Date, value: Double)], _ rule: Consolidation) -> [Double?] {
        var sums = [Double](repeating: 0, count: starts.count)
        var counts = [Int](repeating: 0, count: starts.count)
        for (date, value) in values {
            guard let i = index(of: date) else { continue }
            sums[i] += value
            counts[i] += 1
        }
        return zip(sums, counts).map { sum, count in count == 0 ? nil : rule == .sum ? sum : sum / Double(count) }
    }

    public enum Consolidation: Sendable { case mean, sum }

    public static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]

    static func labels(_ starts: [Date], unit: Unit, calendar: Calendar) -> [String] {
        starts.enumerated().map { i, date in
            let c = calendar.dateComponents([.year, .month, .day, .weekday], from: date)
            let month = months[(c.month ?? 1) - 1]
            switch unit {
            case .day where starts.count <= 7: return weekdays[(c.weekday ?? 1) - 1]
            case .day, .week: return "\(month) \(c.day ?? 1)"
            case .month: return i == 0 || c.month == 1 ? "\(month) \(c.year ?? 0)" : month
            }
        }
    }
}

extension TimeBuckets.Unit {
    var component: Calendar.Component {
        switch self {
        case .day: .day
        case .week: .weekOfYear
        case .month: .month
        }
    }
}
