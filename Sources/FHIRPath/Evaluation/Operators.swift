import Diagnostics
import FHIR
import Foundation

/// Equality, equivalence, ordering and arithmetic on FHIRPath items, as the specification defines
/// them: results may be unknown (nil, an empty collection) when precision or units differ.
enum Operators {
    // MARK: Equality

    /// `=` on two items: nil when the answer is unknown (dates of different precision).
    static func equal(_ a: FHIRPathValue, _ b: FHIRPathValue) -> Bool? {
        let x = a.systemValue, y = b.systemValue
        switch (x, y) {
        case (.element(let e), .element(let f)): return elementsEqual(e, f)
        case (.boolean(let p), .boolean(let q)): return p == q
        case (.string(let p), .string(let q)): return p == q
        case (.integer(let p), .integer(let q)): return p == q
        case (.integer, .decimal), (.decimal, .integer), (.decimal, .decimal): return number(x)! == number(y)!
        case (.date(let p), .date(let q)), (.dateTime(let p), .dateTime(let q)), (.date(let p), .dateTime(let q)), (.dateTime(let p), .date(let q)):
            return p.compare(to: q).map { $0 == 0 }
        case (.time(let p), .time(let q)): return p.compare(to: q).map { $0 == 0 }
        case (.quantity(let p), .quantity(let q)): return p.compare(to: q).map { $0 == 0 }
        case (.typeInfo(let n1, let m1), .typeInfo(let n2, let m2)): return n1 == n2 && m1 == m2
        default: return false
        }
    }

    /// Complex elements are equal when their names, values and children are.
    static func elementsEqual(_ a: Element, _ b: Element) -> Bool {
        a.value == b.value && a.children.count == b.children.count
            && zip(a.children, b.children).allSatisfy { $0.name == $1.name && elementsEqual($0, $1) }
    }

    /// `~` on two items: never unknown.
    static func equivalent(_ a: FHIRPathValue, _ b: FHIRPathValue) -> Bool {
        let x = a.systemValue, y = b.systemValue
        switch (x, y) {
        case (.string(let p), .string(let q)): return normalized(p) == normalized(q)
        case (.integer, .decimal), (.decimal, .integer), (.decimal, .decimal):
            let p = number(x)!, q = number(y)!
            let places = min(p.scale, q.scale)
            return p.rounded(places) == q.rounded(places)
        case (.date(let p), .date(let q)), (.dateTime(let p), .dateTime(let q)), (.date(let p), .dateTime(let q)), (.dateTime(let p), .date(let q)):
            return p.compare(to: q) == 0
        case (.time(let p), .time(let q)): return p.compare(to: q) == 0
        case (.quantity(let p), .quantity(let q)):
            // Equivalent at the precision of the less precise value (`4 'g' ~ 4040 'mg'`).
            guard let q2 = q.converted(to: p.unit) ?? (p.compare(to: q) == 0 ? p : nil) else { return false }
            let places = min(p.value.scale, q.value.scale)
            return p.value.rounded(places) == q2.value.rounded(places)
        case (.element(let e), .element(let f)):
            return e.children.count == f.children.count && zip(e.children, f.children).allSatisfy {
                $0.name == $1.name && equivalent(.element($0), .element($1))
            } && (e.value.map(normalized) == f.value.map(normalized))
        default:
            return equal(x, y) ?? false
        }
    }

    static func normalized(_ s: String) -> String {
        s.lowercased().split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }

    /// `=` on collections: empty when either side is empty; item by item in order otherwise.
    static func equal(_ a: [FHIRPathValue], _ b: [FHIRPathValue]) -> Bool? {
        if a.isEmpty || b.isEmpty { return nil }
        guard a.count == b.count else { return false }
        var unknown = false
        for (x, y) in zip(a, b) {
            switch equal(x, y) {
            case false?: return false
            case nil: unknown = true
            default: break
            }
        }
        return unknown ? nil : true
    }

