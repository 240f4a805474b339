import Foundation
import FHIR

/// A FHIRPath Date or DateTime with its precision: `@2014`, `@2014-01-25T14:30`, `@2014-01-25T14:30:14.559+10:00`.
/// Comparison follows the specification: values are compared component by component down to the
/// precision both have; when one is more precise and they agree so far, the result is unknown.
public struct PartialDateTime: Sendable, Hashable, CustomStringConvertible {
    /// How much of the value is given.
    public enum Precision: Int, Sendable, Comparable {
        /// From the year down to the millisecond.
        case year, month, day, hour, minute, second, millisecond
        public static func < (a: Precision, b: Precision) -> Bool { a.rawValue < b.rawValue }
    }

    /// The year.
    public var year: Int
    /// The month (1–12), when given.
    public var month: Int?
    /// The day, when given.
    public var day: Int?
    /// The hour, when given.
    public var hour: Int?
    /// The minute, when given.
    public var minute: Int?
    /// The second, when given.
    public var second: Int?
    /// Fraction-of-second digits as written (`559`), nil without a fraction.
    public var fraction: String?
    /// Minutes east of UTC, when a zone is given.
    public var offset: Int?
    /// Whether the text had a `T` (a DateTime rather than a Date).
    public var hasTime: Bool

    /// The finest part given.
    public var precision: Precision {
        if fraction != nil { return .millisecond }
        if second != nil { return .second }
        if minute != nil { return .minute }
        if hour != nil { return .hour }
        if day != nil { return .day }
        if month != nil { return .month }
        return .year
    }

    init(year: Int, month: Int? = nil, day: Int? = nil, hour: Int? = nil, minute: Int? = nil, second: Int? = nil,
         fraction: String? = nil, offset: Int? = nil, hasTime: Bool) {
        self.year = year; self.month = month; self.day = day; self.hour = hour; self.minute = minute
        self.second = second; self.fraction = fraction; self.offset = offset; self.hasTime = hasTime
    }

    /// Parses the text after `@` in a FHIRPath literal, or a FHIR date/dateTime/instant value.
    public init?(fhirPath text: String) {
        // Over the string's own bytes (no copy into an array: comparisons parse every operand).
        var text = text
        guard let value = text.withUTF8({ Self.parse($0) }) else { return nil }
        self = value
    }

    private static func parse(_ u: UnsafeBufferPointer<UInt8>) -> PartialDateTime? {
        var i = 0
        func number(_ count: Int) -> Int? {
            guard i + count <= u.count else { return nil }
            var n = 0
            for k in 0..<count {
                let b = u[i + k]
                guard b >= 0x30 && b <= 0x39 else { return nil }
                n = n * 10 + Int(b - 0x30)
            }
            i += count
            return n
        }
        func consume(_ b: UInt8) -> Bool {
            if i < u.count, u[i] == b { i += 1; return true }
            return false
        }
        guard let y = number(4) else { return nil }
        var value = PartialDateTime(year: y, hasTime: false)
        if consume(0x2D) {
            guard let m = number(2), (1...12).contains(m) else { return nil }
            value.month = m
            if consume(0x2D) {
                guard let d = number(2), d >= 1, d <= PartialDateTime.daysIn(month: m, year: y) else { return nil }
                value.day = d
            }
        }
        if consume(0x54) {
            value.hasTime = true
            if i < u.count, u[i] != 0x5A, u[i] != 0x2B, u[i] != 0x2D {
                guard let h = number(2), h < 24 else { return nil }
                value.hour = h
                if consume(0x3A) {
                    guard let mi = number(2), mi < 60 else { return nil }
                    value.minute = mi
                    if consume(0x3A) {
                        guard let s = number(2), s < 60 else { return nil }
                        value.second = s
                        if consume(0x2E) {
                            let start = i
                            while i < u.count, u[i] >= 0x30, u[i] <= 0x39 { i += 1 }
                            guard i > start else { return nil }
                            value.fraction = String(decoding: UnsafeBufferPointer(rebasing: u[start..<i]), as: UTF8.self)
                        }
                    }
                }
            }
            if consume(0x5A) {
                value.offset = 0
            } else if i < u.count, u[i] == 0x2B || u[i] == 0x2D {
                let sign = u[i] == 0x2D ? -1 : 1
                i += 1
                guard let oh = number(2), consume(0x3A), let om = number(2) else { return nil }
                value.offset = sign * (oh * 60 + om)
            }
        }
        guard i == u.count else { return nil }
        return value
    }

