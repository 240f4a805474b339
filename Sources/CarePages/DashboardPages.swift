import CareCharts
import CareStore
import Foundation
import JSON

/// The dashboard's pages as HTML, from `PatientOverview`, `PatientDashboard` and `OutboxOverview`. Every string from the store
/// (names, titles, values, errors from the EHR) is escaped where it is written.
public struct DashboardPages: Sendable {
    public let frame: DashboardFrame
    public let calendar: Calendar

    public init(frame: DashboardFrame, calendar: Calendar) {
        self.frame = frame
        self.calendar = calendar
    }

    // MARK: Patients

    /// One page of the patient list, with links to the pages before and after it.
    public func patients(_ list: PatientListPage) -> String {
        let rows = list.rows
        let head = ["Patient", "Plans", "Tasks", "Adherence, 7 days", "Adherence, 30 days", "Devices", "Last sync", "Last push"]
        let body = rows.map { row in
            [link("/ui/patients/\(Self.pathSegment(row.patient.id))", row.patient.name.displayName), String(row.plans), String(row.tasks),
             Self.percent(row.last7Days), Self.percent(row.last30Days), String(row.devices), esc(row.lastSync.map(dateTime) ?? "never"),
             esc(row.lastPush.map(dateTime) ?? "none in 30 days")]
        }
        let first = (list.number - 1) * list.size + 1
        let caption = list.pages == 1 ? "\(list.total) patient\(list.total == 1 ? "" : "s")"
            : "Patients \(first)–\(first + rows.count - 1) of \(list.total)"
        let table = Self.table(caption: caption, head: head, rows: body, id: "patients")
        var pager: [String] = []
        if list.number > 1 { pager.append(link("/ui?page=\(list.number - 1)", "← Previous")) }
        if list.number < list.pages { pager.append(link("/ui?page=\(list.number + 1)", "Next →")) }
        let nav = pager.isEmpty ? "" : "<nav class=\"pager\">Page \(list.number) of \(list.pages) · \(pager.joined(separator: " · "))</nav>"
        return frame.page(title: "Patients", section: .patients, body: section(nil, rows.isEmpty ? "<p>No patients yet: import a care plan first.</p>" : table + nav))
    }

    // MARK: A patient

    /// A patient's page, its days and times in the patient's time zone (`page.calendar`).
    public func patient(_ page: PatientDashboard) -> String {
        guard page.calendar.timeZone == calendar.timeZone else { return DashboardPages(frame: frame, calendar: page.calendar).patient(page) }
        let summary = page.summary
        let charts = PatientCharts(summary)
        var body = "<p class=\"muted\">\(esc(summary.carePlans.map(\.title).joined(separator: ", "))) · times in \(esc(calendar.timeZone.identifier))</p>"
        body += section("This week", weekStrip(page))
        body += section("Today", today(page))
        body += section("Adherence, last 30 days", charts.adherence())
        if let combined = charts.combined() { body += section("Adherence and measurements", combined) }
        body += charts.measurements().map { section($0.title, $0.html) }.joined()
        body += charts.surveys().map { section("Survey: " + $0.title, $0.html) }.joined()
        body += section("Contacts", contacts(page.contacts))
        body += section("Task history", taskHistory(page.taskVersions))
        body += section("Devices", devices(page.devices, names: [:]))
        body += section("Recent accesses", accesses(page.accesses))
        return frame.page(title: summary.patient.name.displayName, section: .patients, body: body)
    }

    func weekStrip(_ page: PatientDashboard) -> String {
        let today = calendar.startOfDay(for: page.now)
        let days = page.week.map { day in
            let weekday = calendar.component(.weekday, from: day.day)
            return WeekStrip.Day(label: Self.weekdays[weekday - 1], done: Int(day.adherence.completed.rounded(.down)), due: day.adherence.expected,
                                 isToday: day.day == today)
        }
        return WeekStrip(days: days).svg(id: "week")
    }

    /// Today's events by task, as a CareKit app lists them: each task with its instructions and
    /// each occurrence done (with its values) or not.
    func today(_ page: PatientDashboard) -> String {
        guard !page.today.isEmpty else { return "<p>Nothing scheduled today.</p>" }
        var order: [String] = []
        var byTask: [String: [TaskEvent]] = [:]
        for event in page.today {
            if byTask[event.task.id] == nil { order.append(event.task.id) }
            byTask[event.task.id, default: []].append(event)
        }
        let items = order.map { (id: String) -> String in
            let events = byTask[id]!
            let task = events[0].task
            let occurrences = events.map { (event: TaskEvent) -> String in
                let time = event.scheduleEvent.element.duration == .allDay ? "all day" : clock(event.scheduleEvent.start)
                guard let outcome = event.outcome else { return "<li class=\"due\">\(esc(time)): not done</li>" }
                let values = outcome.values.map { $0.text(number: CartesianChart.number) }.joined(separator: ", ")
                return "<li class=\"done\">\(esc(time)): done\(values.isEmpty ? "" : ", " + esc(values))</li>"
            }.joined()
            let instructions = task.instructions.map { "<br><span class=\"muted\">\(esc($0))</span>" } ?? ""
            return "<li class=\"task\" data-task=\"\(esc(task.id))\"><strong>\(esc(task.title ?? task.id))</strong>\(instructions)<ul>\(occurrences)</ul></li>"
        }
        return "<ul class=\"tasks\">\(items.joined())</ul>"
    }

