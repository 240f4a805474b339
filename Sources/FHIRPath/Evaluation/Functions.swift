import Diagnostics
import FHIR
import Foundation

/// FHIRPath's function library (existence, filtering, subsetting, combining, conversion, string,
/// math, tree navigation, utility and type functions) and FHIR's additions (`extension`,
/// `hasValue`, `resolve`...).
enum Functions {
    /// Arity limits per function (minimum, maximum arguments), used by the evaluator and the checker.
    static let arity: [String: ClosedRange<Int>] = Dictionary(uniqueKeysWithValues: ID.allCases.map { ($0.rawValue, $0.arity) })

    /// A function's identity, resolved once when an expression is parsed: the evaluator
    /// dispatches on it rather than comparing the name's text with every function's.
    enum ID: String, Sendable, CaseIterable {
        case empty, exists, all, allTrue, anyTrue, allFalse, anyFalse, subsetOf, supersetOf, count, distinct, isDistinct
        case `where`, select, `repeat`, ofType, aggregate, single, first, last, tail, skip, take, intersect, exclude, union, combine
        case iif, toBoolean, convertsToBoolean, toInteger, convertsToInteger, toDate, convertsToDate, toDateTime, convertsToDateTime
        case toDecimal, convertsToDecimal, toQuantity, convertsToQuantity, toString, convertsToString, toTime, convertsToTime
        case indexOf, substring, startsWith, endsWith, contains, upper, lower, replace, matches, matchesFull, replaceMatches
        case length, toChars, trim, split, join, encode, decode, escape, unescape
        case abs, ceiling, exp, floor, ln, log, power, round, sqrt, truncate
        case children, descendants, trace, now, today, timeOfDay, not, `is`, `as`, type
        case `extension`, hasValue, getValue, resolve, conformsTo, lowBoundary, highBoundary, precision, comparable, sort
        case memberOf, subsumes, subsumedBy, htmlChecks, elementDefinition, slice, checkModifiers, ordinal, weight, sum

        /// How many arguments the function takes (minimum...maximum).
        var arity: ClosedRange<Int> {
            switch self {
            case .exists, .toQuantity, .convertsToQuantity, .join, .round, .lowBoundary, .highBoundary: 0...1
            case .sort: 0...9
            case .all, .subsetOf, .supersetOf, .`where`, .select, .`repeat`, .ofType, .skip, .take, .intersect, .exclude, .union,
                 .combine, .indexOf, .startsWith, .endsWith, .contains, .split, .encode, .decode, .escape, .unescape, .log, .power,
                 .`is`, .`as`, .`extension`, .conformsTo, .comparable, .memberOf, .subsumes, .subsumedBy, .checkModifiers: 1...1
            case .aggregate, .substring, .matches, .matchesFull, .trace: 1...2
            case .replace, .slice: 2...2
            case .iif, .replaceMatches: 2...3
            default: 0...0 // the rest take none
            }
        }
    }

    /// The functions by name, with their identity and arity.
    static let table: [String: FunctionReference] = Dictionary(uniqueKeysWithValues: ID.allCases.map { id in
        (id.rawValue, FunctionReference(id: id, arity: id.arity))
    })

