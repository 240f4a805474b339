// sync-load: 200 CareKit devices against `caregate serve`'s sync API over loopback, the load
// generator in the same process on the same cores (libcurl, one connection per device). Each
// patient has a one-year plan: 15 daily tasks and a year of outcomes (5,475). Prints, in one run:
//   - a first full pull of one patient (every page), ms;
//   - up-to-date syncs (GET revisions with the device's vector): requests/s, p50, p99, every
//     device back to back (the ceiling), then at a fixed rate (--rate, 5,000/s by default)
//     spread over the devices, latency counted from when each request was due;
//   - the same two loads against /healthz (the server's own ceiling);
//   - device POSTs of a day's outcomes (15): requests/s, p50, p99;
//   - the process's peak resident memory (server and generator together).
//
//   - with --serve, the server processes' CPU time per request in each phase (/proc), for the
//     calculation of what more machines would serve.
//
//   swift run -c release sync-load [--devices 200] [--seconds 10] [--rate 5000] [--phases pull,sync,healthz,post]
//       [--store postgres://user@host:port/db --store-password-file FILE]   (an empty PostgreSQL database instead of SQLite)
//       [--serve path/to/caregate [--instances N]]   (N `caregate serve` processes over the store, devices spread over them)
//       [--database-pid PID]   (PostgreSQL's postmaster: its backends' CPU per request too)
//       [--audit off]   (in this process only: the audit trail's entries noted and not kept, to weigh what keeping them costs)
//       [--audit-every-ms N]   (in this process only: how often noted entries are written; the server's default is 250)
import CareStore
import PostgresStore
import FHIRClient
import Foundation
import Gateway
import GatewayServer
import Histogram
import JSON
import Logging
import ServiceLifecycle

let arguments = CommandLine.arguments
func option(_ name: String) -> String? { arguments.firstIndex(of: name).map { arguments[$0 + 1] } }
let deviceCount = Int(option("--devices") ?? "200")!
let seconds = Double(option("--seconds") ?? "10")!
/// Which phases run (all by default): pull, sync, healthz, post.
let phases = Set((option("--phases") ?? "pull,sync,healthz,post").split(separator: ",").map(String.init))
let zone = TimeZone(identifier: "America/New_York")!
let now = Date()
var calendar = Calendar(identifier: .gregorian)
calendar.timeZone = zone
let yearAgo = calendar.startOfDay(for: calendar.date(byAdding: .day, value: -365, to: now)!)

// MARK: The store: 200 patients, each with 15 daily tasks and a year of outcomes.

let folder = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-sync-load-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
let store: GatewayServer.Store
if let url = option("--store") {
    let location = try PostgresLocation(url: url)
    store = try PostgresCarePlanStore(location, password: try location.password(file: option("--store-password-file"), environment: ProcessInfo.processInfo.environment),
                                      maximumConnections: Int(option("--store-connections") ?? "8")!)
} else {
    store = try SQLiteCarePlanStore(path: folder.appendingPathComponent("care.sqlite").path)
}
var clock = ContinuousClock.now
var taskUUIDs: [String: [UUID]] = [:]
for p in 0..<deviceCount {
    let patient = Patient(id: "Patient/load-\(p)", name: PersonName(givenName: "Load \(p)"), effectiveDate: yearAgo, timezone: zone)
    let plan = CarePlan(id: "CarePlan/load-\(p)", title: "Home care", patientUUID: patient.uuid, effectiveDate: yearAgo, timezone: zone)
    var entities: [CareEntity] = [.patient(patient), .carePlan(plan)]
    var uuids: [UUID] = []
    for t in 0..<15 {
        var task = CareTask(id: "CarePlan/load-\(p)/task-\(t)", title: "Task \(t)", carePlanUUID: plan.uuid,
                            schedule: try Schedule.dailyAtTime(hour: 7 + t % 12, minutes: 0, start: yearAgo, timeZone: zone), timezone: zone)
        task.effectiveDate = yearAgo
        entities.append(.task(task))
        uuids.append(task.uuid)
        for day in 0..<365 {
            entities.append(.outcome(Outcome(taskUUID: task.uuid, taskOccurrenceIndex: day,
                                             values: [OutcomeValue(.integer(day % 10), createdDate: yearAgo.addingTimeInterval(Double(day) * 86_400))],
                                             effectiveDate: yearAgo.addingTimeInterval(Double(day) * 86_400), timezone: zone)))
        }
    }
    let addStarted = ContinuousClock.now
    try store.add(entities)
    if arguments.contains("--verbose") { print("add \(p): \(ContinuousClock.now - addStarted)") }
    taskUUIDs[patient.id] = uuids
}
print("store: \(deviceCount) patients × (15 tasks + \(15 * 365) outcomes) in \(ContinuousClock.now - clock); \(memory(of: "self"))")