    func contacts(_ contacts: [Contact]) -> String {
        guard !contacts.isEmpty else { return "<p>No contacts.</p>" }
        let rows = contacts.map { c in
            [esc(c.name.displayName), esc(c.role ?? c.title ?? ""), esc(c.organization ?? ""),
             esc(((c.phoneNumbers ?? []) + (c.emailAddresses ?? [])).map(\.value).joined(separator: ", "))]
        }
        return Self.table(caption: "Care team", head: ["Name", "Role", "Organization", "Phone, email"], rows: rows, id: "contacts")
    }

    func taskHistory(_ versions: [CareTask]) -> String {
        let rows = versions.map { t in
            [esc(t.title ?? t.id), esc(t.id), esc(dateTime(t.effectiveDate)), t.deletedDate == nil ? "" : "deleted " + esc(dateTime(t.deletedDate!)),
             "<code>\(esc(t.uuid.uuidString.lowercased()))</code>"]
        }
        return Self.table(caption: "\(versions.count) version\(versions.count == 1 ? "" : "s")", head: ["Task", "Id", "In effect from", "Deleted", "Version"],
                          rows: rows, id: "task-history")
    }

    // MARK: Devices

    /// Devices with a revoke button for those still enrolled; `names` gives patients' names by id.
    public func devices(_ devices: [Device], names: [String: String]) -> String {
        guard !devices.isEmpty else { return "<p>No devices enrolled.</p>" }
        let rows = devices.map { d in
            let patient = names[d.patientID].map { link("/ui/patients/\(Self.pathSegment(d.patientID))", $0) } ?? esc(d.patientID)
            let state = d.revokedAt.map { "revoked " + esc(dateTime($0)) }
                ?? frame.form(action: "/ui/devices/revoke", fields: ["device": d.id], button: "Revoke")
            let named = [d.name, d.app].compactMap { $0 }.map { " " + esc($0) }.joined(separator: ",")
            return ["<code>\(esc(d.id))</code>\(named)", patient, esc(dateTime(d.enrolledAt)), esc(d.lastSyncAt.map(dateTime) ?? "never"), state]
        }
        return Self.table(caption: "\(devices.count) device\(devices.count == 1 ? "" : "s")", head: ["Device", "Patient", "Enrolled", "Last sync", "State"],
                          rows: rows, id: "devices")
    }

    /// Who reached the patient's data, newest first: when, who, what, from where, how it ended.
    func accesses(_ rows: [ChainedAuditEntry]) -> String {
        guard !rows.isEmpty else { return "<p>No accesses recorded yet.</p>" }
        let cells = rows.reversed().map { row in
            let e = row.entry
            return [esc(dateTime(e.recorded)), "\(esc(e.actor.kind.rawValue)) <code>\(esc(e.actor.id))</code>", "<code>\(esc(e.event))</code> \(esc(e.action.rawValue))",
                    esc(e.source ?? ""), esc(e.outcome.rawValue + (e.detail.map { ": " + $0 } ?? ""))]
        }
        return Self.table(caption: "The latest \(rows.count) entries of the audit trail (caregate audit list --patient shows them all)",
                          head: ["When", "Who", "What", "From", "Outcome"], rows: cells, id: "accesses")
    }

    public func devicesPage(_ devices: [Device], names: [String: String]) -> String {
        frame.page(title: "Devices", section: .devices, body: section(nil, self.devices(devices, names: names)))
    }

    // MARK: Outbox

    public func outbox(_ outbox: OutboxOverview, message: String? = nil) -> String {
        let c = outbox.counts
        var body = message.map { "<p role=\"status\">\(esc($0))</p>" } ?? ""
        body += "<p>\(c.queued) queued, \(c.pushed) pushed, \(c.failed) dead letter\(c.failed == 1 ? "" : "s").</p>"
        let failed = outbox.failed.map { item in
            [owner(item, outbox), String(item.attempts), esc(item.finishedAt.map(dateTime) ?? ""), "<pre>\(esc(item.lastError ?? ""))</pre>",
             frame.form(action: "/ui/outbox/retry", fields: ["version": item.versionUUID.uuidString], button: "Retry")]
        }
        body += section("Dead letters", Self.table(caption: "The EHR refused these; retry exports them again with the mappings as they are now",
                                                   head: ["Patient and task", "Attempts", "Given up", "The EHR's answer", ""], rows: failed, id: "failed"))
        let queued = outbox.queued.map { [owner($0, outbox), String($0.attempts), esc($0.queuedAt.map(dateTime) ?? ""), esc($0.lastError ?? "")] }
        body += section("Queued", Self.table(caption: "Oldest first", head: ["Patient and task", "Attempts", "Queued", "Last error"], rows: queued, id: "queued"))
        let pushed = outbox.pushed.map { [owner($0, outbox), esc($0.finishedAt.map(dateTime) ?? ""), "<code>\(esc($0.remoteLocation ?? ""))</code>"] }
        body += section("Pushed", Self.table(caption: "Latest first", head: ["Patient and task", "Pushed", "The EHR's resource"], rows: pushed, id: "pushed"))
        return frame.page(title: "Outbox", section: .outbox, body: body)
    }

