/// The site's choices FHIR leaves open: clock times for meal and sleep events (`when`), what
/// `Timing.code` abbreviations mean, and where "n times a week" falls. Mapping files override
/// any entry; `standard` holds the shipped defaults.
public struct TimingTables: Sendable, Hashable {
    /// Clock times (minutes after local midnight) for EventTiming codes: `ACM` (before breakfast)
    /// → 07:30, `HS` (before sleep) → 21:30.
    public var eventTimes: [String: Int]
    /// The rule each `Timing.code` abbreviation stands for (`BID` → 08:00 and 20:00 daily).
    public var codes: [String: TimingRule]
    /// Weekdays (1 = Sunday ... 7 = Saturday) for `frequency` n per week without `dayOfWeek`.
    public var weeklyDays: [Int: [Int]]

    /// Tables as given.
    public init(eventTimes: [String: Int], codes: [String: TimingRule], weeklyDays: [Int: [Int]]) {
        self.eventTimes = eventTimes
        self.codes = codes
        self.weeklyDays = weeklyDays
    }

    /// A clock time as minutes after midnight (`"07:30"` → 450).
    public static func minutes(_ clock: String) -> Int? {
        let parts = clock.split(separator: ":")
        guard parts.count >= 2, let h = Int(parts[0]), let m = Int(parts[1]), (0..<24).contains(h), (0..<60).contains(m) else { return nil }
        return h * 60 + m
    }

    /// The shipped defaults: meal times 07:30, 12:30 and 18:30, waking 07:00, sleep 22:00.
    public static let standard: TimingTables = {
        let t: (String) -> Int = { minutes($0)! }
        let events: [String: Int] = [
            // http://hl7.org/fhir/event-timing
            "MORN": t("08:00"), "MORN.early": t("07:00"), "MORN.late": t("10:00"),
            "NOON": t("12:00"),
            "AFT": t("15:00"), "AFT.early": t("13:00"), "AFT.late": t("16:00"),
            "EVE": t("18:00"), "EVE.early": t("17:00"), "EVE.late": t("20:00"),
            "NIGHT": t("21:00"), "PHS": t("23:00"),
            // http://terminology.hl7.org/CodeSystem/v3-TimingEvent
            "HS": t("22:00"), "WAKE": t("07:00"),
            "C": t("12:30"), "CM": t("07:30"), "CD": t("12:30"), "CV": t("18:30"),
            "AC": t("12:30"), "ACM": t("07:30"), "ACD": t("12:30"), "ACV": t("18:30"),
            "PC": t("12:30"), "PCM": t("07:30"), "PCD": t("12:30"), "PCV": t("18:30"),
        ]
        func daily(_ times: [String], every days: Int = 1) -> TimingRule {
            TimingRule(period: 1 * Double(days), periodUnit: "d", timesOfDay: times.map(t))
        }
        let codes: [String: TimingRule] = [
            "QD": daily(["08:00"]), "AM": daily(["08:00"]), "PM": daily(["18:00"]), "BED": daily(["21:00"]),
            "BID": daily(["08:00", "20:00"]), "TID": daily(["08:00", "14:00", "20:00"]),
            "QID": daily(["08:00", "12:00", "16:00", "20:00"]), "QOD": daily(["08:00"], every: 2),
            "Q1H": TimingRule(period: 1, periodUnit: "h"), "Q2H": TimingRule(period: 2, periodUnit: "h"),
            "Q3H": TimingRule(period: 3, periodUnit: "h"), "Q4H": TimingRule(period: 4, periodUnit: "h"),
            "Q6H": TimingRule(period: 6, periodUnit: "h"), "Q8H": TimingRule(period: 8, periodUnit: "h"),
            "WK": TimingRule(period: 1, periodUnit: "wk", timesOfDay: [t("08:00")]),
            "MO": TimingRule(period: 1, periodUnit: "mo", timesOfDay: [t("08:00")]),
            "JB": TimingRule(period: 1, periodUnit: "wk", timesOfDay: [t("08:00")], daysOfWeek: [2, 3, 4, 5, 6]),
            "JE": TimingRule(period: 1, periodUnit: "wk", timesOfDay: [t("08:00")], daysOfWeek: [1, 7]),
        ]
        let weekly: [Int: [Int]] = [
            1: [2], 2: [2, 5], 3: [2, 4, 6], 4: [2, 3, 5, 6], 5: [2, 3, 4, 5, 6], 6: [2, 3, 4, 5, 6, 7], 7: [1, 2, 3, 4, 5, 6, 7],
        ]
        return TimingTables(eventTimes: events, codes: codes, weeklyDays: weekly)
    }()

    /// Whether an EventTiming code's offset counts backwards (before meals, before sleep).
    static func offsetIsBefore(_ code: String) -> Bool {
        code.hasPrefix("AC") || code == "HS"
    }

    /// Meal codes that take no offset (tim-9).
    static let mealCodes: Set<String> = ["C", "CM", "CD", "CV"]
}

/// A Timing's rule reduced to what a schedule needs: `frequency` times per `period` of
/// `periodUnit`, at `timesOfDay` (minutes after midnight, patient's zone) and on `daysOfWeek`
/// (1 = Sunday). Used for `Timing.code` table entries and as the converter's working form.
public struct TimingRule: Sendable, Hashable {
    /// How many times per period.
    public var frequency: Int
    /// The period's length, in `periodUnit`.
    public var period: Double
    /// UCUM time unit: `s`, `min`, `h`, `d`, `wk`, `mo`, `a`.
    public var periodUnit: String
    /// Clock times, in minutes after midnight.
    public var timesOfDay: [Int]
    /// Weekdays, 1 = Sunday.
    public var daysOfWeek: [Int]

    /// A rule; the default is once a day.
    public init(frequency: Int = 1, period: Double = 1, periodUnit: String = "d", timesOfDay: [Int] = [], daysOfWeek: [Int] = []) {
        self.frequency = frequency
        self.period = period
        self.periodUnit = periodUnit
        self.timesOfDay = timesOfDay
        self.daysOfWeek = daysOfWeek
    }

    /// Seconds in one UCUM time unit (calendar units as their usual length, for durations).
    static func seconds(in unit: String) -> Double? {
        switch unit {
        case "s": 1
        case "min": 60
        case "h": 3600
        case "d": 86_400
        case "wk": 604_800
        case "mo": 2_629_800
        case "a": 31_557_600
        default: nil
        }
    }
}
