import CareStore
import FHIR
import FHIRPath
import Foundation

/// A Patient resource becomes the store patient, through the file's `patient-fields`.
struct PatientMapper {
    let context: MappingContext

    /// Whether a store patient id names someone: not empty, and not a prefix left bare by a
    /// Patient without an id (`'Patient/' & id` gives `Patient/`). Such Patients are refused:
    /// kept, every one of them would become the same store patient.
    static func namesOne(_ id: String) -> Bool {
        !id.isEmpty && !id.hasSuffix("/")
    }

    static func unnamed(_ id: String) -> String {
        "the patient id is '\(id)': the Patient has no id to tell it from other patients, so nothing of it is imported (give it the EHR's id)"
    }

    /// The patient, or nil with a note saying why not.
    func make(record: SourceRecord, notes: inout MappingNotes) -> Patient? {
        let fields = context.file.patientFields
        do {
            guard let id = try context.string(fields["id"]) else {
                notes.add(.error, context.source, nil, "the patient id expression gave nothing")
                return nil
            }
            guard Self.namesOne(id) else {
                notes.add(.error, context.source, nil, Self.unnamed(id))
                return nil
            }
            var name = PersonName()
            name.givenName = try context.strings(fields["given"]).joined(separator: " ").nilIfEmpty
            name.familyName = try context.string(fields["family"])
            var patient = Patient(id: id, name: name, effectiveDate: context.scope.today, timezone: context.scope.timeZone)
            patient.sex = try context.string(fields["sex"])
            patient.birthday = try context.date(fields["birthday"])
            let allergies = try context.strings(fields["allergies"])
            patient.allergies = allergies.isEmpty ? nil : allergies
            patient.version.remoteID = record.reference
            patient.version.userInfo = record.userInfo
            patient.version.source = VersionInfo.importedFromEHR
            return patient
        } catch {
            notes.failed(context.source, nil, "patient-fields", error)
            return nil
        }
    }
}

/// A resource's `care-plan` block becomes the store care plan its tasks and contacts belong to.
struct CarePlanMapper {
    let context: MappingContext

    /// The plan's store id (nil when the file names none).
    func id() throws(FHIRPathError) -> String? { try context.string(context.file.carePlan["id"]) }

    /// The plan with that id; provenance only when the resource is the CarePlan itself (a
    /// "Medications" plan made for MedicationRequests is shared by several).
    func make(id: String, patientID: String, record: SourceRecord) throws(FHIRPathError) -> MappedCarePlan {
        let title = try context.string(context.file.carePlan["title"]) ?? "Care plan"
        var plan = CarePlan(id: id, title: title, patientUUID: nil, effectiveDate: context.scope.today, timezone: context.scope.timeZone)
        if context.file.resource == "CarePlan" {
            plan.version.remoteID = record.reference
            plan.version.userInfo = record.userInfo
        }
        plan.version.source = VersionInfo.importedFromEHR
        return MappedCarePlan(plan: plan, patientID: patientID, source: record)
    }
}