    static func call(_ function: FunctionReference?, _ name: String, on input: [FHIRPathValue], arguments: [ExpressionNode], context: [FHIRPathValue],
                     focus: Focus, evaluator: Evaluator, at position: SourceLocation) throws(FHIRPathError) -> [FHIRPathValue] {
        guard let function else { throw .evaluation(position, "unknown function \(name)()") }
        let range = function.arity
        guard range.contains(arguments.count) else {
            let expected = range.lowerBound == range.upperBound ? "\(range.lowerBound)" : "\(range.lowerBound) to \(range.upperBound)"
            throw .evaluation(position, "\(name)() takes \(expected) argument\(range.upperBound == 1 ? "" : "s"), found \(arguments.count)")
        }
        /// An ordinary argument: evaluated once, against the context the call chain started from.
        func argument(_ i: Int) throws(FHIRPathError) -> [FHIRPathValue] {
            try evaluator.evaluate(arguments[i], context, focus)
        }
        func single(_ i: Int, _ what: String) throws(FHIRPathError) -> FHIRPathValue? {
            try evaluator.singleton(try argument(i), arguments[i].position, "the \(what) of \(name)()").map(\.systemValue)
        }
        func integerArgument(_ i: Int) throws(FHIRPathError) -> Int? {
            guard let v = try single(i, "argument") else { return nil }
            guard case .integer(let n) = v else { throw .evaluation(arguments[i].position, "\(name)() expects an integer") }
            return n
        }
        func stringArgument(_ i: Int) throws(FHIRPathError) -> String? {
            guard let v = try single(i, "argument") else { return nil }
            guard case .string(let s) = v else { throw .evaluation(arguments[i].position, "\(name)() expects a string") }
            return s
        }
        /// A lambda argument, once per input item with `$this` and `$index`.
        func each(_ i: Int, _ item: FHIRPathValue, _ index: Int) throws(FHIRPathError) -> [FHIRPathValue] {
            try evaluator.evaluate(arguments[i], [item], Focus(this: [item], index: index, total: focus.total))
        }
        func criterion(_ i: Int, _ item: FHIRPathValue, _ index: Int) throws(FHIRPathError) -> Bool? {
            try evaluator.boolean(try each(i, item, index), arguments[i].position, "the criteria of \(name)()")
        }
        /// The single input item of a function on one value; nil for empty input.
        func subject(_ what: String = "input") throws(FHIRPathError) -> FHIRPathValue? {
            try evaluator.singleton(input, position, "the \(what) of \(name)()").map(\.systemValue)
        }
        func stringSubject() throws(FHIRPathError) -> String? {
            guard let v = try subject() else { return nil }
            guard case .string(let s) = v else { throw .evaluation(position, "\(name)() works on a string, not \(Operators.describe(v))") }
            return s
        }
        func typeArgument(_ i: Int) throws(FHIRPathError) -> TypeSpecifier {
            guard let type = typeSpecifier(arguments[i]) else { throw .evaluation(arguments[i].position, "\(name)() expects a type name") }
            if type.namespace == nil, !FHIRPathValue.isKnownType(type) {
                throw .evaluation(arguments[i].position, "unknown type '\(type.name)'")
            }
            return type
        }

        switch function.id {
        // MARK: Existence
        case .empty: return FHIRPathValue.collection(input.isEmpty)
        case .exists:
            if arguments.isEmpty { return FHIRPathValue.collection(!input.isEmpty) }
            for (i, item) in input.enumerated() where try criterion(0, item, i) == true { return FHIRPathValue.collection(true) }
            return FHIRPathValue.collection(false)
        case .all:
            for (i, item) in input.enumerated() where try criterion(0, item, i) != true { return FHIRPathValue.collection(false) }
            return FHIRPathValue.collection(true)
        case .allTrue, .anyTrue, .allFalse, .anyFalse:
            var values: [Bool] = []
            for item in input {
                guard case .boolean(let b) = item.systemValue else { throw .evaluation(position, "\(name)() needs booleans") }
                values.append(b)
            }
            switch name {
            case "allTrue": return FHIRPathValue.collection(values.allSatisfy { $0 })
            case "anyTrue": return FHIRPathValue.collection(values.contains(true))
            case "allFalse": return FHIRPathValue.collection(values.allSatisfy { !$0 })
            default: return FHIRPathValue.collection(values.contains(false))
            }
        case .subsetOf:
            let other = try argument(0)
            return FHIRPathValue.collection(input.allSatisfy { x in other.contains { Operators.equal(x, $0) == true } })
        case .supersetOf:
            let other = try argument(0)
            return FHIRPathValue.collection(other.allSatisfy { x in input.contains { Operators.equal(x, $0) == true } })
        case .count: return [.integer(input.count)]
        case .distinct: return distinct(input)
        case .isDistinct: return FHIRPathValue.collection(distinct(input).count == input.count)

        // MARK: Filtering and projection
        case .`where`:
            var result: [FHIRPathValue] = []
            for (i, item) in input.enumerated() where try criterion(0, item, i) == true { result.append(item) }
            return result
        case .select:
            var result: [FHIRPathValue] = []
            for (i, item) in input.enumerated() { result.append(contentsOf: try each(0, item, i)) }
            return result
        case .`repeat`:
            var result: [FHIRPathValue] = []
            var queue = input
            var guardCount = 0
            while !queue.isEmpty {
                var next: [FHIRPathValue] = []
                for (i, item) in queue.enumerated() {
                    for produced in try each(0, item, i) where !result.contains(where: { Operators.equal($0, produced) == true }) {
                        result.append(produced)
                        next.append(produced)
                    }
                }
                queue = next
                guardCount += 1
                if guardCount > 10_000 { throw .evaluation(position, "repeat() did not finish after 10,000 rounds") }
            }
            return result
        case .ofType:
            let type = try typeArgument(0)
            return input.filter { $0.isType(type, exactPrimitive: true) }
        case .aggregate:
            var total = arguments.count > 1 ? try argument(1) : []
            for (i, item) in input.enumerated() {
                total = try evaluator.evaluate(arguments[0], [item], Focus(this: [item], index: i, total: total))
            }
            return total

        // MARK: Subsetting
        case .single:
            guard input.count <= 1 else { throw .evaluation(position, "single() on \(input.count) items") }
            return input
        case .first: return input.first.map { [$0] } ?? []
        case .last: return input.last.map { [$0] } ?? []
        case .tail: return Array(input.dropFirst())
        case .skip:
            guard let n = try integerArgument(0) else { return input }
            return Array(input.dropFirst(max(0, n)))
        case .take:
            guard let n = try integerArgument(0) else { return [] }
            return Array(input.prefix(max(0, n)))
        case .intersect:
            let other = try argument(0)
            return distinct(input.filter { x in other.contains { Operators.equal(x, $0) == true } })
        case .exclude:
            let other = try argument(0)
            return input.filter { x in !other.contains { Operators.equal(x, $0) == true } }

        // MARK: Combining
        case .union: return distinct(input + (try argument(0)))
        case .combine: return input + (try argument(0))

        // MARK: Conversion
        case .iif:
            guard input.count <= 1 else { throw .evaluation(position, "iif() on \(input.count) items") }
            let start = input.isEmpty ? context : input
            let condition = try evaluator.evaluate(arguments[0], start, input.isEmpty ? focus : Focus(this: input, index: 0, total: focus.total))
            let chosen: Bool
            switch condition.count {
            case 0: chosen = false
            case 1:
                guard case .boolean(let b) = condition[0].systemValue else {
                    throw .evaluation(arguments[0].position, "the criterion of iif() must be a boolean")
                }
                chosen = b
            default: throw .evaluation(arguments[0].position, "the criterion of iif() must be a single boolean")
            }
            if chosen { return try evaluator.evaluate(arguments[1], start, focus) }
            return arguments.count > 2 ? try evaluator.evaluate(arguments[2], start, focus) : []
        case .toBoolean, .convertsToBoolean, .toInteger, .convertsToInteger, .toDecimal, .convertsToDecimal,
             .toString, .convertsToString, .toDate, .convertsToDate, .toDateTime, .convertsToDateTime,
             .toTime, .convertsToTime, .toQuantity, .convertsToQuantity:
            guard let item = try subject() else { return [] }
            let unit = arguments.isEmpty ? nil : try stringArgument(0)
            let converted = Conversions.convert(item, name.hasPrefix("to") ? name : "to" + name.dropFirst("convertsTo".count), unit: unit)
            if name.hasPrefix("convertsTo") { return FHIRPathValue.collection(converted != nil) }
            return converted.map { [$0] } ?? []

        // MARK: Strings
        case .indexOf:
            guard let s = try stringSubject(), let sub = try stringArgument(0) else { return [] }
            if sub.isEmpty { return [.integer(0)] }
            guard let r = s.range(of: sub) else { return [.integer(-1)] }
            return [.integer(s.distance(from: s.startIndex, to: r.lowerBound))]
        case .substring:
            guard let s = try stringSubject(), let start = try integerArgument(0) else { return [] }
            let characters = Array(s)
            guard start >= 0, start < characters.count else { return [] }
            var length = characters.count - start
            if arguments.count > 1 {
                guard let l = try integerArgument(1) else { return [.string(String(characters[start...]))] }
                length = min(max(0, l), length)
            }
            return [.string(String(characters[start..<(start + length)]))]
        case .startsWith:
            guard let s = try stringSubject(), let p = try stringArgument(0) else { return [] }
            return FHIRPathValue.collection(s.hasPrefix(p))
        case .endsWith:
            guard let s = try stringSubject(), let p = try stringArgument(0) else { return [] }
            return FHIRPathValue.collection(s.hasSuffix(p))
        case .contains:
            guard let s = try stringSubject(), let p = try stringArgument(0) else { return [] }
            return FHIRPathValue.collection(p.isEmpty || s.contains(p))
        case .upper:
            return try stringSubject().map { [.string($0.uppercased())] } ?? []
        case .lower:
            return try stringSubject().map { [.string($0.lowercased())] } ?? []
        case .replace:
            guard let s = try stringSubject(), let pattern = try stringArgument(0), let substitution = try stringArgument(1) else { return [] }
            if pattern.isEmpty {
                return [.string(substitution + s.map { String($0) }.joined(separator: substitution) + (s.isEmpty ? "" : substitution))]
            }
            return [.string(s.replacingOccurrences(of: pattern, with: substitution))]
        case .matches, .matchesFull:
            guard let s = try stringSubject(), let pattern = try stringArgument(0) else { return [] }
            let regex = try Functions.regex(name == "matchesFull" ? "^(?:\(pattern))$" : pattern, at: arguments[0].position)
            return FHIRPathValue.collection(s.firstMatch(of: regex) != nil)
        case .replaceMatches:
            guard let s = try stringSubject(), let pattern = try stringArgument(0), let substitution = try stringArgument(1) else { return [] }
            if pattern.isEmpty { return [.string(s)] }
            let regex = try Functions.regex(pattern, at: arguments[0].position)
            return [.string(s.replacing(regex) { Functions.substitute(substitution, $0) })]
        case .length:
            return try stringSubject().map { [.integer($0.count)] } ?? []
        case .toChars:
            return try stringSubject().map { $0.map { .string(String($0)) } } ?? []
        case .trim:
            return try stringSubject().map { [.string($0.trimmingCharacters(in: .whitespacesAndNewlines))] } ?? []
        case .split:
            guard let s = try stringSubject(), let separator = try stringArgument(0) else { return [] }
            if separator.isEmpty { return s.map { .string(String($0)) } }
            return s.components(separatedBy: separator).map { .string($0) }
        case .join:
            let separator = arguments.isEmpty ? "" : (try stringArgument(0) ?? "")
            var parts: [String] = []
            for item in input {
                guard case .string(let s) = item.systemValue else { throw .evaluation(position, "join() needs strings") }
                parts.append(s)
            }
            return [.string(parts.joined(separator: separator))]
        case .encode, .decode, .escape, .unescape:
            guard let s = try stringSubject(), let format = try stringArgument(0) else { return [] }
            return Conversions.code(name, s, format).map { [.string($0)] } ?? []

        // MARK: Math
        case .abs, .ceiling, .exp, .floor, .ln, .sqrt, .truncate, .round, .log, .power:
            guard let item = try subject() else { return [] }
            var extra: FHIRPathValue?
            if arguments.count > 0 {
                guard let a = try single(0, "argument") else { return [] }
                extra = a
            }
            return try MathFunctions.apply(name, item, extra, at: position).map { [$0] } ?? []

        // MARK: Tree navigation
        case .children:
            return input.flatMap { item -> [FHIRPathValue] in
                guard case .element(let e) = item else { return [] }
                return e.children.map { .element($0) }
            }
        case .descendants:
            var result: [FHIRPathValue] = []
            func walk(_ e: Element) {
                for child in e.children {
                    result.append(.element(child))
                    walk(child)
                }
            }
            for item in input { if case .element(let e) = item { walk(e) } }
            return result

        // MARK: Utility
        case .trace:
            let label = try stringArgument(0) ?? ""
            if arguments.count > 1 {
                var projected: [FHIRPathValue] = []
                for (i, item) in input.enumerated() { projected.append(contentsOf: try each(1, item, i)) }
                evaluator.environment.trace?(label, projected)
            } else {
                evaluator.environment.trace?(label, input)
            }
            return input
        case .now:
            evaluator.environment.outsideReads?.note()
            return [.dateTime(Conversions.dateTime(evaluator.environment.now))]
        case .today:
            evaluator.environment.outsideReads?.note()
            var d = Conversions.dateTime(evaluator.environment.now)
            d.hour = nil; d.minute = nil; d.second = nil; d.fraction = nil; d.offset = nil; d.hasTime = false
            return [.date(d)]
        case .timeOfDay:
            evaluator.environment.outsideReads?.note()
            let d = Conversions.dateTime(evaluator.environment.now)
            return [.time(PartialTime(d.description.split(separator: "T")[1].prefix(12).description)!)]
        case .not:
            guard let b = try evaluator.boolean(input, position, "the input of not()") else { return [] }
            return FHIRPathValue.collection(!b)

        // MARK: Types
        case .`is`:
            guard let item = try evaluator.singleton(input, position, "the input of is()") else { return [] }
            return FHIRPathValue.collection(item.isType(try typeArgument(0)))
        case .`as`:
            if input.count > 1 && evaluator.environment.lenientCollections {
                let type = try typeArgument(0)
                return input.filter { $0.isType(type, exactPrimitive: true) }
            }
            guard let item = try evaluator.singleton(input, position, "the input of as()") else { return [] }
            return item.isType(try typeArgument(0), exactPrimitive: true) ? [item] : []
        case .type:
            return input.map { let t = $0.typeInfo; return .typeInfo(namespace: t.namespace, name: t.name) }

        // MARK: FHIR
        case .`extension`:
            guard let url = try stringArgument(0) else { return [] }
            return input.flatMap { item -> [FHIRPathValue] in
                guard case .element(let e) = item else { return [] }
                return e.children.filter { $0.name == "extension" && $0.string("url") == url }.map { .element($0) }
            }
        case .ordinal, .weight:
            return input.compactMap(Self.weight)
        case .sum:
            return try Self.sum(input, at: position)
        case .hasValue:
            guard input.count == 1, case .element(let e) = input[0], e.isPrimitive else { return FHIRPathValue.collection(false) }
            return FHIRPathValue.collection(e.value != nil)
        case .getValue:
            guard input.count == 1, case .element(let e) = input[0], e.isPrimitive, e.value != nil else { return [] }
            return [input[0].systemValue]
        case .resolve:
            evaluator.environment.outsideReads?.note()
            return input.compactMap { References.resolve($0, in: evaluator.environment) }.map { .element($0) }
        case .conformsTo:
            guard let url = try stringArgument(0) else { return [] }
            let prefix = "http://hl7.org/fhir/StructureDefinition/"
            guard url.hasPrefix(prefix) else { throw .evaluation(arguments[0].position, "conformsTo() knows only the core profiles (\(prefix)...)") }
            let type = String(url.dropFirst(prefix.count))
            guard ModelInfo.r4.type(named: type) != nil else { throw .evaluation(arguments[0].position, "no such profile \(url)") }
            return input.map { item in
                guard case .element(let e) = item, let def = e.definition else { return .boolean(false) }
                return .boolean(ModelInfo.r4.isType(def, derivedFrom: type))
            }
        case .lowBoundary, .highBoundary, .precision:
            guard let item = try subject() else { return [] }
            let digits = arguments.isEmpty ? nil : try integerArgument(0)
            return Boundaries.apply(name, item, digits: digits).map { [$0] } ?? []
        case .comparable:
            guard let item = try subject(), let other = try single(0, "argument") else { return [] }
            guard case .quantity(let p) = item, case .quantity(let q) = other else { throw .evaluation(position, "comparable() works on quantities") }
            return FHIRPathValue.collection(p.compare(to: q) != nil)
        case .sort:
            return try sort(input, arguments, evaluator: evaluator, focus: focus, at: position)
        case .htmlChecks:
            guard let item = try evaluator.singleton(input, position, "the input of htmlChecks()") else { return [] }
            guard case .element(let div) = item, let text = div.value else { return FHIRPathValue.collection(false) }
            return FHIRPathValue.collection(Narrative.problem(text) == nil)
        case .memberOf:
            guard let valueSet = try stringArgument(0) else { return [] }
            guard let item = try evaluator.singleton(input, position, "the input of memberOf()") else { return [] }
            guard let check = evaluator.environment.memberOf else {
                throw .evaluation(position, "memberOf() needs value sets, which this evaluation was not given")
            }
            guard let member = check(item, valueSet) else {
                throw .evaluation(position, "memberOf('\(valueSet)') cannot be checked: the value set cannot be expanded here")
            }
            return FHIRPathValue.collection(member)
        default:
            throw .evaluation(position, "\(name)() is not supported by this engine (it needs a terminology service or profiles)")
        }
    }

