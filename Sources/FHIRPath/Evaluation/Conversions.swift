import Diagnostics
import FHIR
import JSON
import Foundation

/// The `toX()` conversions, `encode`/`decode`/`escape`/`unescape`, and reading the clock.
enum Conversions {
    static func convert(_ item: FHIRPathValue, _ function: String, unit: String?) -> FHIRPathValue? {
        let value = item.systemValue
        switch function {
        case "toBoolean":
            switch value {
            case .boolean: return value
            case .integer(let i): return i == 1 ? .boolean(true) : i == 0 ? .boolean(false) : nil
            case .decimal(let d): return d.value == 1 ? .boolean(true) : d.value == 0 ? .boolean(false) : nil
            case .string(let s):
                switch s.lowercased() {
                case "true", "t", "yes", "y", "1", "1.0": return .boolean(true)
                case "false", "f", "no", "n", "0", "0.0": return .boolean(false)
                default: return nil
                }
            default: return nil
            }
        case "toInteger":
            switch value {
            case .integer: return value
            case .boolean(let b): return .integer(b ? 1 : 0)
            case .string(let s):
                let digits = s.first == "+" || s.first == "-" ? s.dropFirst() : Substring(s)
                guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let i = Int(s), i.magnitude <= UInt(Int32.max) else { return nil }
                return .integer(i)
            default: return nil
            }
        case "toDecimal":
            switch value {
            case .integer(let i): return .decimal(FHIRPathDecimal(i))
            case .decimal: return value
            case .boolean(let b): return .decimal(FHIRPathDecimal(Decimal(b ? 1 : 0), scale: 1))
            case .string(let s): return FHIRPathDecimal(s).map { .decimal($0) }
            default: return nil
            }
        case "toString":
            return Functions.string(of: value).map { .string($0) }
        case "toDate":
            switch value {
            case .date: return value
            case .dateTime(var d):
                d.hour = nil; d.minute = nil; d.second = nil; d.fraction = nil; d.offset = nil; d.hasTime = false
                return .date(d)
            case .string(let s):
                guard !s.contains("T"), let d = PartialDateTime(fhirPath: s) else { return nil }
                return .date(d)
            default: return nil
            }
        case "toDateTime":
            switch value {
            case .dateTime: return value
            case .date(var d):
                d.hasTime = true
                return .dateTime(d)
            case .string(let s):
                guard var d = PartialDateTime(fhirPath: s) else { return nil }
                d.hasTime = true
                return .dateTime(d)
            default: return nil
            }
        case "toTime":
            switch value {
            case .time: return value
            case .string(let s): return PartialTime(s).map { .time($0) }
            default: return nil
            }
        case "toQuantity":
            let quantity: FHIRPathQuantity?
            switch value {
            case .quantity(let q): quantity = q
            case .integer(let i): quantity = FHIRPathQuantity(value: FHIRPathDecimal(i), unit: "1")
            case .decimal(let d): quantity = FHIRPathQuantity(value: d, unit: "1")
            case .boolean(let b): quantity = FHIRPathQuantity(value: FHIRPathDecimal(Decimal(b ? 1 : 0), scale: 1), unit: "1")
            case .string(let s): quantity = parseQuantity(s)
            default: quantity = nil
            }
            guard let quantity else { return nil }
            guard let unit else { return .quantity(quantity) }
            return quantity.converted(to: unit).map { .quantity($0) }
        default:
            return nil
        }
    }

