import CareStore
import Crypto
import Foundation
import JSON

/// Enrolling a patient's device for CareKit sync: an operator issues a one-time code (valid 15
/// minutes, single use) for a patient; the app exchanges it for a device token bound to that
/// patient. Only SHA-256 hashes of codes and tokens are stored.
///
/// ```swift
/// let enrollment = DeviceEnrollment(store: store)
/// let issued = try enrollment.issueCode(patientID: "Patient/maria-lopez")   // "KX7P2-M9QRT"
/// let (device, token) = try enrollment.redeem(code: issued.code)              // on the app's request
/// let same = try enrollment.authenticate(token: token)                        // each sync call
/// ```
public struct DeviceEnrollment: Sendable {
    /// The store holding patients and devices.
    public let store: any CarePlanStore & DeviceRegistry
    /// How long a code works: 15 minutes.
    public static let codeLifetime: TimeInterval = 15 * 60
    /// Letters and digits that cannot be mistaken for each other (no 0/O, 1/I/L).
    static let alphabet = Array("ABCDEFGHJKMNPQRSTUVWXYZ23456789")

    /// Enrollment over `store`.
    public init(store: any CarePlanStore & DeviceRegistry) {
        self.store = store
    }

    /// A new code for a patient the store holds: ten characters (about 49 bits), shown in two groups.
    public func issueCode(patientID: String, now: Date = Date()) throws(EnrollmentError) -> (code: String, expires: Date) {
        let patients: [Patient]
        do { patients = try store.fetchPatients(EntityQuery(ids: [patientID])) } catch { throw .store(error) }
        guard !patients.isEmpty else { throw .noSuchPatient(patientID) }
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<10).map { _ in Self.alphabet[Int(generator.next(upperBound: UInt(Self.alphabet.count)))] }
        let code = String(characters[0..<5]) + "-" + String(characters[5...])
        let expires = now.addingTimeInterval(Self.codeLifetime)
        do { try store.addEnrollment(codeHash: Self.hash(Self.normalized(code)), patientID: patientID, expires: expires) } catch { throw .store(error) }
        return (code, expires)
    }

    /// Exchanges a code for a device token; the code is used up. A wrong, used or expired code
    /// is `.invalidCode` (the three are not told apart). `name` and `app` are what the device
    /// calls itself and its app (`acceptedLabel`): the EHR is told them as the device that
    /// recorded the patient's outcomes.
    public func redeem(code: String, name: String? = nil, app: String? = nil, now: Date = Date()) throws(EnrollmentError) -> (device: Device, token: String) {
        for (field, label) in [("name", name), ("app", app)] where label != nil && Self.acceptedLabel(label!) == nil {
            throw .invalidLabel(field)
        }
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = generator.next() }
        let token = "cgd_" + TextEncoding.base64URL(bytes)
        let id = String(Self.hash(token).prefix(12))
        let candidate = Device(id: id, patientID: "", tokenHash: Self.hash(token), enrolledAt: now,
                               name: name.flatMap(Self.acceptedLabel), app: app.flatMap(Self.acceptedLabel))
        let enrolled: Device?
        do { enrolled = try store.redeemEnrollment(codeHash: Self.hash(Self.normalized(code)), device: candidate, now: now) } catch { throw .store(error) }
        guard let enrolled else { throw .invalidCode }
        return (enrolled, token)
    }

    /// At most this many characters in a device's name or its app's.
    public static let labelLimit = 80

    /// A device's name or app as it is kept: trimmed, 1 to `labelLimit` characters, no control
    /// characters (it ends up in the EHR's Device and on the dashboard); nil when it is not one.
    public static func acceptedLabel(_ label: String) -> String? {
        let trimmed = label.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, trimmed.count <= labelLimit,
              !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format })
        else { return nil }
        return trimmed
    }

    /// The device a token belongs to, when it is enrolled and not revoked.
    public func authenticate(token: String) throws(EnrollmentError) -> Device? {
        try authenticate(token: token, since: nil)?.device
    }

    /// The device a token belongs to (enrolled, not revoked) and, when the store tells in the
    /// same read that `since` covers its patient's knowledge, the empty answer to its pull.
    public func authenticate(token: String, since: KnowledgeVector?) throws(EnrollmentError) -> (device: Device, upToDate: PatientVersions?)? {
        guard token.hasPrefix("cgd_"), token.count < 100 else { return nil }
        let found: (device: Device, upToDate: PatientVersions?)?
        do {
            if let since { found = try store.device(tokenHash: Self.hash(token), since: since) } else {
                found = try store.device(tokenHash: Self.hash(token)).map { ($0, nil) }
            }
        } catch { throw .store(error) }
        guard let found, found.device.revokedAt == nil else { return nil }
        return found
    }

    /// Codes are read as typed: case, spaces and dashes do not matter.
    static func normalized(_ code: String) -> String {
        String(code.uppercased().filter { $0 != "-" && $0 != " " })
    }

    static func hash(_ text: String) -> String {
        TextEncoding.hexadecimal(SHA256.hash(data: Array(text.utf8)))
    }
}

/// Why a code could not be issued or exchanged.
public enum EnrollmentError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The store holds no patient with this id.
    case noSuchPatient(String)
    /// The code is unknown, used or expired (which one is not said).
    case invalidCode
    /// The store failed.
    case store(StoreError)
    /// The device's `name` or `app` (the field named) is not 1 to 80 characters of text.
    case invalidLabel(String)

    public var description: String {
        switch self {
        case .invalidLabel(let field): "\"\(field)\" must be 1 to \(DeviceEnrollment.labelLimit) characters of text, without control characters"
        case .noSuchPatient(let id): "the store holds no patient \"\(id)\" (import the patient's data first)"
        case .invalidCode: "the enrollment code is wrong, used or expired"
        case .store(let error): "\(error)"
        }
    }
}
