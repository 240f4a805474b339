import Diagnostics
import FHIR
import Foundation
import Mapping

/// Mapping files (YAML): loaded and validated as `caregate validate` does, inside a mapping root
/// of their own. Every finding names the file and a line in it. A file the checker accepts then
/// maps a small patient record (Patient, CarePlan, MedicationRequest, Observation) without a crash.
public enum MappingHarness: FuzzHarness {
    public static let name = "mapping"

    static let record: [SourcedResource] = (FHIRPathHarness.resources + [
        #"""
        {"resourceType": "CarePlan", "id": "cp1", "status": "active", "intent": "plan", "title": "Home care",
         "subject": {"reference": "Patient/p1"}, "period": {"start": "2026-11-01"},
         "activity": [{"detail": {"kind": "Task", "status": "scheduled", "description": "Walk 20 minutes",
           "code": {"text": "Walk"}, "scheduledTiming": {"repeat": {"frequency": 1, "period": 1, "periodUnit": "d", "timeOfDay": ["09:00:00"]}}}}]}
        """#,
        #"""
        {"resourceType": "MedicationRequest", "id": "m1", "status": "active", "intent": "order",
         "medicationCodeableConcept": {"text": "Metformin 500 mg tablet"}, "subject": {"reference": "Patient/p1"}, "authoredOn": "2026-10-30",
         "dosageInstruction": [{"text": "twice a day", "timing": {"repeat": {"boundsPeriod": {"start": "2026-11-01"}, "when": ["CM", "CV"]}}}]}
        """#,
    ].map { try! FHIRJSONReader().read($0).resource }).map { SourcedResource(resource: $0, origin: "fuzz") }

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let file = try ScratchFile(input, name: "fuzz.yaml")
        defer { file.remove() }
        let root = file.folder.path
        let (mapping, diagnostics) = MappingValidator(root: root).check(path: file.path)
        let lines = yamlLines(input)
        for finding in diagnostics where finding.location.file == file.path {
            guard (0...lines).contains(finding.location.line) else {
                throw PropertyFailure("a finding names line \(finding.location.line) of a \(lines)-line file: \(finding)")
            }
        }
        for finding in diagnostics where finding.location.file == nil {
            throw PropertyFailure("a finding names no file: \(finding)")
        }
        guard mapping != nil, !diagnostics.contains(where: { $0.severity == .error }) else { return }
        let set: MappingSet
        do {
            // The file alone (not over the built-in set, which would be read again for every input).
            set = try MappingSet.load([file.path], root: root)
        } catch {
            throw PropertyFailure("a file the checker accepts does not load: \(error)")
        }
        let engine = MappingEngine(mappings: set, timeZone: TimeZone(identifier: "UTC")!, now: Date(timeIntervalSince1970: 1_793_000_000))
        let eager = engine.map(record)
        try deferredOutcomesAgree(engine, eager)
    }

    /// Outcomes left unworked and completed later are the outcomes worked out at once, in order
    /// (when nothing failed: a failing item stops its rule's later items only when worked at once).
    static func deferredOutcomesAgree(_ engine: MappingEngine, _ eager: MappingOutput) throws(PropertyFailure) {
        guard !eager.notes.contains(where: { $0.kind == .error }) else { return }
        var deferring = engine
        deferring.defersUnrecordedOutcomes = true
        func describe(_ o: MappedOutcome) -> String { "\(o.taskGroups) \(o.date) \(o.values.map { "\($0.value) \($0.kind ?? "") \($0.units ?? "")" })" }
        let atOnce = eager.batches.flatMap(\.outcomes).map(describe)
        let later = deferring.map(record).batches.flatMap(\.outcomes).compactMap { $0.completed().outcome }.map(describe)
        if atOnce != later { throw PropertyFailure("outcomes completed later differ from those worked out at once: \(later) against \(atOnce)") }
    }

    /// Lines as YAML counts them: LF, CR, CRLF, NEL, LS and PS each end one (a lone CR is a line
    /// break in YAML, so a file of old Mac line ends has findings past its first LF-counted line).
    /// Counted on bytes: these breaks' UTF-8 forms start with lead bytes, never inside another
    /// character, and each is a grapheme of its own (decoding to `Character`s took an eighth of
    /// the harness's time).
    static func yamlLines(_ input: [UInt8]) -> Int {
        var lines = 1
        var index = 0
        while index < input.count {
            let byte = input[index]
            let next = index + 1 < input.count ? input[index + 1] : 0
            let third = index + 2 < input.count ? input[index + 2] : 0
            if byte == 0x0A || (byte == 0x0D && next != 0x0A) || (byte == 0xC2 && next == 0x85)
                || (byte == 0xE2 && next == 0x80 && (third == 0xA8 || third == 0xA9)) {
                lines += 1
            }
            index += 1
        }
        return lines
    }
}
