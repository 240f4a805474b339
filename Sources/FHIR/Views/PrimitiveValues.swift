import Foundation

/// A FHIR decimal: the lexical form is the value (`1.50` is not `1.5`), with exact arithmetic
/// through Foundation's `Decimal` when needed.
public struct FHIRDecimal: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The decimal as written.
    public let lexical: String

    /// A decimal from its lexical form, or nil when it is not a valid FHIR decimal.
    public init?(_ lexical: String) {
        guard PrimitiveKind.decimal.isValid(lexical) else { return nil }
        self.lexical = lexical
    }

    public init(stringLiteral value: String) {
        precondition(PrimitiveKind.decimal.isValid(value), "not a FHIR decimal: \(value)")
        lexical = value
    }

    /// A decimal from an integer.
    public init(_ value: Int) { lexical = String(value) }

    /// The exact value.
    public var decimal: Decimal { Decimal(string: lexical, locale: Locale(identifier: "en_US_POSIX")) ?? 0 }
    /// The value as a Double (may round).
    public var double: Double { Double(lexical) ?? 0 }
    public var description: String { lexical }
}

/// A FHIR date, dateTime or instant: year, optionally month and day, optionally a time with an
/// offset, with its precision kept (`2026`, `2026-11`, `2026-11-21T08:00:00-05:00`).
public struct FHIRDateTime: Sendable, Hashable, CustomStringConvertible, Comparable {
    /// How much of the value is given.
    public enum Precision: Int, Sendable, Comparable {
        /// A year, a month, a day, or a time to the second.
        case year, month, day, second
        public static func < (a: Precision, b: Precision) -> Bool { a.rawValue < b.rawValue }
    }

    /// The value as written.
    public let lexical: String
    /// The year.
    public let year: Int
    /// The month (1–12), when given.
    public let month: Int?
    /// The day of the month, when given.
    public let day: Int?
    /// The hour, when a time is given.
    public let hour: Int?
    /// The minute, when a time is given.
    public let minute: Int?
    /// Seconds with any fraction.
    public let second: Double?
    /// The offset from UTC in seconds, when a time is given.
    public let utcOffset: Int?

    /// How much of the value is given.
    public var precision: Precision {
        hour != nil ? .second : day != nil ? .day : month != nil ? .month : .year
    }

    /// Parses a date, dateTime or instant in FHIR's lexical form; nil when invalid.
    public init?(_ lexical: String) {
        guard PrimitiveKind.dateTime.isValid(lexical) else { return nil }
        self.lexical = lexical
        let u = Array(lexical.utf8)
        func number(_ range: Range<Int>) -> Int { u[range].reduce(0) { $0 * 10 + Int($1 - 48) } }
        year = number(0..<4)
        month = u.count >= 7 ? number(5..<7) : nil
        day = u.count >= 10 ? number(8..<10) : nil
        if u.count > 10 {
            hour = number(11..<13)
            minute = number(14..<16)
            var end = 19
            while end < u.count, u[end] == 0x2E || (u[end] >= 0x30 && u[end] <= 0x39) { end += 1 }
            second = Double(String(decoding: u[17..<end], as: UTF8.self))
            if u[end] == 0x5A {
                utcOffset = 0
            } else {
                let sign = u[end] == 0x2D ? -1 : 1
                utcOffset = sign * (number((end + 1)..<(end + 3)) * 3600 + number((end + 4)..<(end + 6)) * 60)
            }
        } else {
            hour = nil; minute = nil; second = nil; utcOffset = nil
        }
    }

    /// The instant this value starts at; values without a time start at midnight in `timeZone`
    /// (the patient's zone, for dates).
    public func start(in timeZone: TimeZone) -> Date {
        var components = DateComponents()
        components.year = year
        components.month = month ?? 1
        components.day = day ?? 1
        components.hour = hour ?? 0
        components.minute = minute ?? 0
        let whole = second.map { Int($0) } ?? 0
        components.second = whole
        let zone = utcOffset.flatMap { TimeZone(secondsFromGMT: $0) } ?? timeZone
        // Foundation's Gregorian calendar counts days before 15 October 1582 as Julian; FHIR's
        // dates (and `lexical`) are proleptic Gregorian. Those days are counted here, where no
        // zone has daylight saving: the zone's offset then is fixed.
        if year < 1583 {
            let local = Double(Self.daysSince1970(year: year, month: month ?? 1, day: day ?? 1) * 86_400 + (hour ?? 0) * 3600 + (minute ?? 0) * 60) + (second ?? 0)
            return Date(timeIntervalSince1970: local - Double(zone.secondsFromGMT(for: Date(timeIntervalSince1970: local)) / 60 * 60))
        }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let date = calendar.date(from: components) ?? Date(timeIntervalSince1970: 0)
        // A local mean time's seconds (+05:53:28) are dropped, as `lexical` writes the offset.
        let dropped = zone.secondsFromGMT(for: date) % 60
        return date.addingTimeInterval((second ?? 0) - Double(whole) + Double(dropped))
    }