// MARK: The server: in this process on port 0, or with --serve <caregate binary> as a process of
// its own (`caregate serve --config`, as deployed), so that its memory is measured alone.

var limits = GatewayServer.Limits()
// Every device comes from 127.0.0.1: the per-address caps, there for distinct clients, are lifted.
limits.concurrentPerAddress = 10_000
limits.connectionsPerAddress = 10_000
var logger = Logger(label: "sync-load")
logger.logLevel = .error
var startedProcesses: [Process] = []
let group: ServiceGroup?
let serverTask: Task<Void, any Error>?
var startedBases: [String] = []
if let binary = option("--serve") {
    for n in 0..<Int(option("--instances") ?? "1")! {
        let port = freePort()
        let config = folder.appendingPathComponent("gateway-\(n).yaml")
        try """
            listen:
              host: 127.0.0.1
              port: \(port)
            store: \(option("--store") ?? "care.sqlite")
            \(option("--store-password-file").map { "store-password-file: \($0)" } ?? "")
            store-connections: \(option("--store-connections") ?? "8")
            limits:
              concurrent-per-address: 10000
              connections-per-address: 10000
            """.write(to: config, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["serve", "--config", config.path]
        process.standardError = FileHandle.nullDevice
        try process.run()
        startedProcesses.append(process)
        startedBases.append("http://127.0.0.1:\(port)")
    }
    (group, serverTask) = (nil, nil)
    let probe = CurlTransport()
    for base in startedBases {
        while (try? await probe.send(HTTPRequest(method: "GET", url: "\(base)/healthz")))?.status != 200 {
            try await Task.sleep(for: .milliseconds(50))
        }
    }
} else {
    let (ports, portContinuation) = AsyncStream<Int>.makeStream()
    var server = GatewayServer(store: store, limits: limits)
    if option("--audit") == "off" { server.audit = AuditRecorder(trail: UnkeptTrail()) }
    if let every = option("--audit-every-ms").flatMap(Int.init) { server.auditInterval = .milliseconds(every) }
    let app = try server.application(host: "127.0.0.1", port: 0, logger: logger) { portContinuation.yield($0) }
    let running = ServiceGroup(services: [app], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger)
    group = running
    serverTask = Task { try await running.run() }
    var iterator = ports.makeAsyncIterator()
    startedBases = ["http://127.0.0.1:\(await iterator.next()!)"]
}
let served = startedProcesses
let bases = startedBases
/// Device `d`'s gateway: the instances in turn.
func base(_ d: Int) -> String { bases[d % bases.count] }

/// A process's parent and the CPU seconds (user and system) it has used, from /proc/<pid>/stat.
func processCPU(_ pid: String) -> (parent: String, seconds: Double)? {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
    // The fields after the command's closing parenthesis: the parent is the 2nd, utime and stime the 12th and 13th.
    let fields = stat.split(separator: ")").last.map { $0.split(separator: " ") } ?? []
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
    return (String(fields[1]), (user + system) / Double(sysconf(Int32(_SC_CLK_TCK))))
}

/// CPU seconds each server process has used, and (with --database-pid, PostgreSQL's postmaster)
/// the database's backends together: the store's work, which SQLite does inside the server.
func serverCPU() -> [Double] {
    let servers = served.map { processCPU(String($0.processIdentifier))?.seconds ?? 0 }
    guard let postmaster = option("--database-pid") else { return servers }
    let pids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.filter { $0.allSatisfy(\.isNumber) } ?? []
    return servers + [pids.compactMap(processCPU).filter { $0.parent == postmaster }.map(\.seconds).reduce(0, +)]
}

/// The server processes' CPU per request in a phase that served `requests`: total and per
/// process (ms), the database's backends last when measured.
func cpuPerRequest(since before: [Double], requests: Int) -> String {
    guard !served.isEmpty, requests > 0 else { return "" }
    let used = zip(serverCPU(), before).map { $0 - $1 }
    let servers = used.prefix(served.count), database = used.dropFirst(served.count).first
    let each = servers.map { String(format: "%.1f s", $0) }.joined(separator: ", ")
    var text = String(format: "; server CPU %.3f ms per request (%@ in %d process%@)",
                      servers.reduce(0, +) * 1_000 / Double(requests), each, servers.count, servers.count == 1 ? "" : "es")
    if let database { text += String(format: ", database CPU %.3f ms per request (%.1f s)", database * 1_000 / Double(requests), database) }
    return text
}

/// A port free now (bound to 0 and let go).
func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}

