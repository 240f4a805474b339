import Testing
@testable import FHIRClient

@Suite("Secrets named in a configuration")
struct SecretSourceTests {
    @Test("a token from a file or the environment follows the bearer rule: its first line, trimmed, one word; anything else is no token")
    func bearerRule() {
        func token(_ value: String?) -> String? {
            SecretSource.environment("TOKEN").read(environment: value.map { ["TOKEN": $0] } ?? [:])
        }
        #expect(token("abc.def-123\n") == "abc.def-123")
        #expect(token("  abc  \r\nX-Injected: yes\r\n") == "abc")
        #expect(token("abc\u{85}second line") == "abc")
        #expect(token("\nabc") == nil, "the first line is empty")
        #expect(token("two words") == nil)
        #expect(token("ab\u{7}c") == nil)
        #expect(token("") == nil && token(nil) == nil)
        #expect(SecretSource.file("/nonexistent/token").read() == nil)
    }
}
