import Testing
@testable import HeraldCore

@Suite struct JSONWriterTests {
    @Test func serialisesDeterministicallyAndRoundTrips() throws {
        let text = #"{"z":1,"a":[true,null,"q\"\\\u0001"],"m":{"k":-0.5}}"#
        let value = try JSONValue.parse(text)
        let once = value.serialized()
        #expect(once == #"{"a":[true,null,"q\"\\\u0001"],"m":{"k":-0.5},"z":1}"#)
        #expect(try JSONValue.parse(once) == value)
    }

    @Test func stringsEscapeWhatJSONRequiresAndCopyTheRest() throws {
        let cases: [(String, String)] = [
            ("", #""""#),
            ("plain text, no escapes", #""plain text, no escapes""#),
            ("\"lead", #""\"lead""#),
            ("trail\\", #""trail\\""#),
            ("a\tb\nc\rd\u{1f}e\u{0}", #""a\tb\nc\rd\u001fe\u0000""#),
            ("é 😀 / ü", "\"é 😀 / ü\""),
        ]
        for (string, expected) in cases {
            var out: [UInt8] = []
            JSONValue.writeString(string, into: &out)
            #expect(String(decoding: out, as: UTF8.self) == expected)
            #expect(try JSONValue.parse(out) == .string(string))
        }
    }
}
