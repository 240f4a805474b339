import Foundation

/// The pages' tests run in New York's time zone, on days of November 2026.
let newYork = TimeZone(identifier: "America/New_York")!
var calendar: Calendar {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = newYork
    return calendar
}
func day(_ n: Int, hour: Int = 0) -> Date { calendar.date(from: DateComponents(year: 2026, month: 11, day: n, hour: hour))! }
func count(_ needle: String, in text: String) -> Int { text.components(separatedBy: needle).count - 1 }