    /// A type name given as a function argument (`ofType(Quantity)`, `is(FHIR.Patient)`).
    static func typeSpecifier(_ node: ExpressionNode) -> TypeSpecifier? {
        switch node.kind {
        case .member(nil, let name): TypeSpecifier(namespace: nil, name: name)
        case .member(let base?, let name):
            if case .member(nil, let ns) = base.kind, ns == "FHIR" || ns == "System" { TypeSpecifier(namespace: ns, name: name) } else { nil }
        default: nil
        }
    }

    /// Items in order with later duplicates (by `=`) removed.
    static func distinct(_ items: [FHIRPathValue]) -> [FHIRPathValue] {
        var result: [FHIRPathValue] = []
        for item in items where !result.contains(where: { Operators.equal($0, item) == true }) { result.append(item) }
        return result
    }

    /// The string form FHIRPath's `toString()` gives, or nil for items that have none.
    static func string(of item: FHIRPathValue) -> String? {
        switch item.systemValue {
        case .string(let s): s
        case .boolean(let b): b ? "true" : "false"
        case .integer(let i): String(i)
        case .decimal(let d): d.description
        case .date(let d), .dateTime(let d): d.description
        case .time(let t): t.description
        case .quantity(let q): q.description
        default: nil
        }
    }

    /// A FHIRPath regular expression (`matches`, `replaceMatches`): PCRE/ICU syntax, `.` matching
    /// line breaks too, over Unicode scalars as ICU does. Swift's own `Regex`, not
    /// `NSRegularExpression`: corelibs Foundation leaks the UTF-16 copy of every pattern longer
    /// than 256 characters it compiles (`_CFRegularExpressionCreate`), a leak data could drive.
    static func regex(_ pattern: String, at position: SourceLocation) throws(FHIRPathError) -> Regex<AnyRegexOutput> {
        do {
            return try Regex(pattern).dotMatchesNewlines().matchingSemantics(.unicodeScalar)
        } catch {
            throw .evaluation(position, "invalid regular expression '\(pattern)'")
        }
    }

