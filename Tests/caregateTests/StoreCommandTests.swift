import JSON
import CareStore
import Foundation
import Testing

/// `caregate store ...` as a user runs it, and the store surviving a killed writer.
@Suite("caregate store commands")
struct StoreCommandTests {
    let cli = CommandLineTests()
    let zone = TimeZone(identifier: "America/New_York")!

    func temporaryDirectory() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("caregate-storecli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// A revision record: a patient, a plan, `tasks` daily tasks and an outcome for the first.
    func record(tasks: Int, idPrefix: String = "task") throws -> RevisionRecord {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let start = calendar.date(from: DateComponents(year: 2026, month: 11, day: 1))!
        let patient = Patient(id: "maria-\(idPrefix)", name: PersonName(givenName: "María", familyName: "López"), effectiveDate: start, timezone: zone)
        let plan = CarePlan(id: "plan-\(idPrefix)", title: "Home care", patientUUID: patient.uuid, effectiveDate: start, timezone: zone)
        var entities: [CareEntity] = [.patient(patient), .carePlan(plan)]
        var first: CareTask?
        for i in 0..<tasks {
            var task = CareTask(id: "\(idPrefix)-\(i)", title: "Task \(i)", carePlanUUID: plan.uuid,
                                schedule: try Schedule.dailyAtTime(hour: 8 + i % 12, minutes: 0, start: start, timeZone: zone), timezone: zone)
            task.effectiveDate = start
            task.instructions = "Do task \(i) with care"
            if first == nil { first = task }
            entities.append(.task(task))
        }
        entities.append(.outcome(Outcome(taskUUID: first!.uuid, taskOccurrenceIndex: 1, values: [OutcomeValue(.integer(72), kind: "heartRate", units: "bpm", createdDate: start)],
                                         effectiveDate: start, timezone: zone)))
        return RevisionRecord(entities: entities, knowledgeVector: [.init(id: UUID(), clock: 3)])
    }

    @Test("import a CareKit revision record, list the day's events, export 4.0 and 3.x, and round-trip field by field")
    func importEventsExport() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("care.sqlite").path
        let input = dir.appendingPathComponent("in.json").path
        let original = try record(tasks: 3)
        try original.json().serialized(pretty: true).write(toFile: input, atomically: true, encoding: .utf8)

        let imported = try await cli.caregate(["store", "import", "--carekit", input, "--store", store])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("imported 6 of 6 versions"))
        #expect(try await cli.caregate(["store", "import", "--carekit", input, "--store", store]).stdout.contains("imported 0 of 6 versions"))

