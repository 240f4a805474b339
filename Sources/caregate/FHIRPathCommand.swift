import ArgumentParser
import FHIR
import FHIRPath
import JSON
import Foundation

/// `caregate fhirpath EXPRESSION FILE... [--var NAME=VALUE] [--check TYPE]`
struct FHIRPathCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fhirpath",
        abstract: "Evaluate a FHIRPath expression on FHIR resources, or type-check it against a resource type.",
        discussion: """
            Prints one line per input file: the result collection as JSON. FHIR types are kept: \
            a Quantity prints as a Quantity object, a date keeps its precision ("2026-11"), a \
            CodeableConcept prints as FHIR JSON. System values print as JSON values; System \
            quantities as {"value", "unit", "system", "code"}.

            With --check TYPE no file is read: the expression is typed against the R4 definitions \
            for TYPE, and errors (unknown elements, with suggestions) and warnings are listed with \
            their line and column. The exit status is 1 when there are errors.

            Examples:
              caregate fhirpath "activity.detail.code.coding.code" \\
                  FHIRSamples/json/CarePlan-maria-lopez-home-care.json
              caregate fhirpath "value.ofType(Quantity)" FHIRSamples/json/Observation*
              caregate fhirpath "entry.resource.ofType(CarePlan).subject.resolve().name" \\
                  FHIRSamples/bundle/maria-lopez-demo-bundle.json
              caregate fhirpath "effective > %since" obs.json --var since=@2026-11-01
              caregate fhirpath --check CarePlan \\
                  "activity.detail.scheduled.ofType(Timing).repeat"
              caregate fhirpath --check CarePlan "activity.detail.scheduledTiming"
            """)

    @Argument(help: "The FHIRPath expression.")
    var expression: String

    @Argument(help: "FHIR resources to evaluate on (JSON or XML).", completion: .file())
    var files: [String] = []

    @Option(name: .customLong("var"), parsing: .singleValue,
            help: ArgumentHelp("A variable for the expression, as NAME=VALUE; VALUE is a FHIRPath literal (500, 'text', @2026-11-01, 5 'mg') or else a string.", valueName: "name=value"))
    var variables: [String] = []

    @Option(name: .long, help: ArgumentHelp("Type-check the expression against this resource type instead of evaluating it.", valueName: "type"))
    var check: String?

    @Flag(name: .customLong("json-choice-names"), help: "Accept FHIR's JSON spelling of a choice (scheduledTiming) as scheduled.ofType(Timing), checking and evaluating, instead of refusing it.")
    var jsonChoiceNames = false

    func validate() throws {
        if check == nil && files.isEmpty { throw ValidationError("give at least one file to evaluate on, or --check TYPE") }
        if check != nil && !files.isEmpty { throw ValidationError("--check types the expression without data; leave out the files") }
    }

    func run() throws {
        let compiled: FHIRPathExpression
        do {
            compiled = try FHIRPathExpression(expression)
        } catch {
            throw CommandError.message("expression \(error)")
        }
        var values: [String: [FHIRPathValue]] = [:]
        for assignment in variables {
            guard let equals = assignment.firstIndex(of: "="), equals != assignment.startIndex else {
                throw ValidationError("--var needs NAME=VALUE, found '\(assignment)'")
            }
            let name = String(assignment[..<equals])
            values[name] = FHIRPathCommand.literal(String(assignment[assignment.index(after: equals)...]))
        }
        if let type = check {
            guard ModelInfo.r4.type(named: type) != nil else {
                throw CommandError.message("--check: '\(type)' is not an R4 type")
            }
            let checker = FHIRPathChecker(rootType: type, variables: values.mapValues { items in
                InferredType(types: Set(items.map { .system($0.systemValue.typeInfoName) }), isCollection: items.count > 1)
            }, strict: !jsonChoiceNames)
            let diagnostics = checker.check(compiled)
            for d in diagnostics { print(d) }
            print("result: \(checker.resultType(compiled))")
            if diagnostics.contains(where: { $0.severity == .error }) { throw ExitCode(1) }
            return
        }
        var failed = false
        for file in files {
            do {
                let resource = try FHIRDocument.read(contentsOf: file).resource
                let result = try compiled.evaluate(on: resource, variables: values, jsonChoiceNames: jsonChoiceNames)
                print(FHIRPathCommand.json(result))
            } catch let error as FHIRPathError {
                FileHandle.standardError.write(Data("caregate: error: \(file): expression \(error)\n".utf8))
                failed = true
            } catch let error as FHIRFormatError {
                for line in CommandError.fhir(error).lines { FileHandle.standardError.write(Data("caregate: \(line)\n".utf8)) }
                failed = true
            } catch {
                FileHandle.standardError.write(Data("caregate: error: \(error)\n".utf8))
                failed = true
            }
        }
        if failed { throw ExitCode(1) }
    }

    /// A `--var` value: a FHIRPath literal when it parses as one, else the text as a string.
    static func literal(_ text: String) -> [FHIRPathValue] {
        if let expression = try? FHIRPathExpression(text), case .literal(let value) = expression.root.kind { return [value] }
        if let expression = try? FHIRPathExpression(text), case .unary(.minus, let inner) = expression.root.kind,
           case .literal(let value) = inner.kind, let negated = try? FHIRPathExpression("-" + value.description).evaluate(on: Element(resourceType: "Basic")) {
            return negated
        }
        return [.string(text)]
    }

    /// The result collection as one line of JSON.
    static func json(_ items: [FHIRPathValue]) -> String {
        let writer = FHIRJSONWriter(pretty: false)
        func quote(_ s: String) -> String { JSONValue.string(s).serialized() }
        let parts = items.map { item -> String in
            switch item {
            case .element(let e): String(decoding: writer.writeValue(e), as: UTF8.self)
            case .boolean(let b): b ? "true" : "false"
            case .integer(let i): String(i)
            case .decimal(let d): d.description
            case .string(let s): quote(s)
            case .date(let d), .dateTime(let d): quote(d.description)
            case .time(let t): quote(t.description)
            case .quantity(let q):
                "{\"value\":\(q.value),\"unit\":\(quote(q.unit)),\"system\":\"http://unitsofmeasure.org\",\"code\":\(quote(q.unit))}"
            case .typeInfo(let namespace, let name): "{\"namespace\":\(quote(namespace)),\"name\":\(quote(name))}"
            }
        }
        return "[" + parts.joined(separator: ",") + "]"
    }
}

extension FHIRPathValue {
    /// The System type name of a value (`Integer`, `Date`...), for typing `--var` values.
    var typeInfoName: String {
        switch self {
        case .boolean: "Boolean"
        case .integer: "Integer"
        case .decimal: "Decimal"
        case .string: "String"
        case .date: "Date"
        case .dateTime: "DateTime"
        case .time: "Time"
        case .quantity: "Quantity"
        case .element(let e): e.typeName ?? "String"
        case .typeInfo: "String"
        }
    }
}
