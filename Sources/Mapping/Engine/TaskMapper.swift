import CareStore
import FHIR
import FHIRPath
import Foundation

/// One item of a task rule becomes a CareKit task: its schedule from `timing` (what a CareKit
/// schedule cannot hold is reported as a loss), title, instructions, group, tags and targets,
/// then the site's words and HealthKit linkage from the file's tables.
struct TaskMapper {
    let rule: MappingRule
    let context: MappingContext

    /// The task, and whether its schedule starts at the rule's anchor (`MappedTask.startsAtAnchor`).
    func make(id: String, path: String?, record: SourceRecord, notes: inout MappingNotes) throws(FHIRPathError) -> (CareTask, startsAtAnchor: Bool)? {
        let fields = rule.fields, scope = context.scope, calendar = scope.calendar
        let anchor = try context.date(fields["anchor"]) ?? scope.today
        let asNeeded = try context.boolean(fields["as-needed"]) ?? false
        let targets = try targetValues(fields["targets"])
        let converter = TimingConverter(tables: context.file.tables.timing, timeZone: scope.timeZone)
        var scheduled: ScheduledTiming
        let timing = try context.evaluate(fields["timing"])
        let timingPath = [path, fields["timing"]?.text].compactMap { $0 }.joined(separator: " ")
        if asNeeded {
            scheduled = converter.asNeeded(start: anchor)
            if let first = timing.first, case .element(let e) = first, e.typeName == "Timing", R4.Timing(unchecked: e).repeat?.frequency != nil {
                notes.add(.loss, context.source, timingPath, "as needed: the Timing is read as the most allowed, not a schedule")
            }
        } else {
            scheduled = schedule(timing.first, anchor: anchor, converter: converter, targets: targets)
        }
        for loss in scheduled.losses { notes.add(.loss, context.source, "\(timingPath) \(loss.path)", loss.message) }
        if scheduled.elements.isEmpty {
            // Nothing to schedule (an unknown code, a one-off in the past): a daily all-day task, reported.
            notes.add(.loss, context.source, timingPath, "\(scheduled.unschedulable ?? "no schedule"): a daily task at any time instead")
            scheduled = ScheduledTiming(elements: [ScheduleElement(start: calendar.startOfDay(for: anchor), interval: DateComponents(day: 1), text: nil,
                                                                    duration: .allDay, targetValues: targets, calendar: calendar)], losses: [])
        }
        guard let schedule = scheduled.schedule else {
            notes.add(.error, context.source, path, "the schedule could not be built")
            return nil
        }
        var task = CareTask(id: id, title: try context.string(fields["title"]), carePlanUUID: nil, schedule: schedule,
                            impactsAdherence: try context.boolean(fields["impacts-adherence"]) ?? !asNeeded, timezone: scope.timeZone)
        task.instructions = try context.string(fields["instructions"])
        // From the first occurrence's day, so that recorded history (Observations) can attach.
        task.version.effectiveDate = calendar.startOfDay(for: schedule.startDate ?? anchor)
        task.version.groupIdentifier = try context.string(fields["group"])
        var tags: [String] = []
        for e in rule.lists["tags"] ?? [] { tags += try context.strings(e) }
        task.version.tags = tags.isEmpty ? nil : tags
        task.version.remoteID = record.reference
        task.version.userInfo = record.userInfo
        task.version.source = VersionInfo.importedFromEHR
        try applyTables(to: &task)
        return (task, !asNeeded && !Self.hasOwnStart(timing.first))
    }

    /// Whether a timing says where the schedule starts (a Timing's `repeat.boundsPeriod.start`,
    /// a Period's start, a dateTime) rather than leaving it to the anchor.
    static func hasOwnStart(_ timing: FHIRPathValue?) -> Bool {
        guard let timing, case .element(let e) = timing else { return false }
        switch e.typeName {
        case "Timing": return R4.Timing(unchecked: e).repeat?.boundsPeriod?.start != nil
        case "Period": return R4.Period(unchecked: e).start != nil
        case "dateTime": return true
        default: return false
        }
    }