    /// `~` on collections: same size, every item equivalent to one of the other's, in any order.
    static func equivalent(_ a: [FHIRPathValue], _ b: [FHIRPathValue]) -> Bool {
        if a.isEmpty && b.isEmpty { return true }
        guard a.count == b.count else { return false }
        var remaining = b
        for x in a {
            guard let i = remaining.firstIndex(where: { equivalent(x, $0) }) else { return false }
            remaining.remove(at: i)
        }
        return true
    }

    // MARK: Ordering

    /// -1, 0, 1; nil when unknown (different precision); throws when the types cannot be compared.
    static func compare(_ a: FHIRPathValue, _ b: FHIRPathValue, at position: SourceLocation) throws(FHIRPathError) -> Int? {
        let x = a.systemValue, y = b.systemValue
        switch (x, y) {
        case (.string(let p), .string(let q)): return p < q ? -1 : p == q ? 0 : 1
        case (.integer(let p), .integer(let q)): return p < q ? -1 : p == q ? 0 : 1
        case (.integer, .decimal), (.decimal, .integer), (.decimal, .decimal):
            let p = number(x)!, q = number(y)!
            return p < q ? -1 : p == q ? 0 : 1
        case (.date(let p), .date(let q)), (.dateTime(let p), .dateTime(let q)), (.date(let p), .dateTime(let q)), (.dateTime(let p), .date(let q)):
            return p.compare(to: q)
        case (.time(let p), .time(let q)): return p.compare(to: q)
        case (.quantity(let p), .quantity(let q)): return p.compare(to: q)
        default:
            throw .evaluation(position, "cannot compare \(describe(x)) with \(describe(y))")
        }
    }

    static func describe(_ v: FHIRPathValue) -> String {
        let t = v.typeInfo
        return "\(t.namespace).\(t.name)"
    }

    static func number(_ v: FHIRPathValue) -> FHIRPathDecimal? {
        switch v {
        case .integer(let i): FHIRPathDecimal(i)
        case .decimal(let d): d
        default: nil
        }
    }

    // MARK: Arithmetic