// MARK: Devices.

struct Device: Sendable {
    let transport = CurlTransport()
    let index: Int
    let token: String
    let patientID: String
    var vector = KnowledgeVector()
}
var devices: [Device] = []
for p in 0..<deviceCount {
    let enrollment = DeviceEnrollment(store: store)
    let code = try enrollment.issueCode(patientID: "Patient/load-\(p)").code
    devices.append(Device(index: p, token: try enrollment.redeem(code: code).token, patientID: "Patient/load-\(p)"))
}

func get(_ device: Device, _ path: String) async throws -> HTTPResponse {
    try await device.transport.send(HTTPRequest(method: "GET", url: base(device.index) + path, headers: [("Authorization", "Bearer \(device.token)")]))
}

/// Every page of a pull from the device's vector; the catch-up vector.
func fullPull(_ device: Device) async throws -> (KnowledgeVector, Int) {
    var path = "/carekit/v1/revisions?since=\(device.vector.base64URL)"
    var records = 0
    while true {
        let answer = try await get(device, path)
        if answer.status != 200 {
            print("pull: HTTP \(answer.status) \(String(decoding: answer.body.prefix(300), as: UTF8.self))")
            exit(1)
        }
        let body = try JSONValue.parse(answer.body)
        records += body["revisions"]?.arrayValue?.first?["entities"]?.arrayValue?.count ?? 0
        guard let link = answer.headers["link"] else { return (try KnowledgeVector(json: body["knowledgeVector"]!), records) }
        path = String(link.dropFirst().prefix { $0 != ">" })
    }
}

/// Resident memory now and at its peak (kB), from /proc: the server's process with --serve, else
/// this one; now split into the heap and other private memory (anonymous) and mapped files (the
/// binary, its libraries and ICU's data: shared with any other process mapping them).
func memory() -> String {
    served.isEmpty ? memory(of: "self") : served.map { memory(of: String($0.processIdentifier)) }.joined(separator: "; ")
}

func memory(of process: String) -> String {
    let status = (try? String(contentsOfFile: "/proc/\(process)/status", encoding: .utf8)) ?? ""
    func field(_ name: String) -> String {
        status.split(separator: "\n").first { $0.hasPrefix(name) }.map { $0.dropFirst(name.count).trimmingCharacters(in: .whitespaces) } ?? "?"
    }
    return "resident \(field("VmRSS:")) (anonymous \(field("RssAnon:")), files \(field("RssFile:"))), peak \(field("VmHWM:"))"
}

func milliseconds(_ d: Duration) -> Double { Double(d.components.seconds) * 1_000 + Double(d.components.attoseconds) / 1e15 }

/// Every device's latencies (µs) from `measure`, run for each device at once; and the seconds taken.
func everyDevice(_ measure: @escaping @Sendable (Int) async throws -> [UInt64]) async throws -> (latencies: [UInt64], seconds: Double) {
    let started = ContinuousClock.now
    let latencies = try await withThrowingTaskGroup(of: [UInt64].self) { tasks in
        for d in 0..<deviceCount { tasks.addTask { try await measure(d) } }
        var all: [UInt64] = []
        for try await times in tasks { all += times }
        return all
    }
    return (latencies, milliseconds(ContinuousClock.now - started) / 1_000)
}