    /// An outbox item's patient (linked) and task, or its outcome id when the store no longer has it.
    func owner(_ item: OutboxItem, _ outbox: OutboxOverview) -> String {
        guard let owner = outbox.owners[item.versionUUID] else { return "<code>\(esc(item.entityID))</code>" }
        return link("/ui/patients/\(Self.pathSegment(owner.patientID))", owner.patient) + "<br>" + esc(owner.task)
    }

    // MARK: Imports

    /// The latest import runs, newest first, each linking to its report.
    public func imports(_ runs: [ImportRun]) -> String {
        let columns = ["files", "resources", "create", "update", "end", "delete", "skipped", "loss", "error", "failedPatients"]
        let rows = runs.map { run in
            [link("/ui/imports/\(run.id)", dateTime(run.startedAt)), esc(run.source)] + columns.map { String(run.counts[$0] ?? 0) }
        }
        let head = ["Started", "Source", "Files", "Resources", "Created", "Updated", "Ended", "Deleted", "Skipped", "Losses", "Errors", "Patients failed"]
        return frame.page(title: "Imports", section: .imports, body: section(nil, Self.table(
            caption: "Imports from files (caregate import) and EHR refreshes that changed something, newest first", head: head, rows: rows, id: "imports")))
    }

    /// One run: its counts, the patients whose transaction failed, and every note (skips,
    /// losses, approximations, errors) from its report.
    public func importRun(_ run: ImportRun) -> String {
        let report = try? JSONValue.parse(run.report)
        let counts = run.counts.sorted { $0.key < $1.key }.map { "\(esc($0.key)) \($0.value)" }.joined(separator: " · ")
        var body = "<p>\(esc(run.source))</p><p class=\"muted\">\(counts)</p>"
        let failed = (report?["patients"]?.arrayValue ?? []).compactMap { p -> [String]? in
            guard let failure = p["failure"]?.stringValue else { return nil }
            return [esc(p["patient"]?.stringValue ?? ""), esc(failure)]
        }
        body += section("Patients not written", Self.table(caption: "Each patient is one transaction: these kept nothing of the run",
                                                         head: ["Patient", "Why"], rows: failed, id: "failed-patients"))
        let notes = (report?["notes"]?.arrayValue ?? []).map { n in
            [esc(n["kind"]?.stringValue ?? ""), esc(n["resource"]?.stringValue ?? ""), esc(n["path"]?.stringValue ?? ""), esc(n["message"]?.stringValue ?? "")]
        }
        body += section("Loss report", Self.table(caption: "What was skipped, ended, approximated or lost, by resource",
                                                  head: ["Kind", "Resource", "Where", "What"], rows: notes, id: "notes"))
        return frame.page(title: "Import of \(dateTime(run.startedAt))", section: .imports, body: body)
    }

    // MARK: Pieces

    func section(_ title: String?, _ content: String) -> String {
        "<section>\(title.map { "<h2>\(esc($0))</h2>" } ?? "")\(content)</section>"
    }

    func link(_ href: String, _ text: String) -> String { "<a href=\"\(esc(href))\">\(esc(text))</a>" }

    func esc(_ text: String) -> String { HTMLText.escaped(text) }

    func dateTime(_ date: Date) -> String { CarePlanReport.dateTime(date, calendar) }

    func clock(_ date: Date) -> String {
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return String(format: "%02d:%02d", c.hour ?? 0, c.minute ?? 0)
    }

    /// A table whose cells are HTML already; an empty one says so.
    static func table(caption: String, head: [String], rows: [[String]], id: String) -> String {
        guard !rows.isEmpty else { return "<p class=\"muted\" id=\"\(id)\">None.</p>" }
        let th = head.map { "<th scope=\"col\">\(HTMLText.escaped($0))</th>" }.joined()
        let tr = rows.map { "<tr>" + $0.map { "<td>\($0)</td>" }.joined() + "</tr>" }.joined()
        return "<div class=\"scroll\"><table id=\"\(id)\"><caption>\(HTMLText.escaped(caption))</caption><thead><tr>\(th)</tr></thead><tbody>\(tr)</tbody></table></div>"
    }

    static func percent(_ adherence: Adherence) -> String {
        adherence.value.map { "\(Int(($0 * 100).rounded()))%" } ?? "nothing due"
    }

    /// An id as one path segment: everything but unreserved characters percent-encoded.
    public static func pathSegment(_ id: String) -> String {
        id.addingPercentEncoding(withAllowedCharacters: unreserved) ?? id
    }

    static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
}
