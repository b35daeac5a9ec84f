import Testing
@testable import HeraldCore

@Suite struct JSONValueTests {
    @Test func nulIsRefusedInStringsAndMemberNamesWithItsPlace() throws {
        let inString = try JSONValue.parse(#"{"a":[1,"x\u0000y"]}"#)
        #expect(throws: ValidationError.self) { try inString.refuseNUL() }
        let inName = try JSONValue.parse(#"{"k\u0000":1}"#)
        #expect(throws: ValidationError.self) { try inName.refuseNUL() }
        try JSONValue.parse(#"{"a":"plain","b":[true,null,1.5]}"#).refuseNUL()
    }

    @Test func numbersKeepTheirTextAndValue() throws {
        guard case .number(let number) = try JSONValue.parse("12.50") else {
            Issue.record("not a number")
            return
        }
        #expect(number.description == "12.50" && number.double == 12.5 && number.int64 == nil)
        #expect(JSONNumber(Int64(9_007_199_254_740_993)).int64 == 9_007_199_254_740_993, "integers past 2^53 survive exactly")
    }
}
