import Foundation
import Testing
@testable import Gateway

@Suite("Rest-hook notifications from the EHR")
struct RestHookNotificationTests {
    func read(_ text: String) throws -> RestHookNotification { try RestHookNotification.read(Array(text.utf8)) }

    @Test("an empty ping names nobody: every enrolled patient is refreshed")
    func ping() throws {
        #expect(try read("") == RestHookNotification(kind: .ping, unattributed: true))
        #expect(try read(" \n") == RestHookNotification(kind: .ping, unattributed: true))
    }

    @Test("a classic payload names its patient through subject, patient or itself; absolute and versioned references too")
    func classicPayload() throws {
        #expect(try read(#"{"resourceType": "CarePlan", "id": "p", "status": "active", "intent": "plan", "subject": {"reference": "Patient/maria-lopez"}}"#)
            == RestHookNotification(kind: .event, patients: ["maria-lopez"]))
        #expect(try read(#"{"resourceType": "MedicationRequest", "id": "m", "status": "active", "intent": "order", "medicationCodeableConcept": {"text": "x"}, "subject": {"reference": "https://ehr.example.org/fhir/Patient/7/_history/3"}}"#).patients == ["7"])
        #expect(try read(#"{"resourceType": "Patient", "id": "john"}"#).patients == ["john"])
        // A plan for a Group says no patient: everyone is refreshed.
        #expect(try read(#"{"resourceType": "CarePlan", "id": "p", "status": "active", "intent": "plan", "subject": {"reference": "Group/ward-3"}}"#)
            == RestHookNotification(kind: .event, unattributed: true))
    }

    @Test("a reference names a patient as Patient/x, absolute or versioned; anything else names none")
    func patientReferences() {
        #expect(RestHookNotification.patientID(in: "Patient/maria-lopez") == "maria-lopez")
        #expect(RestHookNotification.patientID(in: "https://ehr.example.org/fhir/Patient/7/_history/3") == "7")
        #expect(RestHookNotification.patientID(in: "Patient/é-ü") == "é-ü")
        for other in ["Patient/", "Patient", "Group/ward-3", "patient/7", "Patient/7/_history", "", "/7", "Practitioner/Patient"] {
            #expect(RestHookNotification.patientID(in: other) == nil, "\(other)")
        }
    }

    @Test("a backport event names patients by focus, context or the full resource; handshakes and heartbeats change nothing")
    func backport() throws {
        func bundle(_ type: String, events: String, resources: String = "") -> String {
            """
            {"resourceType": "Bundle", "type": "history", "entry": [
              {"fullUrl": "urn:uuid:1", "resource": {"resourceType": "Parameters", "parameter": [
                {"name": "subscription", "valueReference": {"reference": "https://ehr/fhir/Subscription/9"}},
                {"name": "type", "valueCode": "\(type)"}\(events)]}}\(resources)]}
            """
        }
        let idOnly = bundle("event-notification", events: #", {"name": "notification-event", "part": [{"name": "event-number", "valueString": "3"}, {"name": "focus", "valueReference": {"reference": "https://ehr/fhir/CarePlan/p1"}}, {"name": "additional-context", "valueReference": {"reference": "https://ehr/fhir/Patient/maria-lopez"}}]}"#)
        #expect(try read(idOnly) == RestHookNotification(kind: .event, patients: ["maria-lopez"]))
        let noContext = bundle("event-notification", events: #", {"name": "notification-event", "part": [{"name": "focus", "valueReference": {"reference": "CarePlan/p1"}}]}"#)
        #expect(try read(noContext) == RestHookNotification(kind: .event, unattributed: true))
        let full = bundle("event-notification", events: #", {"name": "notification-event", "part": [{"name": "focus", "valueReference": {"reference": "https://ehr/fhir/CarePlan/p1"}}]}"#,
                          resources: #", {"fullUrl": "https://ehr/fhir/CarePlan/p1", "resource": {"resourceType": "CarePlan", "id": "p1", "status": "active", "intent": "plan", "subject": {"reference": "Patient/john"}}}"#)
        #expect(try read(full) == RestHookNotification(kind: .event, patients: ["john"]))
        #expect(try read(bundle("handshake", events: "")).kind == .status)
        #expect(try read(bundle("heartbeat", events: "")).kind == .status)
        // R4B's SubscriptionStatus instead of Parameters.
        let r4b = #"{"resourceType": "Bundle", "type": "history", "entry": [{"resource": {"resourceType": "SubscriptionStatus", "status": "active", "type": "event-notification", "topic": "http://x/t", "notificationEvent": [{"eventNumber": "1", "focus": {"reference": "Patient/ana"}}]}}]}"#
        #expect(try read(r4b) == RestHookNotification(kind: .event, patients: ["ana"]))
    }

    @Test("a body that is not FHIR JSON is refused, saying why")
    func malformed() throws {
        #expect(throws: RestHookNotificationError.self) { try read("{\"resourceType\": ") }
        #expect((try? read("<CarePlan/>")) == nil)
    }
}
