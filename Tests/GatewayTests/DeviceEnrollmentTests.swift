import CareStore
import Foundation
import Testing
@testable import Gateway

@Suite("Device enrollment")
struct DeviceEnrollmentTests {
    @Test("a code enrolls one device of its patient, once, within 15 minutes; the token authenticates until revoked; only hashes are stored", arguments: Backend.allCases)
    func enrollment(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let enrollment = DeviceEnrollment(store: fixture.store)
        let now = local("2026-11-02 09:00")
        #expect(throws: EnrollmentError.noSuchPatient("nobody")) { try enrollment.issueCode(patientID: "nobody", now: now) }
        let issued = try enrollment.issueCode(patientID: "maria", now: now)
        #expect(issued.code.count == 11 && issued.code.contains("-") && issued.expires == now.addingTimeInterval(900))
        // Typed in lower case without the dash, it still works, once.
        let typed = issued.code.lowercased().replacingOccurrences(of: "-", with: "")
        let (device, token) = try enrollment.redeem(code: typed, now: now.addingTimeInterval(60))
        #expect(device.patientID == "maria" && token.hasPrefix("cgd_") && token.count > 40)
        #expect(throws: EnrollmentError.invalidCode) { try enrollment.redeem(code: issued.code, now: now.addingTimeInterval(61)) }
        #expect(try enrollment.authenticate(token: token) == device)
        #expect(try enrollment.authenticate(token: token + "x") == nil)
        #expect(try enrollment.authenticate(token: "Bearer " + token) == nil)
        // An expired code enrolls nothing.
        let late = try enrollment.issueCode(patientID: "john", now: now)
        #expect(throws: EnrollmentError.invalidCode) { try enrollment.redeem(code: late.code, now: now.addingTimeInterval(901)) }
        #expect(try fixture.store.devices(patientID: nil).map(\.patientID) == ["maria"])
        // Neither the code nor the token is stored.
        let bytes = try Backend.everythingStored(fixture.store)
        #expect(bytes.range(of: Data(device.id.utf8)) != nil, "the search reads what is stored")
        for secret in [token, DeviceEnrollment.normalized(issued.code), DeviceEnrollment.normalized(late.code)] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "\(secret) is stored in clear")
        }
        #expect(try fixture.store.revokeDevice(id: device.id, at: now.addingTimeInterval(120)))
        #expect(try enrollment.authenticate(token: token) == nil)
        #expect(try fixture.store.revokeDevice(id: "nope", at: now) == false)
    }

    @Test("a token read with the device's vector gives the device and, when the vector covers its patient's knowledge, the same empty answer a pull gives: never another patient's knowledge, never for a revoked device", arguments: Backend.allCases)
    func upToDateRead(backend: Backend) throws {
        guard let fixture = try SyncFixture(backend) else { return }
        let enrollment = DeviceEnrollment(store: fixture.store)
        let now = local("2026-11-02 09:00")
        let (maria, token) = try enrollment.redeem(code: try enrollment.issueCode(patientID: "maria", now: now).code, now: now)
        let caughtUp = try #require(try fixture.sync.pull(patientID: "maria", since: KnowledgeVector()).catchUp)
        // John's patient moves on; Maria's device still knows all of Maria's.
        _ = try fixture.addPlan(for: "john-2")
        try fixture.store.update([.task({ var t = fixture.tasks["john"]!; t.title = "Walk more"; t.effectiveDate = local("2026-11-03 00:00"); return t }())])
        let read = try #require(try enrollment.authenticate(token: token, since: caughtUp))
        #expect(read.device == maria)
        let pulled = try fixture.sync.pull(patientID: "maria", since: caughtUp)
        // Both backends answer an up-to-date device in the token's read (it then holds no call slot).
        let upToDate = try #require(read.upToDate)
        #expect(upToDate.versions.isEmpty && upToDate.knowledge == pulled.catchUp && upToDate.knowledge == caughtUp)
        let page = try fixture.sync.pull(patientID: "maria", since: caughtUp, upToDate: upToDate)
        #expect(page.versions.isEmpty && page.catchUp == pulled.catchUp)
        // A vector that does not cover Maria's knowledge (a first pull) reads the versions, as does one of John's.
        #expect(try enrollment.authenticate(token: token, since: KnowledgeVector())?.upToDate == nil)
        let johns = try #require(try fixture.sync.pull(patientID: "john", since: KnowledgeVector()).catchUp)
        if let answer = try enrollment.authenticate(token: token, since: johns)?.upToDate {
            #expect(answer.knowledge == caughtUp, "only Maria's knowledge is read for Maria's device")
        }
        // An update of Maria's task: her device's old vector no longer covers her knowledge.
        try fixture.store.update([.task({ var t = fixture.tasks["maria"]!; t.title = "Walk more"; t.effectiveDate = local("2026-11-03 00:00"); return t }())])
        #expect(try enrollment.authenticate(token: token, since: caughtUp)?.upToDate == nil)
        // Revoked: nothing, whatever the vector.
        #expect(try fixture.store.revokeDevice(id: maria.id, at: now.addingTimeInterval(60)))
        #expect(try enrollment.authenticate(token: token, since: caughtUp) == nil)
    }
}