    /// `replaceMatches`' substitution for one match: `$1`…`$n` name capture groups (the longest
    /// number that names a group; a group that did not take part is empty), `\$` is a dollar
    /// sign and `\\` a backslash; everything else is literal.
    static func substitute(_ template: String, _ match: Regex<AnyRegexOutput>.Match) -> String {
        var out = ""
        var i = template.startIndex
        while i < template.endIndex {
            let c = template[i]
            let next = template.index(after: i)
            if c == "\\", next < template.endIndex {
                out.append(template[next]); i = template.index(after: next); continue
            }
            guard c == "$", next < template.endIndex, template[next].isASCII, template[next].isNumber else {
                out.append(c); i = next; continue
            }
            var group = 0
            var end = next
            while end < template.endIndex, let digit = template[end].wholeNumberValue, template[end].isASCII,
                  group * 10 + digit < match.output.count {
                group = group * 10 + digit
                end = template.index(after: end)
            }
            if end == next { out.append(c); i = next; continue }
            if let text = match.output[group].substring { out += text }
            i = end
        }
        return out
    }

    /// `sort()` (FHIRPath 2.1): by the items themselves, or by key expressions; a key prefixed
    /// with unary minus sorts descending.
    static func sort(_ input: [FHIRPathValue], _ arguments: [ExpressionNode], evaluator: Evaluator, focus: Focus,
                     at position: SourceLocation) throws(FHIRPathError) -> [FHIRPathValue] {
        var keyed: [(item: FHIRPathValue, keys: [FHIRPathValue?])] = []
        for (i, item) in input.enumerated() {
            var keys: [FHIRPathValue?] = []
            if arguments.isEmpty {
                keys.append(item.systemValue)
            } else {
                for argument in arguments {
                    var node = argument
                    if case .unary(.minus, let inner) = argument.kind { node = inner }
                    keys.append(try evaluator.evaluate(node, [item], Focus(this: [item], index: i, total: focus.total)).first?.systemValue)
                }
            }
            keyed.append((item, keys))
        }
        let descending = arguments.map { if case .unary(.minus, _) = $0.kind { true } else { false } }
        var failure: FHIRPathError?
        keyed.sort { a, b in
            for k in 0..<a.keys.count {
                let desc = k < descending.count && descending[k]
                switch (a.keys[k], b.keys[k]) {
                case (nil, nil): continue
                // Items without a key come first, in either direction.
                case (nil, _): return true
                case (_, nil): return false
                case let (x?, y?):
                    do {
                        guard let c = try Operators.compare(x, y, at: position), c != 0 else { continue }
                        return desc ? c > 0 : c < 0
                    } catch let error as FHIRPathError {
                        failure = error
                        return false
                    } catch {
                        return false
                    }
                }
            }
            return false
        }
        if let failure { throw failure }
        return keyed.map(\.item)
    }

