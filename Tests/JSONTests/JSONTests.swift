import Foundation
import Testing
@testable import JSON

@Suite("JSON")
struct JSONTests {
    @Test("one escaping rule: short escapes for \\\" \\\\ \\n \\r \\t \\b \\f, \\u00XX for other control characters, / and non-ASCII as they are")
    func escaping() throws {
        let text = "q\"b\\s/n\nr\rt\tb\u{08}f\u{0C}x\u{01}y\u{1F}é😀"
        #expect(JSONValue.string(text).serialized() == #""q\"b\\s/n\nr\rt\tb\bf\fx\u0001y\u001fé😀""#)
        var writer = JSONWriter()
        writer.string(text)
        #expect(String(decoding: writer.bytes, as: UTF8.self) == JSONValue.string(text).serialized(), "the fast writer escapes alike")
        #expect(try JSONValue.parse(JSONValue.string(text).serialized()) == .string(text))
    }

    @Test("every escape JSON allows is read; bad escapes and unpaired surrogates are errors with their place")
    func unescaping() throws {
        #expect(try JSONValue.parse(#""\u00e9\/\ud83d\ude00\b""#) == .string("é/😀\u{08}"))
        for (text, message) in [(#""\x""#, "1:2: bad escape '\\x'"), (#""\ud83d""#, "1:2: unpaired surrogate in \\u escape"),
                                (#""ab\u12""#, "1:4: bad \\u escape"), ("\"a\u{01}\"", "1:3: control character in a string (escape it)")] {
            #expect(throws: JSONSyntaxError.self) { try JSONValue.parse(text) }
            do { _ = try JSONValue.parse(text) } catch { #expect(error.description == message, "\(text)") }
        }
    }

    @Test("syntax errors name the line and column")
    func positions() {
        func message(_ text: String) -> String {
            do { _ = try JSONValue.parse(text); return "parsed" } catch { return error.description }
        }
        #expect(message("{\n  \"a\": 1,\n  \"b\" 2\n}") == "3:7: expected ':'")
        #expect(message("[1, 2") == "1:6: unterminated array")
        #expect(message("{\"a\": tru}") == "1:7: expected a value")
        #expect(message("[" + String(repeating: "[", count: 300)) .hasSuffix("nesting too deep"))
        #expect(message("1 2") == "1:3: unexpected content after the JSON value")
        #expect(message("[1e400]") == "1:2: the number is out of range (past ±1.8e308)")
        #expect(message("-1e309") == "1:1: the number is out of range (past ±1.8e308)")
    }

    @Test("values round-trip; objects keep their order unless keys are sorted, and compare without order")
    func roundTrip() throws {
        let value = JSONValue.object([("b", .array([.number(1), .number(2.5), .null, .bool(true)])), ("a", .string("x"))])
        #expect(value.serialized() == #"{"b":[1,2.5,null,true],"a":"x"}"#)
        #expect(value.serialized(sortedKeys: true) == #"{"a":"x","b":[1,2.5,null,true]}"#)
        #expect(value.serialized(pretty: true) == "{\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ],\n  \"a\": \"x\"\n}")
        #expect(try JSONValue.parse(value.serialized(pretty: true)) == value)
        #expect(JSONValue.object([("a", .string("x")), ("b", .null)]) == .object([("b", .null), ("a", .string("x"))]))
    }

    @Test("the fast writer nests objects and arrays with their commas")
    func writer() {
        var w = JSONWriter()
        w.beginObject()
        w.key("id"); w.string("a")
        w.key("n"); w.number(3)
        w.key(dynamic: "we\"ird"); w.beginArray(); w.bool(false); w.null(); w.number(0.5); w.endArray()
        w.key("u"); w.uuid(UUID(uuidString: "00000000-0000-0000-0000-0000000000AB")!)
        w.endObject()
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"id":"a","n":3,"we\"ird":[false,null,0.5],"u":"00000000-0000-0000-0000-0000000000AB"}"#)
    }
}