    static func isLeap(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a civil date (proleptic Gregorian).
    static func dayNumber(_ y: Int, _ m: Int, _ d: Int) -> Int {
        let yy = m <= 2 ? y - 1 : y
        let era = (yy >= 0 ? yy : yy - 399) / 400
        let yoe = yy - era * 400
        let mp = (m + 9) % 12
        let doy = (153 * mp + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day number.
    static func civil(_ n: Int) -> (year: Int, month: Int, day: Int) {
        FHIRDateTime.civilDate(daysSince1970: n)
    }

    /// Milliseconds of the fraction (first three digits).
    var milliseconds: Int {
        guard let fraction else { return 0 }
        var result = 0
        var digits = 0
        for byte in fraction.utf8.prefix(3) {
            result = result * 10 + Int(byte &- 0x30)
            digits += 1
        }
        for _ in digits..<3 { result *= 10 }
        return result
    }

    /// The same moment expressed in UTC (for values with a zone and at least an hour).
    func inUTC() -> PartialDateTime {
        guard let offset, offset != 0, let hour, let day, let month else { return self }
        var minutes = PartialDateTime.dayNumber(year, month, day) * 1440 + hour * 60 + (minute ?? 0) - offset
        let dayNumber = Int((Double(minutes) / 1440).rounded(.down))
        minutes -= dayNumber * 1440
        let date = PartialDateTime.civil(dayNumber)
        var result = self
        result.year = date.year; result.month = date.month; result.day = date.day
        result.hour = minutes / 60
        if self.minute != nil { result.minute = minutes % 60 }
        result.offset = 0
        return result
    }

    /// Whether two values with zones compare as written, without bringing both to UTC: the same
    /// zone moves both alike when both give the hour and the zone is whole hours (or both give
    /// the minute). Most comparisons in a resource are of this kind (a Period's start and end).
    private func shiftsAlike(_ other: PartialDateTime, offsets x: Int, _ y: Int) -> Bool {
        x == y && hour != nil && other.hour != nil && (x % 60 == 0 || (minute != nil && other.minute != nil))
    }

    /// -1, 0 or 1, or nil when the values differ in precision and agree up to the coarser one.
    /// Seconds and their fraction count as one precision, as the specification says.
    func compare(to other: PartialDateTime) -> Int? {
        var a = self, b = other
        if let x = a.offset, let y = b.offset, !a.shiftsAlike(b, offsets: x, y) { a = a.inUTC(); b = b.inUTC() }
        // One with a zone and one without, both with a time: the instant of the second is unknown.
        if (a.offset == nil) != (b.offset == nil), a.hour != nil, b.hour != nil { return nil }
        // Part by part from the year, as far as both go (no arrays: this runs per comparison).
        func part(_ value: PartialDateTime, _ k: Int) -> Int? {
            switch k {
            case 0: value.year
            case 1: value.month
            case 2: value.day
            case 3: value.hour
            case 4: value.minute
            default: value.second.map { $0 * 1000 + value.milliseconds }
            }
        }
        for k in 0..<6 {
            switch (part(a, k), part(b, k)) {
            case let (x?, y?):
                if x != y { return x < y ? -1 : 1 }
            case (nil, nil):
                return 0
            default:
                return nil
            }
        }
        return 0
    }

    /// Adds a calendar duration (`year`, `month`, `week`, `day`, `hour`, `minute`, `second`,
    /// `millisecond`, or UCUM's definite ones); nil for a unit that is not a time.
    func adding(_ amount: FHIRPathDecimal, unit: String) -> PartialDateTime? {
        guard let unit = CalendarUnit(arithmetic: unit) else { return nil }
        var result = self
        var amount = amount
        // Seconds count whole; fractions of a second need the millisecond unit.
        if unit == .second { amount = amount.value < 0 ? amount.rounded(0, .up) : amount.rounded(0, .down) }
        // FHIRPath dates stop at year 9999: an amount of more than 10,000 years in any unit gives
        // nil (and so empty), never a wrapped value. Magnitudes, since abs(Int.min) traps.
        guard let whole = amount.rounded(0, .down).integer, whole.magnitude <= unit.inTenThousandYears.magnitude else { return nil }
        switch unit {
        case .year:
            result.year += whole
            if let m = result.month, let d = result.day { result.day = min(d, PartialDateTime.daysIn(month: m, year: result.year)) }
        case .month:
            guard let month else { result.year += whole / 12; return result }
            let total = (year * 12 + month - 1) + whole
            result.year = Int((Double(total) / 12).rounded(.down))
            result.month = total - result.year * 12 + 1
            if let d = result.day { result.day = min(d, PartialDateTime.daysIn(month: result.month!, year: result.year)) }
        case .week, .day:
            let days = unit == .week ? whole * 7 : whole
            guard let month, let day else { return result }
            let date = PartialDateTime.civil(PartialDateTime.dayNumber(year, month, day) + days)
            result.year = date.year; result.month = date.month; result.day = date.day
        case .hour, .minute, .second, .millisecond:
            guard let month, let day, let hour else { return result }
            let factor: Decimal = switch unit {
            case .hour: 3_600_000
            case .minute: 60_000
            case .second: 1000
            default: 1
            }
            guard let deltaMs = FHIRPathDecimal.checked(amount.value, factor, NSDecimalMultiply).flatMap({ FHIRPathDecimal($0, scale: 0).rounded(0, .down).integer }),
                  deltaMs.magnitude <= CalendarUnit.millisecond.inTenThousandYears.magnitude else { return nil }
            var ms = ((PartialDateTime.dayNumber(year, month, day) * 24 + hour) * 60 + (minute ?? 0)) * 60_000
                + (second ?? 0) * 1000 + milliseconds + deltaMs
            let dayNumber = Int((Double(ms) / 86_400_000).rounded(.down))
            ms -= dayNumber * 86_400_000
            let date = PartialDateTime.civil(dayNumber)
            result.year = date.year; result.month = date.month; result.day = date.day
            result.hour = ms / 3_600_000
            if minute != nil { result.minute = (ms / 60_000) % 60 }
            if second != nil { result.second = (ms / 1000) % 60 }
            if let fraction {
                let millis = String(ms % 1000)
                result.fraction = String(repeating: "0", count: 3 - millis.count) + millis
                if fraction.count > 3 { result.fraction! += String(repeating: "0", count: fraction.count - 3) }
            }
        }
        return (1...9999).contains(result.year) ? result : nil
    }

    /// The ISO 8601 text, written into one buffer (`toString()` on a FHIR dateTime, as `vs-1`
    /// asks of every vital sign, writes it).
    public var description: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(32 + (fraction?.utf8.count ?? 0))
        func pad(_ n: Int, _ width: Int) {
            let start = bytes.count
            var n = n
            repeat { bytes.append(UInt8(ascii: "0") + UInt8(n % 10)); n /= 10 } while n > 0
            while bytes.count - start < width { bytes.append(UInt8(ascii: "0")) }
            bytes[start...].reverse()
        }
        pad(year, 4)
        if let month { bytes.append(UInt8(ascii: "-")); pad(month, 2) }
        if let day { bytes.append(UInt8(ascii: "-")); pad(day, 2) }
        if hasTime {
            bytes.append(UInt8(ascii: "T"))
            if let hour { pad(hour, 2) }
            if let minute { bytes.append(UInt8(ascii: ":")); pad(minute, 2) }
            if let second { bytes.append(UInt8(ascii: ":")); pad(second, 2) }
            if let fraction { bytes.append(UInt8(ascii: ".")); bytes.append(contentsOf: fraction.utf8) }
            if let offset {
                if offset == 0 { bytes.append(UInt8(ascii: "Z")) } else {
                    bytes.append(UInt8(ascii: offset < 0 ? "-" : "+"))
                    pad(abs(offset) / 60, 2)
                    bytes.append(UInt8(ascii: ":"))
                    pad(abs(offset) % 60, 2)
                }
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// A FHIRPath Time: `@T14`, `@T14:30:14.559`.
public struct PartialTime: Sendable, Hashable, CustomStringConvertible {
    /// The hour.
    public var hour: Int
    /// The minute, when given.
    public var minute: Int?
    /// The second, when given.
    public var second: Int?
    /// Fraction-of-second digits as written, nil without a fraction.
    public var fraction: String?

    /// A time from its text (`14:30`, without the `@T`); nil when it is not one.
    public init?(_ text: String) {
        guard let parsed = PartialDateTime(fhirPath: "2000-01-01T" + text), let hour = parsed.hour, parsed.offset == nil else { return nil }
        self.hour = hour
        minute = parsed.minute
        second = parsed.second
        fraction = parsed.fraction
    }

    var asDateTime: PartialDateTime {
        PartialDateTime(year: 2000, month: 1, day: 1, hour: hour, minute: minute, second: second, fraction: fraction, hasTime: true)
    }

    func compare(to other: PartialTime) -> Int? { asDateTime.compare(to: other.asDateTime) }

    func adding(_ amount: FHIRPathDecimal, unit: String) -> PartialTime? {
        guard let unit = CalendarUnit(arithmetic: unit), [.hour, .minute, .second, .millisecond].contains(unit),
              let moved = asDateTime.adding(amount, unit: unit.rawValue) else { return nil }
        var result = self
        result.hour = moved.hour!; result.minute = moved.minute; result.second = moved.second; result.fraction = moved.fraction
        return result
    }

    public var description: String {
        func pad(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        var s = pad(hour)
        if let minute { s += ":" + pad(minute) }
        if let second { s += ":" + pad(second) }
        if let fraction { s += "." + fraction }
        return s
    }
}

/// Time units usable in date arithmetic: FHIRPath's calendar keywords and UCUM's definite durations.
enum CalendarUnit: String, Sendable {
    case year, month, week, day, hour, minute, second, millisecond

    init?(_ unit: String) {
        switch unit {
        case "year", "years", "a": self = .year
        case "month", "months", "mo": self = .month
        case "week", "weeks", "wk": self = .week
        case "day", "days", "d": self = .day
        case "hour", "hours", "h": self = .hour
        case "minute", "minutes", "min": self = .minute
        case "second", "seconds", "s": self = .second
        case "millisecond", "milliseconds", "ms": self = .millisecond
        default: return nil
        }
    }

    /// A unit date arithmetic takes: UCUM's `a` and `mo` are fixed lengths (365.25 and 30.4375
    /// days), not calendar years and months, so adding them to a date is an error, as the
    /// specification says.
    init?(arithmetic unit: String) {
        guard unit != "a", unit != "mo" else { return nil }
        self.init(unit)
    }

    /// How many of this unit make 10,000 years (the span of FHIRPath's dates), rounded up.
    var inTenThousandYears: Int {
        switch self {
        case .year: 10_000
        case .month: 120_000
        case .week: 521_775
        case .day: 3_652_425
        case .hour: 87_658_200
        case .minute: 5_259_492_000
        case .second: 315_569_520_000
        case .millisecond: 315_569_520_000_000
        }
    }
}
