import CareStore
import FHIR
import Foundation
import Mapping

/// FHIR Timings (the JSON of one `Timing`) through the converter to CareKit schedules, in a time
/// zone the first byte picks. Whatever the numbers, the schedule stays within the documented
/// limits (`TimingLimits`): at most 48 occurrences a day per element, and a week of events is
/// computed without a crash.
public enum TimingHarness: FuzzHarness {
    public static let name = "timing"
    static let zones = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Kiritimati", "America/Santiago"]
        .map { TimeZone(identifier: $0)! }
    static let anchor = Date(timeIntervalSince1970: 1_793_000_000)

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let (selector, body) = input.selector
        let wrapped = Array(#"{"resourceType": "MedicationRequest", "status": "active", "intent": "order", "dosageInstruction": [{"timing": "#.utf8)
            + body + Array("}]}".utf8)
        guard let request = try? FHIRJSONReader(options: ParseOptions(lenient: true)).read(wrapped).resource,
              let view = try? R4.MedicationRequest(request), let timing = view.dosageInstruction.first?.timing else { return }
        let zone = zones[Int(selector) % zones.count]
        let scheduled = TimingConverter(timeZone: zone).convert(timing, anchor: anchor, text: "fuzz")
        guard let schedule = scheduled.schedule else { return }
        let start = schedule.startDate ?? anchor
        let week = schedule.events(from: start, to: start.addingTimeInterval(7 * 86_400))
        let bound = 7 * (TimingLimits.maximumPerDay + 1) * max(1, schedule.elements.count) * 2
        guard week.count <= max(bound, 7 * 86_400 / TimingLimits.shortestInterval * schedule.elements.count) else {
            throw PropertyFailure("a week of the schedule holds \(week.count) events from \(schedule.elements.count) elements")
        }
    }
}