    /// SDC's `ordinal()` and `weight()`: a Coding's (or an answer option's) score, from its
    /// `ordinalValue` (R4) or `itemWeight` (later) extension.
    static func weight(_ item: FHIRPathValue) -> FHIRPathValue? {
        guard case .element(let element) = item else { return nil }
        let urls = ["http://hl7.org/fhir/StructureDefinition/ordinalValue", "http://hl7.org/fhir/StructureDefinition/itemWeight"]
        let found = element.children.first { $0.name == "extension" && urls.contains($0.string("url") ?? "") }
        return found?["value"]?.value.flatMap { FHIRPathDecimal(fhirLexical: $0) }.map { .decimal($0) }
    }

    /// SDC's `sum()`: the total of numbers (integers stay integers), empty for an empty input.
    static func sum(_ input: [FHIRPathValue], at position: SourceLocation) throws(FHIRPathError) -> [FHIRPathValue] {
        guard !input.isEmpty else { return [] }
        var integer = 0
        var decimal: FHIRPathDecimal?
        for item in input {
            switch item.systemValue {
            case .integer(let i):
                let (total, overflow) = integer.addingReportingOverflow(i)
                guard !overflow else { throw .evaluation(position, "sum() overflows an Integer") }
                integer = total
            case .decimal(let d):
                guard let total = (decimal ?? FHIRPathDecimal(0)).adding(d) else { throw .evaluation(position, "sum() overflows a Decimal") }
                decimal = total
            default: throw .evaluation(position, "sum() adds numbers, not \(item.typeInfo.name)")
            }
        }
        guard let decimal else { return [.integer(integer)] }
        guard let total = decimal.adding(FHIRPathDecimal(integer)) else { throw .evaluation(position, "sum() overflows a Decimal") }
        return [.decimal(total)]
    }
}