/// Latencies (µs) as a histogram; its percentiles in ms.
func percentiles(_ latencies: [UInt64]) -> (p50: Double, p99: Double, max: Double) {
    var histogram = Histogram<UInt64>(highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)
    for latency in latencies { _ = histogram.record(latency) }
    return (Double(histogram.valueAtPercentile(50)) / 1_000, Double(histogram.valueAtPercentile(99)) / 1_000, Double(histogram.max) / 1_000)
}

/// `body` run by every device in a loop for `seconds`; requests/s, p50 and p99 in ms.
func load(_ name: String, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1_000))
    let cpu = serverCPU()
    let (latencies, elapsed) = try await everyDevice { d in
        var times: [UInt64] = []
        while ContinuousClock.now < deadline {
            let start = ContinuousClock.now
            try await body(d)
            times.append(UInt64(milliseconds(ContinuousClock.now - start) * 1_000))  // µs
        }
        return times
    }
    let p = percentiles(latencies)
    print(String(format: "%@: %.0f requests/s, p50 %.2f ms, p99 %.2f ms (%d requests, %d devices, %.0f s)%@; %@",
                 name, Double(latencies.count) / elapsed, p.p50, p.p99, latencies.count, deviceCount, elapsed,
                 cpuPerRequest(since: cpu, requests: latencies.count), memory()))
}

/// `body` sent at a fixed rate spread over the devices (an open loop, as devices sync when
/// something changes, not back to back), for `seconds`. Latency counts from when each request
/// was due, so a server falling behind shows in it (no coordinated omission).
func openLoad(_ name: String, rate: Double, _ body: @escaping @Sendable (Int) async throws -> Void) async throws {
    let interval = Double(deviceCount) / rate  // seconds between one device's requests
    let started = ContinuousClock.now
    let (latencies, elapsed) = try await everyDevice { d in
        var times: [UInt64] = []
        var due = interval * Double(d) / Double(deviceCount)  // devices spread over one interval
        while due < seconds {
            let dueAt = started + .milliseconds(Int(due * 1_000))
            if ContinuousClock.now < dueAt { try await Task.sleep(until: dueAt) }
            try await body(d)
            times.append(UInt64(milliseconds(ContinuousClock.now - dueAt) * 1_000))
            due += interval
        }
        return times
    }
    let p = percentiles(latencies)
    print(String(format: "%@ at %.0f/s offered: %.0f requests/s served, p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d requests, %d devices, %.0f s)",
                 name, rate, Double(latencies.count) / elapsed, p.p50, p.p99, p.max, latencies.count, deviceCount, elapsed))
}

// A first full pull of one patient, ten times (fresh vectors), one device at a time.
var firsts: [Double] = []
let samples = phases.contains("pull") ? min(10, deviceCount) : 0
for d in 0..<samples {
    clock = ContinuousClock.now
    let (_, records) = try await fullPull(devices[d])
    firsts.append(milliseconds(ContinuousClock.now - clock))
    precondition(records > 0)
}
firsts.sort()
if samples > 0 { print(String(format: "first full pull of one patient (%d versions, every page): median %.1f ms, slowest %.1f ms", 2 + 15 + 15 * 365, firsts[samples / 2], firsts[samples - 1])) }

// Every device catches up (concurrently), so that the next phase is up-to-date syncs.
clock = ContinuousClock.now
let vectors = try await withThrowingTaskGroup(of: (Int, KnowledgeVector).self) { tasks in
    for d in 0..<deviceCount { tasks.addTask { (d, try await fullPull(devices[d]).0) } }
    var result: [Int: KnowledgeVector] = [:]
    for try await (d, vector) in tasks { result[d] = vector }
    return result
}
for (d, vector) in vectors { devices[d].vector = vector }
print("every device caught up (\(deviceCount) full pulls at once) in \(ContinuousClock.now - clock); \(memory())")
let ready = devices