        let text = try await cli.caregate(["store", "events", "--store", store, "--from", "2026-11-02", "--to", "2026-11-03", "--tz", "America/New_York"])
        #expect(text.status == 0)
        #expect(text.stdout.split(separator: "\n").map(String.init) == [
            "2026-11-02 Monday (America/New_York)",
            "  08:00–09:00  Task 0  #1  done: heartRate=72 bpm",
            "  09:00–10:00  Task 1  #1  —",
            "  10:00–11:00  Task 2  #1  —",
        ])
        let json = try await cli.caregate(["store", "events", "--store", store, "--from", "2026-11-02", "--to", "2026-11-03", "--tz", "America/New_York", "--format", "json"])
        let events = try JSONValue.parse(json.stdout).arrayValue ?? []
        #expect(events.count == 3)
        #expect(events.first?["start"]?.stringValue == "2026-11-02T08:00:00-05:00")
        #expect(events.first?["outcome"]?.arrayValue?.first?["value"]?.numberValue == 72)

        for version in ["4", "3"] {
            let out = dir.appendingPathComponent("out-\(version).json").path
            let export = try await cli.caregate(["store", "export", "--carekit", "--carekit-version", version, "--store", store, "-o", out])
            #expect(export.status == 0, "\(export.stderr)")
            let exported = try RevisionRecord(json: try JSONValue.parse(try String(contentsOfFile: out, encoding: .utf8)))
            #expect(exported.entities.count == original.entities.count)
            let hasCalendar = try String(contentsOfFile: out, encoding: .utf8).contains("\"calendar\"")
            #expect(hasCalendar == (version == "4"))
            // Field by field: the same entities, each with the store's created date added.
            for (a, b) in zip(original.entities, exported.entities) {
                var expected = a.version
                expected.createdDate = b.version.createdDate
                #expect(b.version == expected)
                #expect(CareKitJSON.encode(b, version: .v4)["schedule"] == CareKitJSON.encode(a, version: .v4)["schedule"])
            }
            // And into a second store, which then exports the same record.
            let second = dir.appendingPathComponent("second-\(version).sqlite").path
            #expect(try await cli.caregate(["store", "import", "--carekit", out, "--store", second]).status == 0)
            let again = try SQLiteCarePlanStore(path: second).revisionRecord()
            #expect(again.entities == exported.entities)
        }
    }

    @Test("bad input names the file and the field, and changes nothing")
    func badInput() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("care.sqlite").path
        let bad = dir.appendingPathComponent("bad.json").path
        try #"{"entities": [{"type": "task", "object": {"id": "x"}}]}"#.write(toFile: bad, atomically: true, encoding: .utf8)
        let run = try await cli.caregate(["store", "import", "--carekit", bad, "--store", store])
        #expect(run.status == 1)
        #expect(run.stderr.contains("\(bad): entities[0] (task \"x\").uuid: missing (required)"))
        try #"{"entities": [ {"type": "patient", "object": "#.write(toFile: bad, atomically: true, encoding: .utf8)
        #expect(try await cli.caregate(["store", "import", "--carekit", bad, "--store", store]).stderr.contains("\(bad):1:"))
        let orphan = dir.appendingPathComponent("orphan.json").path
        var entities = try record(tasks: 1).entities
        entities.removeFirst(2)
        try RevisionRecord(entities: entities, knowledgeVector: []).json().serialized().write(toFile: orphan, atomically: true, encoding: .utf8)
        let missing = try await cli.caregate(["store", "import", "--carekit", orphan, "--store", store])
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("task \"task-0\": carePlanUUID"))
        #expect(try SQLiteCarePlanStore(path: store).changes(since: 0).entities.isEmpty)
        let badZone = try await cli.caregate(["store", "events", "--store", store, "--from", "2026-11-02", "--to", "2026-11-03", "--tz", "Mars/Olympus"])
        #expect(badZone.status == 64 && badZone.stderr.contains("unknown time zone 'Mars/Olympus' (use an IANA name such as America/New_York)"))
    }

    @Test("a writer killed with SIGKILL in the middle of a large import leaves a store that opens with every committed write and nothing half-written")
    func killedWriter() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = dir.appendingPathComponent("care.sqlite").path
        let small = dir.appendingPathComponent("small.json").path
        let large = dir.appendingPathComponent("large.json").path
        try record(tasks: 5, idPrefix: "committed").json().serialized().write(toFile: small, atomically: true, encoding: .utf8)
        #expect(try await cli.caregate(["store", "import", "--carekit", small, "--store", store]).status == 0)
        let largeRecord = try record(tasks: 30_000, idPrefix: "killed")
        try largeRecord.json().serialized().write(toFile: large, atomically: true, encoding: .utf8)

        var killedMidway = false
        for attempt in 0..<3 where !killedMidway {
            let wal = store + "-wal"
            let baseline = (try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? NSNumber)?.intValue ?? 0
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CommandLineTests.binary)
            process.arguments = ["store", "import", "--carekit", large, "--store", store]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Wait until the transaction is writing pages to the WAL, then kill it.
            let deadline = Date().addingTimeInterval(120)
            while process.isRunning && Date() < deadline {
                let size = (try? FileManager.default.attributesOfItem(atPath: wal)[.size] as? NSNumber)?.intValue ?? 0
                if size > baseline + (1 << 20) + attempt * (1 << 20) { break }
                usleep(2_000)
            }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                killedMidway = process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
            } else {
                process.waitUntilExit()
                Issue.record("the import finished before it could be killed (attempt \(attempt))")
                return
            }
        }
        #expect(killedMidway)

        let reopened = try SQLiteCarePlanStore(path: store)
        let check = try reopened.integrityCheck()
        #expect(check == ["ok"])
        let tasks = try reopened.fetchTasks()
        #expect(tasks.filter { $0.id.hasPrefix("committed-") }.count == 5)
        #expect(tasks.filter { $0.id.hasPrefix("killed-") }.isEmpty)
        #expect(try reopened.fetchOutcomes().count == 1)
        // The same import runs to completion afterwards.
        let finished = try await cli.caregate(["store", "import", "--carekit", large, "--store", store])
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(try SQLiteCarePlanStore(path: store).fetchTasks(EntityQuery(carePlanIDs: ["plan-killed"])).count == 30_000)
    }
}
