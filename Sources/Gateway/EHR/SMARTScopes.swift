/// The SMART Backend Services scopes the gateway asks an EHR for when its configuration sets
/// none, one per job, from the types each job reads and writes: a type a job starts reading is
/// granted here, in one place, or a SMART EHR refuses it.
public enum SMARTScopes {
    /// The types a pull reads: the patient, plans and teams, what they reference, the forms surveys ask.
    public static let pulledTypes = ["Patient", "CarePlan", "Questionnaire", "ValueSet"] + PatientPull.followedTypes
    /// The types a push writes: what patients did (a survey's response and its Observations in one transaction).
    public static let pushedTypes = ["Observation", "MedicationAdministration", "QuestionnaireResponse"]

    /// `caregate import --from`: read the pulled types.
    public static var pull: String { pulledTypes.map { "system/\($0).rs" }.joined(separator: " ") }
    /// `caregate push`: create, read and update the pushed types (conditional creates search
    /// them), and create the Provenance of each batch.
    public static var push: String { (pushedTypes.map { "system/\($0).cru" } + ["system/Provenance.c"]).joined(separator: " ") }
    /// `caregate serve`'s workers: pull and push, and the Subscriptions that tell it a plan changed.
    public static var serve: String { [pull, push, "system/Subscription.cru"].joined(separator: " ") }
}