    public var description: String { lexical }

    /// Orders by start instant (in UTC for values without a zone), then by precision.
    public static func < (a: FHIRDateTime, b: FHIRDateTime) -> Bool {
        let utc = TimeZone(identifier: "UTC")!
        let (x, y) = (a.start(in: utc), b.start(in: utc))
        return x != y ? x < y : a.precision < b.precision
    }
}

/// A FHIR time of day (`08:00:00`, `17:30:00.5`), which has no zone.
public struct FHIRTime: Sendable, Hashable, CustomStringConvertible {
    /// The value as written.
    public let lexical: String
    /// The hour (0–23).
    public let hour: Int
    /// The minute.
    public let minute: Int
    /// Seconds with any fraction.
    public let second: Double

    /// A time from its lexical form; nil when it is not a FHIR time.
    public init?(_ lexical: String) {
        guard PrimitiveKind.time.isValid(lexical) else { return nil }
        self.lexical = lexical
        let parts = lexical.split(separator: ":")
        hour = Int(parts[0])!
        minute = Int(parts[1])!
        second = Double(parts[2])!
    }

    /// Seconds since midnight.
    public var secondsSinceMidnight: Double { Double(hour * 3600 + minute * 60) + second }
    public var description: String { lexical }
}

extension FHIRDateTime {
    /// The proleptic Gregorian date of a day number (days since 1970-01-01), by civil-date
    /// arithmetic rather than a `Calendar` lookup.
    public static func civilDate(daysSince1970 n: Int) -> (year: Int, month: Int, day: Int) {
        let z = n + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The day number (days since 1970-01-01) of a proleptic Gregorian date: `civilDate` backwards.
    public static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The lexical dateTime (or, with `fractionalSeconds`, instant) of `date` as clock time in
    /// `timeZone` with its offset (`2026-11-03T21:00:00-05:00`; `Z` when the offset is zero).
    /// Rounded to the millisecond. Computed without a formatter: exports write one per value.
    public static func lexical(_ date: Date, in timeZone: TimeZone, fractionalSeconds: Bool = false) -> String {
        // To the nearest millisecond: a Date keeps .999 as .99899995...
        let millis = Int((date.timeIntervalSince1970 * 1000).rounded())
        var whole = millis / 1000
        var fraction = millis % 1000
        if fraction < 0 { fraction += 1000; whole -= 1 }
        // FHIR offsets are hours and minutes: a local mean time such as +05:21:10 (before 1906)
        // becomes +05:21, with the clock time to match, so the instant stays the same.
        let offset = timeZone.secondsFromGMT(for: date) / 60 * 60
        let local = whole + offset
        var days = local / 86_400
        var seconds = local % 86_400
        if seconds < 0 { seconds += 86_400; days -= 1 }
        let (year, month, day) = civilDate(daysSince1970: days)

        var out = ""
        out.reserveCapacity(29)
        func pad(_ n: Int, _ width: Int) {
            let s = String(n)
            if s.count < width { out += String(repeating: "0", count: width - s.count) }
            out += s
        }
        pad(year, 4); out += "-"; pad(month, 2); out += "-"; pad(day, 2); out += "T"
        pad(seconds / 3600, 2); out += ":"; pad(seconds / 60 % 60, 2); out += ":"; pad(seconds % 60, 2)
        if fractionalSeconds {
            out += "."
            pad(fraction, 3)
        }
        if offset == 0 {
            out += "Z"
        } else {
            out += offset < 0 ? "-" : "+"
            pad(abs(offset) / 3600, 2); out += ":"; pad(abs(offset) / 60 % 60, 2)
        }
        return out
    }
}
