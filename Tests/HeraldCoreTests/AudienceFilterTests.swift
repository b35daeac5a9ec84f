import Testing
import HeraldCore

@Suite struct AudienceFilterTests {
    private func parse(_ text: String) throws -> AudienceFilter {
        try AudienceFilter(json: try JSONValue.parse(text), at: JSONPath.root.appending("filter"))
    }

    private func failure(_ text: String) -> String? {
        do {
            _ = try parse(text)
            return nil
        } catch let error as ValidationError {
            return error.description
        } catch {
            return "\(error)"
        }
    }

    private func orOf(_ leaves: [String]) -> String { #"{"or":["# + leaves.joined(separator: ",") + "]}" }

    @Test func aFilterHasAtMost256Nodes() throws {
        let tag = #"{"tag":"plan","op":"eq","value":"gold"}"#
        // An or of three ors of 84 leaves: 1 + 3 × 85 = 256 nodes, accepted; one more leaf is not.
        let fits = orOf([orOf(Array(repeating: tag, count: 84)), orOf(Array(repeating: tag, count: 84)), orOf(Array(repeating: tag, count: 84))])
        #expect(try parse(fits).cost == (nodes: 256, costly: 0))
        let over = orOf([orOf(Array(repeating: tag, count: 84)), orOf(Array(repeating: tag, count: 84)), orOf(Array(repeating: tag, count: 85))])
        #expect(failure(over) == "filter: filter has 257 nodes, more than the limit of 256")
    }

    @Test func aFilterHasAtMost32CostlyPredicates() throws {
        let near = #"{"not":{"near":{"lat":1,"long":2,"radius_m":100}}}"#
        let orderings = ["gt", "gte", "lt", "lte"].map { #"{"tag":"visits","op":""# + $0 + #"","value":"3"}"# }
        let greater = Array(repeating: orderings, count: 4).flatMap { $0 }
        #expect(try parse(orOf(Array(repeating: near, count: 16) + greater)).cost == (nodes: 49, costly: 32))
        #expect(failure(orOf(Array(repeating: near, count: 17) + greater))
                == "filter: filter has 33 near, gt, gte, lt and lte predicates, more than the limit of 32")
        // eq, contains and the rest are cheap (indexed or a lookup): not counted.
        #expect(try parse(orOf(Array(repeating: #"{"tag":"t","op":"contains","value":"x"}"#, count: 90))).cost.costly == 0)
    }

    @Test func readsEveryPredicate() throws {
        let filter = try parse("""
        {"and":[{"tag":"plan","op":"eq","value":"gold"},{"tag":"visits","op":"gt","value":"3"},{"tag":"beta","op":"exists"},
                {"or":[{"language":["en","pt-BR"]},{"platform":["ios"]}]},{"not":{"external_id":["u1","u2"]}},
                {"near":{"lat":48.85,"long":2.35,"radius_m":5000}},{"last_session":{"after":"2026-11-01T00:00:00Z"}},
                {"session_count":{"op":"gte","value":3}}]}
        """)
        guard case .and(let children) = filter else {
            Issue.record("not an and node")
            return
        }
        #expect(children.count == 8)
        #expect(children[0] == .tag(key: "plan", op: .eq, value: "gold"))
        #expect(children[2] == .tagExists(key: "beta", exists: true))
        #expect(children[4] == .not(.externalID(["u1", "u2"])))
        #expect(children[5] == .near(latitude: 48.85, longitude: 2.35, radiusMeters: 5000))
        #expect(children[7] == .sessionCount(op: .gte, value: 3))
        #expect(filter.depth == 3)
    }

    @Test func readsEveryTagComparison() throws {
        for op in AudienceFilter.TagComparison.allCases {
            #expect(try parse(#"{"tag":"visits","op":""# + op.rawValue + #"","value":"10"}"#) == .tag(key: "visits", op: op, value: "10"))
        }
        #expect(AudienceFilter.TagComparison.allCases.filter(\.isOrdering) == [.gt, .gte, .lt, .lte])
        // "" is accepted; it matches no device, because a tag holding "" is deleted.
        #expect(try parse(#"{"tag":"plan","op":"eq","value":""}"#) == .tag(key: "plan", op: .eq, value: ""))
        #expect(try parse(#"{"tag":"plan","op":"not_exists"}"#) == .tagExists(key: "plan", exists: false))
    }

    private func nested(_ depth: Int) -> String {
        var text = #"{"platform":["ios"]}"#
        for _ in 1..<depth { text = #"{"not":"# + text + "}" }
        return text
    }

    @Test func depthSixteenIsTheLimit() throws {
        #expect(try parse(nested(16)).depth == 16)
        #expect(failure(nested(17)) == "filter" + String(repeating: ".not", count: 16) + ": filter nested deeper than 16 levels")
        // A hostile tree far deeper than the limit is refused before it can exhaust the stack.
        #expect(failure(nested(60)) != nil)
    }

    @Test func unknownPredicatesAreRefusedNotIgnored() {
        #expect(failure(#"{"country":"DE"}"#) == "filter.country: unknown filter predicate (expected one of and, or, not, tag, language, platform, external_id, near, last_session, session_count)")
        #expect(failure(#"{"tag":"a","op":"eq","value":"1","country":"DE"}"#) == #"filter.country: unexpected member in a "tag" filter node"#)
        #expect(failure(#"{"language":["en"],"platform":["ios"]}"#) == "filter: a filter node needs exactly one of and, or, not, tag, language, platform, external_id, near, last_session, session_count")
    }

    @Test(arguments: [
        (#"{"near":{"lat":91,"long":0,"radius_m":1}}"#, "filter.near.lat: must be between -90 and 90"),
        (#"{"near":{"lat":0,"long":0,"radius_m":0}}"#, "filter.near.radius_m: must be greater than 0"),
        (#"{"tag":"a","op":"exists","value":"1"}"#, #"filter.value: must be absent for op "exists""#),
        (#"{"tag":"a","op":"eq"}"#, "filter.value: is required"),
        (#"{"tag":"a","op":"like","value":"x"}"#, #"filter.op: must be one of "eq", "ne", "contains", "gt", "gte", "lt", "lte", "exists", "not_exists""#),
        (#"{"tag":"a","op":"ge","value":"1"}"#, #"filter.op: must be one of "eq", "ne", "contains", "gt", "gte", "lt", "lte", "exists", "not_exists""#),
        (#"{"and":[]}"#, "filter.and: must not be empty"),
        (#"{"platform":["windows"]}"#, #"filter.platform[0]: must be one of "ios", "android""#),
        (#"{"last_session":{}}"#, "filter.last_session: needs after, before, or both"),
        (#"{"session_count":{"op":"eq","value":-1}}"#, "filter.session_count.value: must be between 0 and 2147483647"),
    ])
    func refusesBadPredicates(text: String, expected: String) {
        #expect(failure(text) == expected)
    }
}
