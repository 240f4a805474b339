import Foundation

/// An exact decimal with the number of digits written after the point (`1.50` has scale 2), so
/// arithmetic is exact and `precision()`, boundaries and output keep what was written.
public struct FHIRPathDecimal: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The exact value.
    public let value: Decimal
    /// Digits after the decimal point.
    public let scale: Int

    /// A value with `scale` digits after the point.
    public init(_ value: Decimal, scale: Int) {
        self.value = value
        self.scale = max(0, scale)
    }

    /// An integer, with no digits after the point.
    public init(_ integer: Int) {
        self.init(Decimal(integer), scale: 0)
    }

    /// Parses `12`, `-0.50`, `1.5e3` is not FHIRPath (no exponent), nor FHIR.
    public init?(_ text: String) {
        var t = Substring(text)
        if t.first == "+" || t.first == "-" { t = t.dropFirst() }
        guard !t.isEmpty, t.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), t.filter({ $0 == "." }).count <= 1,
              t.first != ".", t.last != ".",
              let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
        self.value = value
        self.scale = text.firstIndex(of: ".").map { text.distance(from: $0, to: text.endIndex) - 1 } ?? 0
    }

    /// Parses FHIR's decimal lexical form, which also allows an exponent (`1.0e0`).
    init?(fhirLexical text: String) {
        if let plain = FHIRPathDecimal(text) { self = plain; return }
        guard let value = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) else { return nil }
        self.value = value
        self.scale = max(0, -value.exponent)
    }

    /// The nearest Double.
    public var double: Double { NSDecimalNumber(decimal: value).doubleValue }

    /// Whether the value has no fraction.
    public var isWhole: Bool {
        var v = value, r = Decimal()
        NSDecimalRound(&r, &v, 0, .plain)
        return r == value
    }

    /// Rounded to `places` digits after the point (half away from zero).
    func rounded(_ places: Int, _ mode: NSDecimalNumber.RoundingMode = .plain) -> FHIRPathDecimal {
        var v = value, r = Decimal()
        NSDecimalRound(&r, &v, places, mode)
        return FHIRPathDecimal(r, scale: places)
    }

    /// The text with at least `scale` digits after the point.
    public var description: String {
        var text = NSDecimalNumber(decimal: value).description(withLocale: Locale(identifier: "en_US_POSIX"))
        if text.contains("E") || text.contains("e") { text = "\(value)" }
        guard scale > 0 else { return text }
        let present = text.firstIndex(of: ".").map { text.distance(from: $0, to: text.endIndex) - 1 }
        if let present {
            if present < scale { text += String(repeating: "0", count: scale - present) }
        } else {
            text += "." + String(repeating: "0", count: scale)
        }
        return text
    }

    public static func < (a: FHIRPathDecimal, b: FHIRPathDecimal) -> Bool { a.value < b.value }
    public static func == (a: FHIRPathDecimal, b: FHIRPathDecimal) -> Bool { a.value == b.value }
    public func hash(into hasher: inout Hasher) { hasher.combine(value) }

    // Arithmetic is checked: a result Foundation's Decimal cannot represent (overflow past
    // 38 digits and exponent 127, or underflow) is nil, which FHIRPath turns into empty.

    func adding(_ b: FHIRPathDecimal) -> FHIRPathDecimal? { checked(b, NSDecimalAdd) }
    func subtracting(_ b: FHIRPathDecimal) -> FHIRPathDecimal? { checked(b, NSDecimalSubtract) }
    func multiplied(by b: FHIRPathDecimal) -> FHIRPathDecimal? { checked(b, NSDecimalMultiply) }
    var negated: FHIRPathDecimal { FHIRPathDecimal(-value, scale: scale) }

    private func checked(_ b: FHIRPathDecimal,
                         _ operation: (UnsafeMutablePointer<Decimal>, UnsafePointer<Decimal>, UnsafePointer<Decimal>, NSDecimalNumber.RoundingMode) -> NSDecimalNumber.CalculationError)
        -> FHIRPathDecimal? {
        FHIRPathDecimal.checked(value, b.value, operation).map { FHIRPathDecimal($0, scale: max(scale, b.scale)) }
    }

    /// `operation` on two Decimals, nil unless it succeeded (rounding past 38 digits is allowed).
    static func checked(_ a: Decimal, _ b: Decimal,
                        _ operation: (UnsafeMutablePointer<Decimal>, UnsafePointer<Decimal>, UnsafePointer<Decimal>, NSDecimalNumber.RoundingMode) -> NSDecimalNumber.CalculationError)
        -> Decimal? {
        var result = Decimal(), x = a, y = b
        let error = operation(&result, &x, &y, .plain)
        guard error == .noError || error == .lossOfPrecision, !result.isNaN else { return nil }
        return result
    }

    /// The value as an Int when it is whole and within Int's range; nil otherwise (never a
    /// truncated or wrapped number).
    public var integer: Int? {
        guard isWhole, !value.isNaN, value >= Decimal(Int.min), value <= Decimal(Int.max) else { return nil }
        return Int(exactly: NSDecimalNumber(decimal: value).int64Value).flatMap { Decimal($0) == value ? $0 : nil }
    }
}
