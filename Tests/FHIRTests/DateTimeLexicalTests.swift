import FHIR
import Foundation
import Testing

@Suite("dateTime and instant from a Date")
struct DateTimeLexicalTests {
    @Test("equals Foundation's ISO 8601 formatter for 20,000 instants from 1900 to 2199 in zones with DST, half-hour and negative offsets",
          arguments: ["America/New_York", "UTC", "Asia/Kolkata", "Australia/Lord_Howe", "Europe/London", "Pacific/Chatham", "America/St_Johns"])
    func matchesFoundation(zone: String) throws {
        let timeZone = try #require(TimeZone(identifier: zone))
        let plain = ISO8601DateFormatter()
        plain.timeZone = timeZone
        plain.formatOptions = [.withInternetDateTime]
        let fractional = ISO8601DateFormatter()
        fractional.timeZone = timeZone
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        let low = -2_208_988_800.0  // 1900-01-01
        let high = 7_258_118_400.0  // 2200-01-01
        for i in 0..<20_000 {
            // Whole milliseconds, as Foundation's formatter rounds what lies between them differently.
            let seconds = i < 10 ? [low, 0, 951_782_400, 1_793_671_200, 1_793_674_800, -1, 86_399.999, high - 1, 1_772_924_400, 1_762_063_200][i]
                : (Double.random(in: low..<high, using: &generator) * 1000).rounded(.down) / 1000
            let date = Date(timeIntervalSince1970: seconds)
            if timeZone.secondsFromGMT(for: date) % 60 != 0 {
                // Foundation writes a local mean time's offset with seconds, which FHIR does not allow;
                // ours has minutes only, and still names the same instant.
                let ours = FHIRDateTime.lexical(date, in: timeZone, fractionalSeconds: true)
                #expect(ours.range(of: #"[+-]\d\d:\d\d$"#, options: .regularExpression) != nil, "\(ours)")
                #expect(abs((ISO8601DateFormatter.fractional.date(from: ours)?.timeIntervalSince1970 ?? 0) - seconds) < 0.0005, "\(ours)")
                continue
            }
            #expect(FHIRDateTime.lexical(date, in: timeZone) == plain.string(from: date), "\(seconds)")
            #expect(FHIRDateTime.lexical(date, in: timeZone, fractionalSeconds: true) == fractional.string(from: date), "\(seconds)")
        }
    }
}

extension ISO8601DateFormatter {
    static var fractional: ISO8601DateFormatter {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f
    }

    @Test("a date read and written again is the same date, before the Gregorian reform too (found by fuzzing: 1013-11-29 came back 1013-12-05)")
    func proleptic() throws {
        for zone in ["America/New_York", "Asia/Kolkata", "UTC"].compactMap(TimeZone.init(identifier:)) {
            for text in ["0001-01-01", "1013-11-29", "1582-10-04", "1582-10-10", "1582-10-15", "1583-01-01", "1900-03-01", "2026-03-08", "2026-11-01"] {
                let read = try #require(FHIRDateTime(text)).start(in: zone)
                #expect(FHIRDateTime.lexical(read, in: zone).prefix(10) == text, "\(text) in \(zone.identifier)")
            }
        }
        for n in stride(from: -800_000, through: 800_000, by: 997) {
            let (y, m, d) = FHIRDateTime.civilDate(daysSince1970: n)
            #expect(FHIRDateTime.daysSince1970(year: y, month: m, day: d) == n)
        }
    }
}
