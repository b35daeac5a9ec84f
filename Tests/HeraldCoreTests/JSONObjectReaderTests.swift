import Testing
import HeraldCore

@Suite struct JSONObjectReaderTests {
    private func reader(_ text: String) throws -> JSONObjectReader {
        try JSONObjectReader(try JSONValue.parse(text), at: .root)
    }

    @Test func requiredAndOptionalMembers() throws {
        let object = try reader(#"{"s":"x","n":5,"b":true,"z":null}"#)
        #expect(try object.string("s") == "x")
        #expect(try object.optionalString("missing") == nil)
        #expect(try object.int("n", in: 0...10) == 5)
        #expect(try object.optionalBool("b") == true)
        #expect(throws: ValidationError(at: JSONPath.root.appending("missing"), "is required")) { try object.string("missing") }
        // Null is not absence: producers should omit what they do not set.
        #expect(throws: ValidationError(at: JSONPath.root.appending("z"), "expected a string, got null")) { try object.optionalString("z") }
    }

    @Test func rangesAndLengths() throws {
        let object = try reader(#"{"n":11,"f":1.5,"s":"héllo"}"#)
        #expect(throws: ValidationError(at: JSONPath.root.appending("n"), "must be between 0 and 10")) { try object.int("n", in: 0...10) }
        #expect(throws: ValidationError(at: JSONPath.root.appending("f"), "expected an integer, got 1.5")) { try object.int("f", in: 0...10) }
        #expect(try object.string("s", StringRule(maxLength: 5)) == "héllo")
        #expect(throws: ValidationError(at: JSONPath.root.appending("s"), "must be at most 5 bytes of UTF-8")) {
            try object.string("s", StringRule(maxBytes: 5))
        }
    }

    @Test func arraysNameTheFirstElementOverTheLimit() throws {
        let object = try reader(#"{"a":[1,2,3,4],"e":[]}"#)
        #expect(throws: ValidationError(at: JSONPath.root.appending("a").appending(3), "at most 3 items")) {
            try object.array("a", count: 0...3, noun: "items")
        }
        #expect(throws: ValidationError(at: JSONPath.root.appending("e"), "must not be empty")) {
            try object.array("e", count: 1...3, noun: "items")
        }
    }
}
