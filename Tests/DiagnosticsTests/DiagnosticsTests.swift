import Diagnostics
import JSON
import Testing

@Suite("Diagnostics")
struct DiagnosticsTests {
    let diagnostic = Diagnostic(.error, SourceLocation(file: "Mappings/careplan.yaml", line: 12, column: 15),
                                "'detial' is not an element of CarePlan.activity; did you mean 'detail'?")

    @Test("one diagnostic, three renderings: compiler text, GitHub annotation, JSON")
    func renderings() throws {
        #expect(diagnostic.description == "Mappings/careplan.yaml:12:15: error: 'detial' is not an element of CarePlan.activity; did you mean 'detail'?")
        #expect(diagnostic.githubAnnotation == "::error file=Mappings/careplan.yaml,line=12,col=15::'detial' is not an element of CarePlan.activity; did you mean 'detail'?")
        #expect(DiagnosticFormat.json.render([diagnostic]) == #"[{"file":"Mappings/careplan.yaml","line":12,"column":15,"severity":"error","message":"'detial' is not an element of CarePlan.activity; did you mean 'detail'?"}]"#)
        let fhir = Diagnostic(.warning, SourceLocation(file: "obs.json", line: 3, column: 13, path: "Observation.status"), "unknown\n100% sure", code: "binding")
        #expect(fhir.description == "obs.json:3:13: warning: Observation.status: unknown\n100% sure")
        #expect(fhir.githubAnnotation == "::warning file=obs.json,line=3,col=13::Observation.status: unknown%0A100%25 sure")
        #expect(fhir.json["code"] == "binding" && fhir.json["path"] == "Observation.status")
        #expect(Diagnostic(.note, SourceLocation(), "x").githubAnnotation == "::notice::x")
        #expect(DiagnosticFormat.text.render([diagnostic, fhir]).split(separator: "\n").count == 3)
    }

    @Test("locations print as much as is known and sort by file, line and column; errors sort before warnings")
    func locations() {
        #expect(SourceLocation(file: "a.json").description == "a.json")
        #expect(SourceLocation(line: 4, column: 2).description == "4:2")
        #expect(SourceLocation(path: "Patient.name").description == "Patient.name")
        #expect(SourceLocation(file: "a", line: 2, column: 9) < SourceLocation(file: "a", line: 10, column: 1))
        #expect(SourceLocation(file: "a", line: 9) < SourceLocation(file: "b", line: 1))
        #expect(Diagnostic.Severity.error < .warning && Diagnostic.Severity.warning < .note)
    }

    @Test("did you mean: the closest name within a typo's reach, case ignored; none when nothing is close")
    func suggestions() {
        #expect(Suggestion.closest(to: "detial", among: ["detail", "reference", "outcomeReference"]) == "detail")
        #expect(Suggestion.closest(to: "TITEL", among: ["title", "id"]) == "title")
        #expect(Suggestion.closest(to: "frequency", among: ["id", "code"]) == nil)
        #expect(Suggestion.didYouMean("whre", among: ["where", "select"], suffix: "()") == "; did you mean 'where()'?")
        #expect(Suggestion.editDistance("kitten", "sitting") == 3)
        #expect(Suggestion.editDistance("", "abc") == 3 && Suggestion.editDistance("abc", "") == 3)
        // Of equally close names the first; an exact match (case ignored) wins wherever it is.
        #expect(Suggestion.closest(to: "cod", among: ["cold", "code"]) == "cold")
        #expect(Suggestion.closest(to: "Code", among: ["cold", "codes", "code"]) == "code")
    }

    @Test("the bounded search picks what scoring every candidate in full picks")
    func suggestionsAgreeWithFullScoring() {
        let names = ["status", "intent", "category", "title", "description", "subject", "encounter", "period",
                     "created", "author", "contributor", "careTeam", "addresses", "supportingInfo", "goal",
                     "activity", "outcomeCodeableConcept", "outcomeReference", "progress", "reference", "detail",
                     "note", "instantiatesCanonical", "instantiatesUri", "basedOn", "replaces", "partOf"]
        for name in names + ["stauts", "activty", "outcome", "refrence", "x", "careteam", "descripton", "instantiates"] {
            let full = names.map { ($0, Suggestion.editDistance(name.lowercased(), $0.lowercased())) }.min { $0.1 < $1.1 }!
            let expected = full.1 <= max(2, name.count / 3) ? full.0 : nil
            #expect(Suggestion.closest(to: name, among: names) == expected, "\(name)")
        }
    }

    @Test("a path's folder and name, bare names and the root included")
    func filePaths() {
        let cases: [(String, String, String)] = [("S", ".", "S"), ("care.sqlite", ".", "care.sqlite"), ("./S", ".", "S"), ("/S", "/", "S"),
                                                 ("a/b/c.yaml", "a/b", "c.yaml"), ("/var/lib/x/", "/var/lib", "x"), ("a//b", "a", "b"), ("/", "/", "/")]
        for (path, folder, name) in cases {
            #expect(FilePath.folder(of: path) == folder, "\(path)")
            #expect(FilePath.name(of: path) == name, "\(path)")
        }
    }
}
