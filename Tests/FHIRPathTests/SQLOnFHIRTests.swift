import FHIR
import Foundation
import Testing
@testable import FHIRPath

/// The SQL-on-FHIR FHIRPath tests: each view's columns are FHIRPath expressions evaluated on
/// every resource of the view's type; a column is one value (or null), or an array when marked
/// `collection`.
@Suite("SQL-on-FHIR FHIRPath tests")
struct SQLOnFHIRTests {
    /// A result item as the JSON value a view row holds.
    static func json(_ item: FHIRPathValue) -> AnyHashable? {
        switch item.systemValue {
        case .string(let s): s
        case .boolean(let b): b
        case .integer(let i): Decimal(i)
        case .decimal(let d): d.value
        case .date(let d), .dateTime(let d): d.description
        case .time(let t): t.description
        default: nil
        }
    }

    static func expected(_ value: Any) -> AnyHashable? {
        switch value {
        case is NSNull: nil
        case let b as Bool where type(of: value) == Bool.self: b
        case let n as NSNumber:
            // JSON true/false may arrive as NSNumber: tell them from 1 and 0 by their C type.
            String(cString: n.objCType) == "c" || String(cString: n.objCType) == "B" ? AnyHashable(n.boolValue) : AnyHashable(n.decimalValue)
        case let s as String: s
        case let a as [Any]: a.map { expected($0) } as [AnyHashable?]
        default: "\(value)"
        }
    }

    @Test("every test of fhirpath.json and fhirpath_numbers.json gives the expected rows")
    func sqlOnFHIR() throws {
        guard let root = FHIRPathShared.root else { FHIRPathShared.skipNotice("SQL-on-FHIR FHIRPath tests"); return }
        var passed = 0, total = 0
        for file in ["fhirpath.json", "fhirpath_numbers.json"] {
            let data = try Data(contentsOf: root.appendingPathComponent("fhirpath/sql-on-fhir/\(file)"))
            let document = try JSONSerialization.jsonObject(with: data) as! [String: Any]
            let resources = try (document["resources"] as! [[String: Any]]).map { object in
                try FHIRJSONReader().read(Array(try JSONSerialization.data(withJSONObject: object))).resource
            }
            for test in document["tests"] as! [[String: Any]] {
                total += 1
                let title = test["title"] as! String
                let view = test["view"] as! [String: Any]
                let columns = (view["select"] as! [[String: Any]]).flatMap { $0["column"] as! [[String: Any]] }
                let compiled = try columns.map { try FHIRPathExpression($0["path"] as! String) }
                var rows: [[String: AnyHashable?]] = []
                for resource in resources where resource.resourceType == view["resource"] as? String {
                    var row: [String: AnyHashable?] = [:]
                    for (column, expression) in zip(columns, compiled) {
                        let result = try expression.evaluate(on: resource)
                        if column["collection"] as? Bool == true {
                            row[column["name"] as! String] = result.map { Self.json($0) } as [AnyHashable?]
                        } else {
                            #expect(result.count <= 1, "\(title): column \(column["name"]!) gave \(result.count) values")
                            row[column["name"] as! String] = result.first.flatMap { Self.json($0) }
                        }
                    }
                    rows.append(row)
                }
                let expectedRows = (test["expect"] as! [[String: Any]]).map { $0.mapValues { Self.expected($0) } }
                let same = rows.count == expectedRows.count && zip(rows, expectedRows).allSatisfy { got, want in
                    Set(got.keys) == Set(want.keys) && got.keys.allSatisfy { got[$0]! == want[$0]! }
                }
                #expect(same, "\(file) \(title): got \(rows), expected \(expectedRows)")
                if same { passed += 1 }
            }
        }
        print("SQL-on-FHIR FHIRPath tests: \(passed)/\(total) passed")
        #expect(total == 12)
    }
}