    /// `5`, `5.0 'mg'`, `4 days`.
    static func parseQuantity(_ text: String) -> FHIRPathQuantity? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let number = trimmed.prefix { $0 == "+" || $0 == "-" || $0 == "." || ($0.isASCII && $0.isNumber) }
        guard let value = FHIRPathDecimal(String(number)) else { return nil }
        let rest = trimmed.dropFirst(number.count).trimmingCharacters(in: .whitespaces)
        if rest.isEmpty { return FHIRPathQuantity(value: value, unit: "1") }
        if rest.count >= 2, rest.first == "'", rest.last == "'" {
            return FHIRPathQuantity(value: value, unit: String(rest.dropFirst().dropLast()))
        }
        if Parser.calendarUnits.contains(rest) { return FHIRPathQuantity(value: value, unit: rest) }
        return nil
    }

    static func code(_ function: String, _ s: String, _ format: String) -> String? {
        switch (function, format) {
        case ("encode", "base64"): return Data(s.utf8).base64EncodedString()
        case ("encode", "urlbase64"):
            return TextEncoding.base64URL(s.utf8, padded: true)
        case ("encode", "hex"): return TextEncoding.hexadecimal(s.utf8)
        case ("decode", "base64"), ("decode", "urlbase64"):
            return TextEncoding.bytes(base64URL: s).flatMap { String(validating: $0, as: UTF8.self) }
        case ("decode", "hex"):
            let u = Array(s.utf8)
            guard u.count % 2 == 0 else { return nil }
            var bytes: [UInt8] = []
            for i in stride(from: 0, to: u.count, by: 2) {
                guard let h = Lexer.hexValue(u[i]), let l = Lexer.hexValue(u[i + 1]) else { return nil }
                bytes.append(UInt8(h * 16 + l))
            }
            return String(decoding: bytes, as: UTF8.self)
        case ("escape", "html"):
            return s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;").replacingOccurrences(of: "'", with: "&#39;")
        case ("unescape", "html"):
            return s.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'").replacingOccurrences(of: "&amp;", with: "&")
        case ("escape", "json"):
            return s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                .replacingOccurrences(of: "\n", with: "\\n").replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\t", with: "\\t")
        case ("unescape", "json"):
            return s.replacingOccurrences(of: "\\\"", with: "\"").replacingOccurrences(of: "\\n", with: "\n")
                .replacingOccurrences(of: "\\r", with: "\r").replacingOccurrences(of: "\\t", with: "\t").replacingOccurrences(of: "\\\\", with: "\\")
        default:
            return nil
        }
    }

    /// A clock reading as a DateTime in the machine's zone, to the millisecond.
    static func dateTime(_ date: Date) -> PartialDateTime {
        let offsetMinutes = TimeZone.current.secondsFromGMT(for: date) / 60
        let ms = Int((date.timeIntervalSince1970 * 1000).rounded(.down)) + offsetMinutes * 60_000
        let dayNumber = Int((Double(ms) / 86_400_000).rounded(.down))
        let rest = ms - dayNumber * 86_400_000
        let c = PartialDateTime.civil(dayNumber)
        let millis = String(rest % 1000)
        return PartialDateTime(year: c.year, month: c.month, day: c.day, hour: rest / 3_600_000, minute: (rest / 60_000) % 60,
                               second: (rest / 1000) % 60, fraction: String(repeating: "0", count: 3 - millis.count) + millis,
                               offset: offsetMinutes, hasTime: true)
    }
}

