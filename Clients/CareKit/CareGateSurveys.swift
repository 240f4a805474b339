// CareGateSurveys: the app's side of CareGate's survey tasks. A task whose userInfo names a form
// (`caregate.questionnaire`, `url|version`; `caregate.questionnaire.hash`, the content) is a
// survey: fetch the form from the gateway, present it with ResearchKit (ResearchKitOnFHIR builds
// the ORKTask from the FHIR Questionnaire), and store the answers as the outcome's values. Copy
// this file into the app beside CareGateRemote.swift; it needs CareKit, CareKitStore, ResearchKit,
// ResearchKitOnFHIR and FHIRModels. Like CareGateRemote it is parsed by the gateway's tests, not built.
//
//     if let form = CareGateSurveys.form(of: task) {
//         let questionnaire = try await CareGateSurveys.questionnaire(form, server: server, token: token)
//         let survey = try ORKNavigableOrderedTask(questionnaire: questionnaire)
//         let controller = OCKSurveyTaskViewController(eventQuery: OCKEventQuery(for: Date()), store: storeManager.store,
//                                                      survey: survey, extractOutcome: CareGateSurveys.outcomeValues)
//         present(controller, animated: true)
//     }
//
// The gateway takes the answers in either shape: the whole QuestionnaireResponse ResearchKitOnFHIR
// makes, as one text value of kind "questionnaireResponse" (what `outcomeValues` records), or one
// value per answer whose kind is the question's linkId (`answerValues` shows how). It checks them
// against the form, works out the scores, and sends the EHR one QuestionnaireResponse per outcome.

import CareKit
import CareKitStore
import Foundation
import ModelsR4
import ResearchKit
import ResearchKitOnFHIR

public enum CareGateSurveys {
    /// The form a task asks: its canonical and the content the gateway keeps; nil for a task that is not a survey.
    public struct Form: Sendable {
        public let canonical: String
        public let hash: String?
    }

    public static func form(of task: OCKAnyTask) -> Form? {
        guard let info = (task as? OCKTask)?.userInfo, let canonical = info["caregate.questionnaire"] else { return nil }
        return Form(canonical: canonical, hash: info["caregate.questionnaire.hash"])
    }

    /// `GET /carekit/v1/questionnaires?url=…&hash=…` with the device token: the form as the task
    /// was imported with it. Only this patient's forms are served.
    public static func questionnaire(_ form: Form, server: URL, token: String, session: URLSession = .shared) async throws -> Questionnaire {
        var components = URLComponents(url: server.appendingPathComponent("carekit/v1/questionnaires"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "url", value: form.canonical)] + (form.hash.map { [URLQueryItem(name: "hash", value: $0)] } ?? [])
        var request = URLRequest(url: components.url!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/fhir+json", forHTTPHeaderField: "Accept")
        let (data, response) = try await session.data(for: request)
        guard let http = response as? HTTPURLResponse, http.statusCode == 200 else {
            let status = (response as? HTTPURLResponse)?.statusCode ?? 0
            throw CareGateRemote.GatewayError(status: status, message: String(decoding: data, as: UTF8.self))
        }
        return try JSONDecoder().decode(Questionnaire.self, from: data)
    }

    /// The outcome of a finished survey: the whole response as one value of kind "questionnaireResponse".
    public static func outcomeValues(_ result: ORKTaskResult) -> [OCKOutcomeValue]? {
        let response = result.fhirResponse
        guard let data = try? JSONEncoder().encode(response), let json = String(data: data, encoding: .utf8) else { return nil }
        var value = OCKOutcomeValue(json)
        value.kind = "questionnaireResponse"
        return [value]
    }

    /// The other shape: one value per answer, its kind the linkId (numbers, booleans, text and
    /// dates as CareKit's own values; a choice as the option's Coding in JSON).
    public static func answerValues(_ result: ORKTaskResult) -> [OCKOutcomeValue] {
        var values: [OCKOutcomeValue] = []
        for item in result.fhirResponse.item ?? [] {
            guard let linkId = item.linkId.value?.string else { continue }
            for answer in item.answer ?? [] {
                var value: OCKOutcomeValue?
                switch answer.value {
                case .boolean(let b): value = b.value.map { OCKOutcomeValue($0.bool) }
                case .integer(let i): value = i.value.map { OCKOutcomeValue(Int($0.integer)) }
                case .decimal(let d): value = d.value.map { OCKOutcomeValue(NSDecimalNumber(decimal: $0.decimal).doubleValue) }
                case .string(let s): value = s.value.map { OCKOutcomeValue($0.string) }
                case .coding(let coding):
                    let fields = ["code": coding.code?.value?.string, "system": coding.system?.value?.url.absoluteString, "display": coding.display?.value?.string]
                    if let data = try? JSONSerialization.data(withJSONObject: fields.compactMapValues { $0 }) { value = OCKOutcomeValue(String(decoding: data, as: UTF8.self)) }
                case .quantity(let q):
                    value = q.value?.value.map { OCKOutcomeValue(NSDecimalNumber(decimal: $0.decimal).doubleValue) }
                    value?.units = q.unit?.value?.string
                default: value = nil
                }
                if var value {
                    value.kind = linkId
                    values.append(value)
                }
            }
        }
        return values
    }
}
