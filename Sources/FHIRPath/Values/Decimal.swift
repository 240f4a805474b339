import Foundation

/// An exact decimal with the number of digits written after the point (`1.50` has scale 2), so
/// arithmetic is exact and `precision()`, boundaries and output keep what was written.
public struct FHIRPathDecimal: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let value: Decimal
    /// Digits after the decimal point.
    public let scale: Int

    public init(_ value: Decimal, scale: Int) {
        self.value = value
        self.scale = max(0, scale)
    }

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

    static func + (a: FHIRPathDecimal, b: FHIRPathDecimal) -> FHIRPathDecimal { FHIRPathDecimal(a.value + b.value, scale: max(a.scale, b.scale)) }
    static func - (a: FHIRPathDecimal, b: FHIRPathDecimal) -> FHIRPathDecimal { FHIRPathDecimal(a.value - b.value, scale: max(a.scale, b.scale)) }
    static func * (a: FHIRPathDecimal, b: FHIRPathDecimal) -> FHIRPathDecimal { FHIRPathDecimal(a.value * b.value, scale: max(a.scale, b.scale)) }
    static prefix func - (a: FHIRPathDecimal) -> FHIRPathDecimal { FHIRPathDecimal(-a.value, scale: a.scale) }
}