/// `abs()`, `round()`, `power()` and the other math functions.
enum MathFunctions {
    static func apply(_ name: String, _ item: FHIRPathValue, _ argument: FHIRPathValue?, at position: SourceLocation) throws(FHIRPathError) -> FHIRPathValue? {
        if case .quantity(let q) = item {
            guard name == "abs" else { throw .evaluation(position, "\(name)() works on numbers") }
            return .quantity(FHIRPathQuantity(value: FHIRPathDecimal(abs(q.value.value), scale: q.value.scale), unit: q.unit))
        }
        guard let number = Operators.number(item) else { throw .evaluation(position, "\(name)() works on numbers, not \(Operators.describe(item))") }
        let isInteger = if case .integer = item { true } else { false }
        func integer(_ d: FHIRPathDecimal) -> FHIRPathValue? { d.integer.map(FHIRPathValue.integer) }
        func real(_ x: Double) -> FHIRPathValue? {
            guard x.isFinite else { return nil }
            return FHIRPathDecimal(String(format: "%.15g", x)).map { .decimal($0) } ?? Decimal(string: "\(x)").map { .decimal(FHIRPathDecimal($0, scale: 0)) }
        }
        switch name {
        case "abs":
            guard isInteger else { return .decimal(FHIRPathDecimal(abs(number.value), scale: number.scale)) }
            guard let i = number.integer, i != .min else { return nil }
            return .integer(abs(i))
        case "ceiling": return integer(number.rounded(0, .up))
        case "floor": return integer(number.rounded(0, .down))
        case "truncate": return integer(number.value < 0 ? number.rounded(0, .up) : number.rounded(0, .down))
        case "round":
            var places = 0
            if let argument {
                guard case .integer(let p) = argument, p >= 0 else { throw .evaluation(position, "round() needs a precision of zero or more") }
                places = p
            }
            let mode: NSDecimalNumber.RoundingMode = .plain
            return .decimal(number.rounded(places, mode))
        case "exp": return real(Foundation.exp(number.double))
        case "ln": return number.value > 0 ? real(Foundation.log(number.double)) : nil
        case "sqrt": return number.value >= 0 ? real(Foundation.sqrt(number.double)) : nil
        case "log":
            guard let argument, let base = Operators.number(argument), base.value > 0, number.value > 0 else { return nil }
            return real(Foundation.log(number.double) / Foundation.log(base.double))
        case "power":
            guard let argument, let exponent = Operators.number(argument) else { return nil }
            if isInteger, case .integer(let e) = argument, e >= 0 {
                var result = 1
                guard let b = number.integer else { return nil }
                for _ in 0..<e {
                    let (r, overflow) = result.multipliedReportingOverflow(by: b)
                    if overflow { return nil }
                    result = r
                }
                return .integer(result)
            }
            let r = Foundation.pow(number.double, exponent.double)
            return r.isNaN ? nil : real(r)
        default: return nil
        }
    }
}

/// `lowBoundary()`, `highBoundary()` and `precision()`.
enum Boundaries {
    static func apply(_ name: String, _ item: FHIRPathValue, digits: Int?) -> FHIRPathValue? {
        switch (name, item) {
        case ("precision", .decimal(let d)): return .integer(d.scale)
        case ("precision", .integer): return .integer(0)
        case ("precision", .date(let d)), ("precision", .dateTime(let d)):
            return .integer([4, 6, 8, 10, 12, 14, 17][d.precision.rawValue])
        case ("precision", .time(let t)):
            return .integer(t.fraction != nil ? 9 : t.second != nil ? 6 : t.minute != nil ? 4 : 2)
        case (_, .integer(let i)):
            return decimal(name, FHIRPathDecimal(i), digits: digits)
        case (_, .decimal(let d)):
            return decimal(name, d, digits: digits)
        case (_, .quantity(let q)):
            guard case .decimal(let d)? = decimal(name, q.value, digits: digits) else { return nil }
            return .quantity(FHIRPathQuantity(value: d, unit: q.unit))
        case (_, .date(let d)), (_, .dateTime(let d)):
            return dateTime(name == "lowBoundary", d, digits: digits ?? (item.isDate ? 8 : 17), isDate: item.isDate)
        case (_, .time(let t)):
            let low = name == "lowBoundary"
            var r = t
            let p = digits ?? 9
            if r.minute == nil { r.minute = low ? 0 : 59 }
            if r.second == nil { r.second = low ? 0 : 59 }
            if r.fraction == nil { r.fraction = low ? "000" : "999" }
            if p <= 2 { r.minute = nil }
            if p <= 4 { r.second = nil }
            if p <= 6 { r.fraction = nil }
            return .time(r)
        default:
            return nil
        }
    }

    static func decimal(_ name: String, _ d: FHIRPathDecimal, digits: Int?) -> FHIRPathValue? {
        let places = digits ?? 8
        guard places >= 0, places <= 28 else { return nil }
        var half = Decimal(5)
        half = half * pow(Decimal(10), 0) / pow(Decimal(10), d.scale + 1)
        guard var value = FHIRPathDecimal.checked(d.value, half, name == "lowBoundary" ? NSDecimalSubtract : NSDecimalAdd) else { return nil }
        var rounded = Decimal()
        NSDecimalRound(&rounded, &value, places, name == "lowBoundary" ? .down : .up)
        return .decimal(FHIRPathDecimal(rounded, scale: places))
    }