let syncPaths = ready.map { "/carekit/v1/revisions?since=\($0.vector.base64URL)" }  // the generator's work kept out of the loop
if phases.contains("sync") { try await load("up-to-date syncs (GET /carekit/v1/revisions?since=vector)") { d in
    let answer = try await get(ready[d], syncPaths[d])
    precondition(answer.status == 200)
} }
let rate = Double(option("--rate") ?? "5000")!
if phases.contains("sync") { try await openLoad("up-to-date syncs, open loop", rate: rate) { d in
    let answer = try await get(ready[d], syncPaths[d])
    precondition(answer.status == 200)
} }
if phases.contains("healthz") { try await openLoad("GET /healthz, open loop", rate: rate) { d in
    let answer = try await ready[d].transport.send(HTTPRequest(method: "GET", url: base(d) + "/healthz"))
    precondition(answer.status == 200)
} }
if phases.contains("healthz") { try await load("the same load on GET /healthz (the server's ceiling)") { d in
    let answer = try await ready[d].transport.send(HTTPRequest(method: "GET", url: base(d) + "/healthz"))
    precondition(answer.status == 200)
} }

// A day's outcomes per POST: the next day's occurrence of each of the 15 tasks.
final class Days: @unchecked Sendable {
    var next = [Int](repeating: 365, count: 10_000)
    let lock = NSLock()
    func take(_ d: Int) -> Int { lock.withLock { defer { next[d] += 1 }; return next[d] } }
}
let days = Days()
let process = (0..<deviceCount).map { _ in UUID() }
let uuids = taskUUIDs
if phases.contains("post") { try await load("device POSTs of a day's outcomes (15 per POST)") { d in
    let day = days.take(d)
    let device = ready[d]
    // A device's versions carry random (version 4) uuids, as CareKit makes them: the store's
    // uuid index takes them at scattered places, not at its end as the gateway's own.
    let outcomes = uuids[device.patientID]!.map { task in
        var outcome = Outcome(taskUUID: task, taskOccurrenceIndex: day, values: [OutcomeValue(.boolean(true))], effectiveDate: Date())
        outcome.version.uuid = UUID()
        return CareEntity.outcome(outcome)
    }
    let sent = device.vector.setting(process[d], to: day)
    let record = RevisionRecord(entities: outcomes, knowledgeVector: sent.processes)
    let body = #"{"revisions": [\#(String(decoding: record.bytes(), as: UTF8.self))], "knowledgeVector": \#(sent.json)}"#
    let answer = try await device.transport.send(HTTPRequest(method: "POST", url: base(d) + "/carekit/v1/revisions",
                                                             headers: [("Authorization", "Bearer \(device.token)"), ("Content-Type", "application/json")],
                                                             body: Array(body.utf8)))
    precondition(answer.status == 200, "POST: HTTP \(answer.status) \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
} }

print(served.isEmpty ? "memory of the process (server, store and generator): \(memory())" : "memory of the server processes: \(memory())")
for process in served {
    process.terminate()  // SIGTERM: a graceful shutdown
    process.waitUntilExit()
}
await group?.triggerGracefulShutdown()
try await serverTask?.value
try? FileManager.default.removeItem(at: folder)


/// A trail that keeps nothing: `--audit off`, the gateway as it was before it kept a trail
/// (each access is still noted in memory, and the notes are dropped once a second).
struct UnkeptTrail: AuditTrail {
    func record(_ entries: [AuditEntry], queueing: (@Sendable (ChainedAuditEntry) -> OutboxItem)?) throws(StoreError) {}
    func auditEntries(_ query: AuditQuery) throws(StoreError) -> [ChainedAuditEntry] { [] }
    func auditChain(from sequence: Int64, limit: Int) throws(StoreError) -> [ChainedAuditEntry] { [] }
    func auditHead() throws(StoreError) -> (sequence: Int64, hash: String)? { nil }
    func auditAnchor() throws(StoreError) -> (sequence: Int64, hash: String)? { nil }
    func dropAuditPrefix(through sequence: Int64) throws(StoreError) -> Int { 0 }
}
