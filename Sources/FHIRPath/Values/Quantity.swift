import Foundation

/// A FHIRPath Quantity: an exact value and a unit, either a UCUM code (`'mg'`) or a calendar
/// duration keyword (`days`).
public struct FHIRPathQuantity: Sendable, Hashable, CustomStringConvertible {
    /// The number.
    public var value: FHIRPathDecimal
    /// The unit: a UCUM code, or a calendar duration (`days`).
    public var unit: String

    /// A quantity.
    public init(value: FHIRPathDecimal, unit: String) {
        self.value = value
        self.unit = unit
    }

    /// `4 'mg'`, `7 days`.
    public var description: String {
        Parser.calendarUnits.contains(unit) ? "\(value) \(unit)" : "\(value) '\(unit)'"
    }

    /// The value in the base unit of its dimension, with the dimension, for units this engine
    /// knows (UCUM's common mass, length, volume and time units and the calendar keywords).
    var canonical: (value: Decimal, dimension: String)? {
        if let unit = CalendarUnit(unit) {
            let seconds: Decimal = switch unit {
            case .year: 31_557_600
            case .month: 2_629_800
            case .week: 604_800
            case .day: 86_400
            case .hour: 3_600
            case .minute: 60
            case .second: 1
            case .millisecond: Decimal(string: "0.001")!
            }
            return (value.value * seconds, "s")
        }
        guard let factor = UCUM.factors[unit] else { return nil }
        return (value.value * factor.factor, factor.dimension)
    }

    /// -1, 0, 1 when the units are comparable, nil otherwise.
    func compare(to other: FHIRPathQuantity) -> Int? {
        if unit == other.unit { return value < other.value ? -1 : value == other.value ? 0 : 1 }
        // Calendar years and months are not fixed lengths: they compare only with themselves.
        let calendarYearOrMonth: Set<String> = ["year", "years", "month", "months"]
        if calendarYearOrMonth.contains(unit) || calendarYearOrMonth.contains(other.unit) {
            guard CalendarUnit(unit) == CalendarUnit(other.unit), calendarYearOrMonth.contains(unit) == calendarYearOrMonth.contains(other.unit) else { return nil }
            return value < other.value ? -1 : value == other.value ? 0 : 1
        }
        guard let a = canonical, let b = other.canonical, a.dimension == b.dimension else { return nil }
        return a.value < b.value ? -1 : a.value == b.value ? 0 : 1
    }

    /// This quantity in another unit of the same dimension, when both are known.
    func converted(to target: String) -> FHIRPathQuantity? {
        if target == unit { return self }
        guard let from = canonical, let factor = UCUM.factors[target] ?? CalendarUnit(target).map({ _ in
            FHIRPathQuantity(value: FHIRPathDecimal(1), unit: target).canonical.map { UCUM.Factor(dimension: $0.dimension, factor: $0.value) }!
        }), from.dimension == factor.dimension else { return nil }
        return FHIRPathQuantity(value: FHIRPathDecimal(from.value / factor.factor, scale: value.scale), unit: target)
    }
}

/// The UCUM units the engine converts between (the ones care plans and vital signs use).
enum UCUM {
    struct Factor {
        let dimension: String
        let factor: Decimal
    }

    static let factors: [String: Factor] = {
        var table: [String: Factor] = [:]
        func add(_ dimension: String, _ entries: [(String, String)]) {
            for (code, factor) in entries { table[code] = Factor(dimension: dimension, factor: Decimal(string: factor)!) }
        }
        add("g", [("g", "1"), ("mg", "0.001"), ("ug", "0.000001"), ("kg", "1000"), ("ng", "0.000000001"),
                  ("[lb_av]", "453.59237"), ("[oz_av]", "28.349523125")])
        add("m", [("m", "1"), ("cm", "0.01"), ("mm", "0.001"), ("km", "1000"), ("um", "0.000001"),
                  ("[in_i]", "0.0254"), ("[ft_i]", "0.3048")])
        add("L", [("L", "1"), ("l", "1"), ("dL", "0.1"), ("cL", "0.01"), ("mL", "0.001"), ("ml", "0.001"), ("uL", "0.000001")])
        add("s", [("s", "1"), ("ms", "0.001"), ("min", "60"), ("h", "3600"), ("d", "86400"), ("wk", "604800"),
                  ("mo", "2629800"), ("a", "31557600")])
        add("1", [("1", "1"), ("%", "0.01")])
        add("Cel", [("Cel", "1")])
        add("mm[Hg]", [("mm[Hg]", "1")])
        return table
    }()
}
