import Foundation
import Testing
@testable import FHIR

/// The generated typed views read and write the same lossless tree.
@Suite("Typed views")
struct ViewTests {
    static let samples = SharedData.projectRoot.appendingPathComponent("FHIRSamples/json")

    func read(_ name: String) throws -> Element {
        try FHIRJSONReader().read(contentsOf: Self.samples.appendingPathComponent(name).path).resource
    }

    @Test("reading a care plan through views: activities, choices, timings, references")
    func carePlan() throws {
        let plan = try R4.CarePlan(try read("CarePlan-maria-lopez-home-care.json"))
        #expect(plan.id == "maria-lopez-home-care")
        #expect(plan.status == "active" && plan.intent == "plan")
        #expect(plan.subject?.reference == "Patient/maria-lopez")
        #expect(plan.period?.start?.lexical == "2026-11-01")
        #expect(plan.activity.count == 9)
        #expect(plan.activity[0].reference?.reference == "MedicationRequest/metformin")
        let walk = try #require(plan.activity[4].detail)
        #expect(walk.code?.coding.first?.code == "229065009")
        let timing = try #require(walk.scheduledTiming)
        #expect(walk.scheduledString == nil && walk.scheduledPeriod == nil)
        #expect(timing.repeat?.frequency == 1)
        #expect(timing.repeat?.period == "1")
        #expect(timing.repeat?.periodUnit == "d")
        #expect(timing.repeat?.duration?.double == 30)
        #expect(timing.repeat?.timeOfDay.map(\.secondsSinceMidnight) == [17.5 * 3600])
        #expect(plan.activity[7].detail?.scheduledString == "Whenever it happens")
        #expect(plan.activity[8].detail?.doNotPerform == true)
        #expect(throws: ElementViewError.self) { try R4.Observation(plan.element) }
    }

    @Test("medication dosage: when codes, bounds as Duration through the Quantity view, as-needed concept")
    func dosage() throws {
        let metformin = try R4.MedicationRequest(try read("MedicationRequest-metformin.json"))
        let dose = try #require(metformin.dosageInstruction.first)
        #expect(dose.timing?.repeat?.when == ["CM", "CV"])
        #expect(dose.timing?.code?.coding.first?.code == "BID")
        #expect(dose.doseAndRate.first?.doseQuantity?.value == "500")
        #expect(metformin.medicationCodeableConcept?.text == "Metformin 500 mg tablet")

        let amoxicillin = try R4.MedicationRequest(try read("MedicationRequest-amoxicillin.json"))
        let bounds = try #require(amoxicillin.dosageInstruction.first?.timing?.repeat?.boundsDuration)
        #expect(bounds.value == "7" && bounds.code == "d")
        #expect(bounds.element.typeName == "Duration")
        #expect(amoxicillin.medicationReference?.reference == "#amoxicillin-500")
        #expect(amoxicillin.contained.first?.resourceType == "Medication")

        let prn = try R4.MedicationRequest(try read("MedicationRequest-nitroglycerin-prn.json"))
        #expect(prn.dosageInstruction.first?.asNeededCodeableConcept?.coding.first?.code == "29857009")
        #expect(prn.dosageInstruction.first?.asNeededBoolean == nil)
        #expect(prn.dosageInstruction.first?.maxDosePerPeriod?.denominator?.code == "min")
    }

    @Test("building an Observation through views gives valid FHIR JSON and XML, decimals as written")
    func buildObservation() throws {
        var observation = R4.Observation()
        observation.id = "bp-1"
        observation.status = "final"
        var code = R4.CodeableConcept()
        var loinc = R4.Coding()
        loinc.system = "http://loinc.org"
        loinc.code = "85354-9"
        code.coding = [loinc]
        observation.code = code
        observation.effectiveDateTime = FHIRDateTime("2026-11-02T08:03:00-05:00")
        var systolic = R4.Observation.Component()
        systolic.code = code
        var value = R4.Quantity()
        value.value = "138.0"
        value.code = "mm[Hg]"
        systolic.valueQuantity = value
        observation.component = [systolic]
        #expect(observation.element.children.map(\.name) == ["id", "status", "code", "effective", "component"])
        let json = FHIRJSONWriter(pretty: false).string(observation.element)
        #expect(json == #"{"resourceType":"Observation","id":"bp-1","status":"final","code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},"effectiveDateTime":"2026-11-02T08:03:00-05:00","component":[{"code":{"coding":[{"system":"http://loinc.org","code":"85354-9"}]},"valueQuantity":{"value":138.0,"code":"mm[Hg]"}}]}"#)
        let back = try R4.Observation(try FHIRXMLReader().read(FHIRXMLWriter().write(observation.element)).resource)
        #expect(back == observation)

        // Setting one type of a choice replaces the other.
        observation.valueString = "not measured"
        observation.valueQuantity = value
        #expect(observation.valueString == nil)
        #expect(observation.element.children(named: "value").count == 1)
    }

    @Test("setting a primitive keeps its extensions; clearing it keeps the element when extensions remain")
    func primitiveExtensionsSurviveSetters() throws {
        var patient = try R4.Patient(try read("Patient-maria-lopez.json"))
        var name = patient.name[0]
        #expect(name.given == ["María", "Elena"])
        name.family = "López García"
        patient.name[0] = name
        #expect(patient.name[0].family == "López García")
        #expect(patient.name[0].element.children(named: "given")[1].children.count == 1)
        #expect(patient.birthDate?.year == 1958 && patient.birthDate?.precision == .day)
        #expect(patient.telecom.map(\.system) == ["phone", "sms", "email"])
    }

    @Test("FHIR date-times keep precision and zone, and start where FHIR says")
    func dateTimes() throws {
        let utc = TimeZone(identifier: "UTC")!
        let boston = TimeZone(identifier: "America/New_York")!
        let instant = try #require(FHIRDateTime("2026-11-02T08:03:00.250-05:00"))
        #expect(instant.precision == .second && instant.utcOffset == -18000)
        #expect(instant.start(in: utc).timeIntervalSince1970 == 1793624580.25)  // 13:03:00.25Z
        let day = try #require(FHIRDateTime("2026-11-02"))
        #expect(day.precision == .day && day.utcOffset == nil)
        #expect(day.start(in: boston).timeIntervalSince1970 == 1793595600)  // 05:00Z: EST again since 1 November
        #expect(FHIRDateTime("2026-02")?.precision == .month)
        #expect(FHIRDateTime("2026-02-30") == nil)
        let text = "1.50"
        #expect(FHIRDecimal(text)?.lexical == "1.50" && FHIRDecimal(text)?.decimal == Decimal(string: "1.5"))
        let bad = "1,5"
        #expect(FHIRDecimal(bad) == nil)
        #expect(FHIRTime("17:30:00")?.secondsSinceMidnight == 63000)
    }
}
