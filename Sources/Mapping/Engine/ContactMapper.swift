import CareStore
import FHIR
import FHIRPath
import Foundation

/// One item of a contact rule (a CareTeam participant, say) becomes a CareKit contact: name,
/// title, role, organization, category, phones, messaging numbers, e-mail and address.
struct ContactMapper {
    let rule: MappingRule
    let context: MappingContext

    func make(id: String, record: SourceRecord) throws(FHIRPathError) -> Contact {
        let fields = rule.fields
        var name = PersonName()
        if let human = try context.evaluate(fields["person-name"]).first?.element {
            name.givenName = human.children(named: "given").compactMap(\.value).joined(separator: " ").nilIfEmpty
            name.familyName = human.string("family")
            name.namePrefix = human.children(named: "prefix").compactMap(\.value).joined(separator: " ").nilIfEmpty
            name.nameSuffix = human.children(named: "suffix").compactMap(\.value).joined(separator: " ").nilIfEmpty
            if name.givenName == nil && name.familyName == nil { name.givenName = human.string("text") }
        }
        var contact = Contact(id: id, name: name, carePlanUUID: nil, effectiveDate: context.scope.today, timezone: context.scope.timeZone)
        contact.title = try context.string(fields["title"])
        contact.role = try context.string(fields["role"])
        contact.organization = try context.string(fields["organization"])
        switch try context.string(fields["category"]) {
        case "family": contact.category = .friendsAndFamily
        case "care-provider": contact.category = .careProvider
        default: break
        }
        var phones: [LabeledValue] = [], messaging: [LabeledValue] = [], emails: [LabeledValue] = [], other: [LabeledValue] = []
        let points = try context.evaluate(fields["telecom"])
        for case .element(let point) in points {
            guard let value = point.string("value") else { continue }
            let use = point.string("use")
            if use == "old" { continue }
            let label = use ?? "work"
            let entry = LabeledValue(label: label, value: value)
            switch point.string("system") {
            case "phone":
                if !phones.contains(entry) { phones.append(entry) }
                if use == "mobile", !messaging.contains(entry) { messaging.append(entry) }
            case "sms": if !messaging.contains(entry) { messaging.append(entry) }
            case "email": if !emails.contains(entry) { emails.append(entry) }
            default: other.append(LabeledValue(label: point.string("system") ?? "other", value: value))
            }
        }
        contact.phoneNumbers = phones.isEmpty ? nil : phones
        contact.messagingNumbers = messaging.isEmpty ? nil : messaging
        contact.emailAddresses = emails.isEmpty ? nil : emails
        contact.otherContactInfo = other.isEmpty ? nil : other
        if let address = try context.evaluate(fields["address"]).first?.element {
            contact.address = PostalAddress(street: address.children(named: "line").compactMap(\.value).joined(separator: "\n"),
                                            city: address.string("city") ?? "", state: address.string("state") ?? "",
                                            postalCode: address.string("postalCode") ?? "", country: address.string("country") ?? "")
        }
        contact.version.remoteID = record.reference
        contact.version.userInfo = record.userInfo
        contact.version.source = VersionInfo.importedFromEHR
        return contact
    }
}