    /// The site's words for the task's code (over what the expressions gave), and its HealthKit linkage.
    func applyTables(to task: inout CareTask) throws(FHIRPathError) {
        let tables = context.file.tables
        if let lookup = rule.lookups["code-table"] {
            for key in try context.strings(lookup.key) {
                guard let entry = tables.taskCodes[key] else { continue }
                if let title = entry.title { task.title = title }
                if let instructions = entry.instructions { task.instructions = instructions }
                if let group = entry.group { task.version.groupIdentifier = group }
                if let impacts = entry.impactsAdherence { task.impactsAdherence = impacts }
                break
            }
        }
        if let lookup = rule.lookups["healthkit"] {
            for key in try context.strings(lookup.key) {
                if let linkage = tables.healthKit[key] {
                    task.healthKitLinkage = linkage
                    break
                }
            }
        }
    }

    func targetValues(_ e: MappingExpression?) throws(FHIRPathError) -> [OutcomeValue] {
        try context.evaluate(e).compactMap { value in
            guard case .quantity(let q) = value.systemValue else { return nil }
            let unit = context.unitLabel(value, q)
            return OutcomeValue(.double(q.value.double), kind: nil, units: unit == "1" ? nil : unit, createdDate: context.scope.now)
        }
    }

    /// A schedule from what `timing` gave: a Timing, a Period, a string or a dateTime.
func schedule(_ value: FHIRPathValue?, anchor: Date, converter: TimingConverter, targets: [OutcomeValue]) -> ScheduledTiming {
    let calendar = context.scope.calendar, zone = context.scope.timeZone
        let allDay = { (start: Date, end: Date?, text: String?) -> ScheduleElement in
            ScheduleElement(start: calendar.startOfDay(for: start), end: end, interval: DateComponents(day: 1), text: text,
                            duration: .allDay, targetValues: targets, calendar: calendar)
        }
        guard let value else {
            return ScheduledTiming(elements: [allDay(anchor, nil, nil)], losses: [TimingLoss("timing", "no schedule given: once a day, at any time")])
        }
        if case .element(let e) = value, e.typeName == "Timing" {
            var result = converter.convert(R4.Timing(unchecked: e), anchor: anchor, targetValues: targets)
            if result.elements.isEmpty, result.unschedulable != nil {
                // Keep the code's text as the task's schedule text.
                let text = R4.Timing(unchecked: e).code?.text
                result.losses.append(TimingLoss("code", "\(result.unschedulable!): a daily task at any time\(text.map { " showing \"\($0)\"" } ?? "")"))
                result.elements = [allDay(anchor, nil, text)]
                result.unschedulable = nil
            }
            return result
        }
        if case .element(let e) = value, e.typeName == "Period" {
            // One occurrence whose window is the whole period (FHIR's end is inclusive: a
            // date-only end includes that day).
            let period = R4.Period(unchecked: e)
            let start = period.start.map { $0.precision == .second ? $0.start(in: zone) : calendar.startOfDay(for: $0.start(in: zone)) } ?? anchor
            guard let last = period.end else {
                return ScheduledTiming(elements: [allDay(start, nil, nil)], losses: [TimingLoss("timing", "a period without an end: once a day, at any time, from its start")])
            }
            let end = last.precision == .second ? last.start(in: zone).addingTimeInterval(1)
                : calendar.date(byAdding: .day, value: 1, to: calendar.startOfDay(for: last.start(in: zone)))!
            let element = ScheduleElement(start: start, end: start.addingTimeInterval(1), interval: DateComponents(day: 1),
                                          duration: .seconds(max(1, end.timeIntervalSince(start))), targetValues: targets, calendar: calendar)
            return ScheduledTiming(elements: [element], losses: [])
        }
        switch value.systemValue {
        case .string(let text):
            return ScheduledTiming(elements: [allDay(anchor, nil, text)], losses: [TimingLoss("timing", "a schedule in words (\"\(text)\"): a daily task at any time showing the text")])
        case .dateTime(let d), .date(let d):
            guard let at = FHIRDateTime(d.description)?.start(in: zone) else { break }
            let element = ScheduleElement(start: at, end: at.addingTimeInterval(1), interval: DateComponents(day: 1), duration: d.hasTime ? .hour : .allDay,
                                          targetValues: targets, calendar: calendar)
            return ScheduledTiming(elements: [element], losses: [])
        default:
            break
        }
        return ScheduledTiming(elements: [allDay(anchor, nil, nil)], losses: [TimingLoss("timing", "not a Timing, Period, string or dateTime: once a day, at any time")])
    }
}
