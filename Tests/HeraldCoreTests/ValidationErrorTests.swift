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
}