    static func dateTime(_ low: Bool, _ d: PartialDateTime, digits: Int, isDate: Bool) -> FHIRPathValue? {
        var r = d
        if r.month == nil { r.month = low ? 1 : 12 }
        if r.day == nil { r.day = low ? 1 : PartialDateTime.daysIn(month: r.month!, year: r.year) }
        if !isDate {
            if r.hour == nil { r.hour = low ? 0 : 23 }
            if r.minute == nil { r.minute = low ? 0 : (d.hour == nil ? 59 : 0) }
            if r.second == nil { r.second = low ? 0 : 59 }
            if r.fraction == nil { r.fraction = low ? "000" : "999" }
            if r.offset == nil { r.offset = low ? 14 * 60 : -12 * 60 }
        }
        if digits <= 4 { r.month = nil }
        if digits <= 6 { r.day = nil }
        if digits <= 8 { r.hour = nil; r.minute = nil; r.second = nil; r.fraction = nil; r.offset = nil; r.hasTime = false }
        if digits > 8 && digits <= 10 { r.minute = nil; r.second = nil; r.fraction = nil }
        if digits > 10 && digits <= 12 { r.second = nil; r.fraction = nil }
        if digits > 12 && digits <= 14 { r.fraction = nil }
        if digits > 8 { r.hasTime = true }
        return r.hasTime ? .dateTime(r) : .date(r)
    }
}

/// `resolve()`: references to contained resources, Bundle entries of `%rootResource` (by
/// `fullUrl`, `urn:uuid:`, or a relative `Type/id`, versioned or not), the resource itself, or
/// the environment's resolver.
enum References {
    static func resolve(_ item: FHIRPathValue, in environment: EvaluationEnvironment) -> Element? {
        var reference: String?
        if case .element(let e) = item {
            reference = e.isPrimitive ? e.value : e.string("reference")
        } else if case .string(let s) = item {
            reference = s
        }
        guard let reference, !reference.isEmpty else { return nil }
        let root = environment.rootResource ?? environment.resource
        if reference.hasPrefix("#") {
            let id = String(reference.dropFirst())
            func contained(_ e: Element?) -> Element? {
                e?.children.first { $0.name == "contained" && $0.string("id") == id }
            }
            if let found = contained(environment.resource) ?? contained(root) { return found }
            if let root, root.resourceType == "Bundle" {
                for entry in root.children where entry.name == "entry" {
                    if let found = contained(entry["resource"]) { return found }
                }
            }
            return nil
        }
        func matches(_ resource: Element) -> Bool {
            guard let type = resource.resourceType, let id = resource.string("id") else { return false }
            return reference == "\(type)/\(id)" || reference.hasSuffix("/\(type)/\(id)")
                || reference.range(of: "/\(type)/\(id)/_history/") != nil || reference.hasPrefix("\(type)/\(id)/_history/")
        }
        if let index = environment.bundleIndex {
            if let found = index.resource(for: reference) { return found }
        } else if let root, root.resourceType == "Bundle" {
            for entry in root.children where entry.name == "entry" {
                guard let resource = entry["resource"] else { continue }
                if let fullUrl = entry.string("fullUrl"), fullUrl == reference { return resource }
                if matches(resource) { return resource }
            }
        }
        for candidate in [environment.resource, root].compactMap({ $0 }) where matches(candidate) { return candidate }
        return environment.resolveReference?(reference)
    }
}

/// A Bundle's entry resources by `fullUrl` and by `Type/id`, built once so that `resolve()` over
/// every resource of a large Bundle stays linear.
public final class BundleIndex: Sendable {
    private let byReference: [String: Element]

    /// An index of the Bundle's entries by `fullUrl` and `Type/id`.
    public init(_ bundle: Element) {
        var index: [String: Element] = [:]
        for entry in bundle.children where entry.name == "entry" {
            guard let resource = entry["resource"] else { continue }
            if let fullUrl = entry.string("fullUrl") { index[fullUrl] = resource }
            if let relative = resource.relativeReference, index[relative] == nil { index[relative] = resource }
        }
        byReference = index
    }

    /// The entry resource a reference names: its `fullUrl`, `Type/id`, or an absolute or
    /// versioned URL ending in `Type/id`.
    public func resource(for reference: String) -> Element? {
        if let found = byReference[reference] { return found }
        return Element.relativeReference(of: reference).flatMap { byReference[$0] }
    }
}
