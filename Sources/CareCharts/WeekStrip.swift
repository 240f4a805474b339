import Foundation

/// The strip at the top of a CareKit app: one ring per day, filled by the share of that day's
/// events that are done, with the weekday under it. Each ring says in words what it shows.
///
/// ```swift
/// let strip = WeekStrip(days: [.init(label: "Mon", done: 3, due: 4), .init(label: "Tue", done: 0, due: 0)])
/// strip.svg(id: "week")   // a ring 3/4 full; Tuesday's ring is empty and says "nothing due"
/// ```
public struct WeekStrip: Sendable {
    public struct Day: Sendable {
        public var label: String
        public var done: Int
        public var due: Int
        public var isToday: Bool

        public init(label: String, done: Int, due: Int, isToday: Bool = false) {
            self.label = label
            self.done = done
            self.due = due
            self.isToday = isToday
        }

        /// The ring's fill, 0 to 1 (0 when nothing was due).
        public var completion: Double { due > 0 ? min(1, Double(done) / Double(due)) : 0 }

        /// What the ring says to a screen reader.
        public var summary: String { due > 0 ? "\(label): \(done) of \(due) done" : "\(label): nothing due" }
    }

    public var days: [Day]

    public init(days: [Day]) {
        self.days = days
    }

    static let radius = 16.0
    static var circumference: Double { 2 * Double.pi * radius }

    public func svg(id: String) -> String {
        let width = 48.0 * Double(days.count)
        var out = ##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \##(Int(width)) 64" role="img" aria-labelledby="\##(id)-title" class="week-strip">"##
        out += ##"<title id="\##(id)-title">\##(HTMLText.escaped(days.map(\.summary).joined(separator: "; ")))</title>"##
        for (i, day) in days.enumerated() {
            let cx = 24 + 48 * Double(i)
            let filled = Self.circumference * day.completion
            out += ##"<g class="ring" data-done="\##(day.done)" data-due="\##(day.due)">"##
            out += ##"<circle cx="\##(cx)" cy="22" r="\##(Self.radius)" fill="none" stroke="#e5e5ea" stroke-width="5"/>"##
            if filled > 0 {
                // Drawn from the top, clockwise, as CareKit's rings fill.
                out += ##"<circle class="ring-fill" cx="\##(cx)" cy="22" r="\##(Self.radius)" fill="none" stroke="#FF2D55" stroke-width="5" stroke-linecap="round" stroke-dasharray="\##(String(format: "%.2f", filled)) \##(String(format: "%.2f", Self.circumference))" transform="rotate(-90 \##(cx) 22)"/>"##
            }
            let weight = day.isToday ? "700" : "400"
            out += ##"<text x="\##(cx)" y="58" text-anchor="middle" font-size="11" font-weight="\##(weight)">\##(HTMLText.escaped(day.label))</text></g>"##
        }
        return out + "</svg>"
    }
}
