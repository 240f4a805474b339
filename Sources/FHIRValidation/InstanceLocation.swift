import FHIR

/// Where the walk is in an instance (`Observation.component[1].valueQuantity`), kept as a chain
/// of steps and written out only when an issue names it: most elements walked have none, and
/// building every element's path as text was a tenth of the validation's time.
final class InstanceLocation: Sendable, CustomStringConvertible {
    let parent: InstanceLocation?
    /// The element's name (the resource type, or the outermost location, at the root).
    let name: String
    /// For a choice element, the type that completes its JSON name (`Quantity` in `valueQuantity`).
    let choiceType: String?
    /// The index, where the element repeats.
    let index: Int?

    init(root: String) {
        (parent, name, choiceType, index) = (nil, root, nil, nil)
    }

    private init(parent: InstanceLocation, name: String, choiceType: String?, index: Int?) {
        (self.parent, self.name, self.choiceType, self.index) = (parent, name, choiceType, index)
    }

    /// A child element's location: `name`, with the choice's type and the index where given.
    func child(_ name: String, choiceType: String? = nil, index: Int? = nil) -> InstanceLocation {
        InstanceLocation(parent: self, name: name, choiceType: choiceType, index: index)
    }

    /// The FHIRPath location (`Observation.component[1].valueQuantity.code`).
    var description: String {
        var steps: [InstanceLocation] = []
        var current: InstanceLocation? = self
        while let step = current { steps.append(step); current = step.parent }
        var text = ""
        for (i, step) in steps.reversed().enumerated() {
            if i > 0 { text += "." }
            text += step.name
            if let type = step.choiceType { text += type.prefix(1).uppercased() + type.dropFirst() }
            if let index = step.index { text += "[\(index)]" }
        }
        return text
    }
}

extension ValidationIssue {
    init(_ severity: Severity, _ code: String, at location: InstanceLocation, _ message: String,
         profile: String? = nil, elementID: String? = nil, key: String? = nil) {
        self.init(severity, code, at: location.description, message, profile: profile, elementID: elementID, key: key)
    }
}