    static func arithmetic(_ op: BinaryOperator, _ a: FHIRPathValue, _ b: FHIRPathValue, at position: SourceLocation) throws(FHIRPathError) -> FHIRPathValue? {
        let x = a.systemValue, y = b.systemValue
        switch (op, x, y) {
        case (.add, .string(let p), .string(let q)): return .string(p + q)
        case (.add, .integer(let p), .integer(let q)):
            let (r, overflow) = p.addingReportingOverflow(q)
            return overflow ? nil : .integer(r)
        case (.subtract, .integer(let p), .integer(let q)):
            let (r, overflow) = p.subtractingReportingOverflow(q)
            return overflow ? nil : .integer(r)
        case (.multiply, .integer(let p), .integer(let q)):
            let (r, overflow) = p.multipliedReportingOverflow(by: q)
            return overflow ? nil : .integer(r)
        case (.div, .integer(let p), .integer(let q)):
            guard q != 0 else { return nil }
            let (r, overflow) = p.dividedReportingOverflow(by: q)
            return overflow ? nil : .integer(r)
        case (.mod, .integer(let p), .integer(let q)):
            guard q != 0 else { return nil }
            // Only Int.min mod -1 overflows, and its remainder is 0.
            let (r, overflow) = p.remainderReportingOverflow(dividingBy: q)
            return .integer(overflow ? 0 : r)
        case (.add, .date(let d), .quantity(let q)), (.add, .dateTime(let d), .quantity(let q)),
             (.subtract, .date(let d), .quantity(let q)), (.subtract, .dateTime(let d), .quantity(let q)):
            guard CalendarUnit(arithmetic: q.unit) != nil else {
                throw .evaluation(position, op == .add ? "cannot add \(q) to a date" : "cannot subtract \(q) from a date")
            }
            // A result past year 9999 (or before year 1) is empty.
            return d.adding(op == .add ? q.value : q.value.negated, unit: q.unit).map { x.isDate ? .date($0) : .dateTime($0) }
        case (.add, .time(let t), .quantity(let q)), (.subtract, .time(let t), .quantity(let q)):
            guard let unit = CalendarUnit(arithmetic: q.unit), [.hour, .minute, .second, .millisecond].contains(unit) else {
                throw .evaluation(position, op == .add ? "cannot add \(q) to a time" : "cannot subtract \(q) from a time")
            }
            return t.adding(op == .add ? q.value : q.value.negated, unit: q.unit).map(FHIRPathValue.time)
        case (.add, .quantity(let p), .quantity(let q)), (.subtract, .quantity(let p), .quantity(let q)):
            guard let q2 = q.converted(to: p.unit) else { return nil }
            return quantity(op == .add ? p.value.adding(q2.value) : p.value.subtracting(q2.value), p.unit)
        case (.multiply, .quantity(let p), .integer), (.multiply, .quantity(let p), .decimal):
            return quantity(p.value.multiplied(by: number(y)!), p.unit)
        case (.multiply, .integer, .quantity(let q)), (.multiply, .decimal, .quantity(let q)):
            return quantity(number(x)!.multiplied(by: q.value), q.unit)
        case (.multiply, .quantity(let p), .quantity(let q)):
            return quantity(p.value.multiplied(by: q.value), p.unit == "1" ? q.unit : q.unit == "1" ? p.unit : "\(p.unit).\(q.unit)")
        case (.divide, .quantity(let p), .integer), (.divide, .quantity(let p), .decimal):
            return quantity(divide(p.value, number(y)!), p.unit)
        case (.divide, .quantity(let p), .quantity(let q)):
            if let q2 = q.converted(to: p.unit) { return quantity(divide(p.value, q2.value), "1") }
            return quantity(divide(p.value, q.value), "\(p.unit)/\(q.unit)")
        default:
            break
        }
        guard let p = number(x), let q = number(y) else {
            throw .evaluation(position, "cannot apply '\(op.rawValue)' to \(describe(x)) and \(describe(y))")
        }
        switch op {
        case .add: return p.adding(q).map(FHIRPathValue.decimal)
        case .subtract: return p.subtracting(q).map(FHIRPathValue.decimal)
        case .multiply: return p.multiplied(by: q).map(FHIRPathValue.decimal)
        case .divide: return divide(p, q).map(FHIRPathValue.decimal)
        case .div: return divide(p, q)?.rounded(0, .down).integer.map(FHIRPathValue.integer)
        case .mod:
            guard let quotient = divide(p, q)?.rounded(0, .down), let whole = quotient.multiplied(by: q) else { return nil }
            return p.subtracting(whole).map(FHIRPathValue.decimal)
        default:
            throw .evaluation(position, "'\(op.rawValue)' is not arithmetic")
        }
    }

    /// A quantity, or empty when its value could not be computed.
    static func quantity(_ value: FHIRPathDecimal?, _ unit: String) -> FHIRPathValue? {
        value.map { .quantity(FHIRPathQuantity(value: $0, unit: unit)) }
    }

    /// Division to 8 more places than either operand, trailing zeros dropped; nil for a zero
    /// divisor or a quotient Decimal cannot represent.
    static func divide(_ p: FHIRPathDecimal, _ q: FHIRPathDecimal) -> FHIRPathDecimal? {
        guard q.value != 0, var result = FHIRPathDecimal.checked(p.value, q.value, NSDecimalDivide) else { return nil }
        let places = max(p.scale, q.scale) + 8
        var rounded = Decimal()
        NSDecimalRound(&rounded, &result, places, .plain)
        let decimal = FHIRPathDecimal(rounded, scale: 0)
        return FHIRPathDecimal(rounded, scale: decimal.isWhole ? 0 : min(places, max(0, -rounded.exponent)))
    }
}

extension FHIRPathValue {
    var isDate: Bool {
        if case .date = self { return true }
        return false
    }
}
