import CareStore
import FHIR
import FHIRPath

/// A task rule's `questionnaire`: the form an activity asks the patient to fill in, found among
/// the run's Questionnaires and the engine's, makes the task a survey. A form that cannot be
/// found or read leaves the activity out, reported: never a plain to-do in its place.
extension MappingEngine.Run {
    /// What a rule's `questionnaire` found for one item.
    enum SurveyLookup {
        /// The rule has no `questionnaire`, or it names none (or names another kind of definition).
        case none
        /// The form, as kept and as read.
        case found(MappedQuestionnaire, Questionnaire)
        /// A form asked for and not found or not readable: reported, the item not mapped.
        case missing
    }

    /// The form the item's `questionnaire` names: a Reference resolves like any other, a
    /// canonical is looked up by url and version (or id, for `Questionnaire/id`).
    mutating func surveyForm(_ rule: MappingRule, _ context: MappingContext, path: String?) -> SurveyLookup {
        guard let expression = rule.fields["questionnaire"] else { return .none }
        // A path names itself; a longer expression is named by its key.
        let at = [path, expression.text.contains(" ") ? "questionnaire" : expression.text].compactMap { $0 }.joined(separator: " ")
        let values: [FHIRPathValue]
        do { values = try context.evaluate(expression) } catch {
            notes.failed(context.source, path, "questionnaire", error)
            return .missing
        }
        for value in values {
            if case .element(let e) = value, e.typeName == "Reference" {
                return referencedForm(e, context, at: at)
            }
            guard let text = context.text(value), let canonical = Canonical(text) else { continue }
            if let found = scope.questionnaires.find(canonical) { return read(found, asked: canonical, context, at: at) }
            if scope.questionnaires.otherDefinition(canonical) != nil { continue }
            if !output.missingQuestionnaires.contains(canonical) { output.missingQuestionnaires.append(canonical) }
            notes.add(.loss, context.source, at, "the Questionnaire \(canonical) is not in the imported data, the questionnaires folder or the EHR: the activity is not imported (a survey is never made a plain task)")
            return .missing
        }
        return .none
    }

    /// A Reference to the form (the core ServiceRequest extension's `valueReference`).
    mutating func referencedForm(_ reference: Element, _ context: MappingContext, at: String) -> SurveyLookup {
        let named = reference.string("reference") ?? reference.string("display") ?? "a reference without a target"
        guard let target = context.resolve(.element(reference)) else {
            if let key = reference.string("reference").flatMap(Element.relativeReference), key.hasPrefix("Questionnaire/"),
               !output.missingQuestionnaires.contains(Canonical(url: named)) {
                output.missingQuestionnaires.append(Canonical(url: named))
            }
            notes.add(.loss, context.source, at, "the Questionnaire \(named) is not in the imported data: the activity is not imported (a survey is never made a plain task)")
            return .missing
        }
        let source = SourcedResource(resource: target, origin: target.relativeReference.flatMap { scope.origins[$0] } ?? context.source.origin)
        return read(source, asked: Canonical(url: named), context, at: at)
    }

    /// Reads a found form; one that cannot be read is reported and the item left out.
    /// Its external answerValueSets are contained when the run has them (`containingAnswerSets`).
    mutating func read(_ source: SourcedResource, asked: Canonical, _ context: MappingContext, at: String) -> SurveyLookup {
        let (kept, unlisted) = scope.questionnaires.containingAnswerSets(source.resource)
        let questionnaire: Questionnaire
        do { questionnaire = try Questionnaire(kept) } catch {
            notes.add(.error, context.source, at, "the Questionnaire \(asked) (\(source.origin)) cannot be read: \(error); the activity is not imported")
            return .missing
        }
        for set in unlisted {
            notes.add(.warning, context.source, at, "the Questionnaire \(asked) item '\(set.linkId)': its answerValueSet \(set.canonical) \(set.reason): its answers are taken as given")
        }
        let canonical = questionnaire.url.map { Canonical(url: $0, version: questionnaire.version) }
            ?? Canonical(url: asked.url, version: questionnaire.version ?? asked.version)
        let json = FHIRJSONWriter(pretty: false).write(kept)
        let form = MappedQuestionnaire(canonical: canonical, title: questionnaire.title, digest: SourceRecord.contentHash(ofJSON: json), json: json,
                                       origin: source.origin)
        return .found(form, questionnaire)
    }

    /// Makes a task the survey of `form`: it names the form in `userInfo`, and takes the form's
    /// title and description as what it shows.
    static func ask(_ questionnaire: Questionnaire, _ form: MappedQuestionnaire, in made: inout MappedTask) {
        var info = made.task.version.userInfo ?? [:]
        info[SurveyTask.questionnaireKey] = form.canonical.description
        info[SurveyTask.hashKey] = form.digest
        made.task.version.userInfo = info
        if let title = questionnaire.title { made.task.title = title }
        if let description = questionnaire.resource.string("description") { made.task.instructions = description }
        made.questionnaire = form
    }
}

/// The `userInfo` keys that make a CareKit task a survey.
public enum SurveyTask {
    /// The form's canonical, `url|version`: what the app fetches from
    /// `GET /carekit/v1/questionnaires?url=`.
    public static let questionnaireKey = "caregate.questionnaire"
    /// The content hash of the form as imported: which stored version the answers are to.
    public static let hashKey = "caregate.questionnaire.hash"
}
