import FHIR

/// How a score reads: the labelled bands a clinician interprets it by (a PHQ-9 total of 10–14
/// is "Moderate depression") and the instrument's own range (0–27). R4 has no Questionnaire
/// element for this; the form carries it the way ObservationDefinition does for any result, as
/// a contained `ObservationDefinition` whose `code` shares a Coding (system and code) with the
/// item's: each `qualifiedInterval` with a `range` is a band named by its `condition` (else its
/// `context`), and the `absolute` one is the range.
///
/// ```swift
/// let total = form.item(linkId: "/44261-6")!
/// form.scoreScale(of: total)?.bands.map(\.label)    // ["None to minimal depression", "Mild depression", …]
/// ```
public struct ScoreScale: Sendable, Equatable {
    /// One labelled range of a score.
    public struct Band: Sendable, Equatable {
        /// What the range means, as the form words it.
        public var label: String
        /// The lowest score in the band (inclusive).
        public var low: Double
        /// The highest score in the band (inclusive).
        public var high: Double
    }

    /// The bands, lowest first.
    public var bands: [Band]
    /// The instrument's range (the `absolute` interval), when the form gives one.
    public var bounds: ClosedRange<Double>?
    /// Intervals left out, in words (a low above its high, no range, no label).
    public var problems: [String]
}

extension Questionnaire {
    /// The score scale of `item`: from the first contained ObservationDefinition coded like it;
    /// nil when the form has none or it gives neither bands nor range.
    public func scoreScale(of item: Item) -> ScoreScale? {
        let codes = Set(item.element.children(named: "code").compactMap(Self.codeKey))
        guard !codes.isEmpty else { return nil }
        let definition = resource.children(named: "contained").first { contained in
            contained.resourceType == "ObservationDefinition"
                && contained["code"]?.children(named: "coding").contains { Self.codeKey($0).map(codes.contains) ?? false } == true
        }
        guard let definition else { return nil }
        let scale = ScoreScale.read(definition, linkId: item.linkId)
        return scale.bands.isEmpty && scale.bounds == nil && scale.problems.isEmpty ? nil : scale
    }

    /// A Coding as `system|code`, when it has a code.
    static func codeKey(_ coding: Element) -> String? {
        coding.string("code").map { "\(coding.string("system") ?? "")|\($0)" }
    }
}

extension ScoreScale {
    /// Reads an ObservationDefinition's qualified intervals into bands (sorted) and the range.
    static func read(_ definition: Element, linkId: String) -> ScoreScale {
        var scale = ScoreScale(bands: [], bounds: nil, problems: [])
        for (index, interval) in definition.children(named: "qualifiedInterval").enumerated() {
            let place = "item '\(linkId)': the ObservationDefinition's qualifiedInterval[\(index)]"
            guard let range = interval["range"] else { continue }
            let low = range["low"]?.string("value").flatMap(Double.init), high = range["high"]?.string("value").flatMap(Double.init)
            guard let low, let high, low.isFinite, high.isFinite else {
                scale.problems.append("\(place) needs both range.low and range.high; left out")
                continue
            }
            guard low <= high else {
                scale.problems.append("\(place) has its low (\(low)) above its high (\(high)); left out")
                continue
            }
            if interval.string("category") == "absolute" {
                scale.bounds = low...high
                continue
            }
            let context = interval["context"]
            guard let label = interval.string("condition") ?? context?.string("text")
                ?? context?.children(named: "coding").lazy.compactMap({ $0.string("display") }).first else {
                scale.problems.append("\(place) has no condition or context to name it; left out")
                continue
            }
            scale.bands.append(Band(label: label, low: low, high: high))
        }
        scale.bands.sort { ($0.low, $0.high) < ($1.low, $1.high) }
        return scale
    }
}
