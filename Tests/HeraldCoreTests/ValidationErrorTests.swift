import Testing
import HeraldCore

@Suite struct ValidationErrorTests {
    @Test func formatsPathsLikeTheJobAuthorWroteThem() {
        let path = JSONPath.root.appending("content").appending("buttons").appending(3)
        #expect(ValidationError(at: path, "at most 3 buttons").description == "content.buttons[3]: at most 3 buttons")
        #expect(ValidationError(at: .root, "not valid UTF-8").description == "not valid UTF-8")
        #expect(JSONPath.root.appending("audience").appending("filter").appending("and").appending(0).appending("tag").description
                == "audience.filter.and[0].tag")
    }

    @Test func recordsWhereItWasRaised() {
        func check() throws(ValidationError) { throw ValidationError(at: .root, "must be true") }
        let line = #line - 1
        #expect {
            try check()
        } throws: { error in
            guard let error = error as? ValidationError else { return false }
            return error.code == .invalid && error.file == "HeraldCoreTests/ValidationErrorTests.swift" && error.line == line
        }
    }

    /// Where each was raised is left out, so `#expect(throws: ValidationError(at:_:))` matches
    /// the error the parser or a reader threw.
    @Test func equalityComparesPathAndReasonOnly() {
        let name = JSONPath.root.appending("name")
        #expect(throws: ValidationError(at: name, "is required")) {
            _ = try JSONObjectReader(JSONValue.parse("{}"), at: .root).string("name")
        }
        #expect(ValidationError(at: name, "is required", file: "Elsewhere/File.swift", line: 1) == ValidationError(at: name, "is required"))
        #expect(ValidationError(at: name, "is required") != ValidationError(at: .root, "is required"))
        #expect(ValidationError(at: name, "is required") != ValidationError(at: name, "must be a string"))
    }
}
