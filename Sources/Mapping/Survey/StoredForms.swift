import CareStore
import FHIR

/// The form a survey task asks, as the store keeps it for the task's patient: the content the
/// task's `userInfo` names by hash, else the newest of its url and version. What the export
/// checks answers against and what the pages score them with.
public enum StoredForms {
    /// Why a survey task's form could not be had from the store.
    public struct Missing: Error, Sendable, CustomStringConvertible {
        /// In words, naming the form.
        public var description: String
    }

    /// The form `task` asks (nil for a task that is not a survey), read from `reader` within
    /// `patientID`'s forms only.
    public static func form(of task: CareTask, patientID: String?, in reader: any QuestionnaireReader) throws(StoreError) -> Result<Questionnaire, Missing>? {
        guard let text = task.version.userInfo?[SurveyTask.questionnaireKey] else { return nil }
        guard let patientID, let canonical = Canonical(text) else {
            return .failure(Missing(description: "the survey's task names no form the store keeps (\(text), of no patient)"))
        }
        let kept = try reader.questionnaires(of: patientID, url: canonical.url, version: canonical.version)
        let hash = task.version.userInfo?[SurveyTask.hashKey]
        guard let stored = hash.flatMap({ hash in kept.first { $0.digest == hash } }) ?? kept.first else {
            return .failure(Missing(description: "the store keeps no Questionnaire \(text) for \(patientID)"))
        }
        // Read as the import read it: leniently, a value R4 types more narrowly than forms write it
        // (NLM's variable names hold '_', which Expression.name's `id` does not allow) a warning then, not a refusal now.
        do { return .success(try Questionnaire(FHIRJSONReader(options: ParseOptions(lenient: true)).read(stored.resource).resource)) } catch {
            return .failure(Missing(description: "the stored Questionnaire \(text) cannot be read: \(error)"))
        }
    }
}
