import Testing
@testable import HeraldCore

@Suite struct JSONParserTests {
    @Test func parsesEveryValueType() throws {
        let value = try JSONValue.parse(#"{"a":[1,-2.5,1e3,true,false,null,"x\n\u00e9\ud83d\ude00"],"b":{}}"#)
        guard case .array(let items)? = value["a"] else {
            Issue.record("a is not an array")
            return
        }
        #expect(items.count == 7)
        #expect(items[0] == .number(JSONNumber(text: "1", double: 1)))
        #expect(items[2].serialized() == "1e3")
        if case .number(let number) = items[2] { #expect(number.int64 == 1000) }
        #expect(items[6] == .string("x\né😀"))
        #expect(value["b"] == .object([:]))
    }

    @Test(arguments: [
        ("", "unexpected end of input"),
        ("{", "unexpected end of input"),
        (#"{"a":1,}"#, "expected a member name"),
        ("[1,]", "unexpected character"),
        ("01", "leading zero"),
        ("1e400", "number out of range"),
        (#""\ud800""#, "unpaired UTF-16 surrogate"),
        (#"{"a":1,"a":2}"#, "duplicate member name"),
        ("\"a\tb\"", "control character"),
        ("nul", "expected null"),
        ("[1] 2", "unexpected data after"),
    ])
    func refusesMalformedText(text: String, expected: String) {
        #expect {
            try JSONValue.parse(text)
        } throws: { error in
            (error as? ValidationError)?.reason.contains(expected) == true
        }
    }

    @Test func refusesInvalidUTF8() {
        #expect(throws: ValidationError(at: .root, "not valid UTF-8")) {
            try JSONValue.parse([0x22, 0xC3, 0x28, 0x22])
        }
    }

    @Test func deepNestingIsAnErrorNotACrash() {
        let deep = String(repeating: "[", count: 200_000) + String(repeating: "]", count: 200_000)
        #expect(throws: ValidationError.self) { try JSONValue.parse(deep) }
        let limit = JSONValue.ParseLimits(maxDepth: 64)
        let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect((try? JSONValue.parse(ok, limits: limit)) != nil)
        let over = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
        #expect((try? JSONValue.parse(over, limits: limit)) == nil)
    }

    @Test func hugeNumbersAreRefusedOrKeptExact() throws {
        #expect(throws: ValidationError.self) { try JSONValue.parse(String(repeating: "9", count: 100)) }
        let big = try JSONValue.parse("9007199254740993")
        if case .number(let number) = big { #expect(number.int64 == 9_007_199_254_740_993) }
        let fraction = try JSONValue.parse("1.5")
        if case .number(let number) = fraction { #expect(number.int64 == nil) }
    }

    @Test func sizeLimitIsEnforced() {
        #expect(throws: ValidationError.self) {
            try JSONValue.parse(Array(repeating: UInt8(ascii: " "), count: 11), limits: .init(maxBytes: 10))
        }
    }

    /// Random byte-level mutations of a valid job: every outcome is a value or a ValidationError.
    @Test func mutatedInputNeverCrashes() throws {
        let seed = Array(#"{"schema":"herald.job.v1","id":"j-1","app_id":"demo","kind":"notification","created_at":"2026-12-02T10:00:00Z","audience":{"filter":{"and":[{"tag":"vip","op":"eq","value":"1"},{"not":{"platform":["ios"]}}]}},"content":{"title":"Hi","body":"There","buttons":[{"id":"a","text":"A"}]}}"#.utf8)
        var generator = SystemRandomNumberGenerator()
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = seed
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let position = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[position] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.remove(at: position)
                default: bytes.insert(bytes[Int.random(in: 0..<bytes.count, using: &generator)], at: position)
                }
                if bytes.isEmpty { bytes = [0x7B] }
            }
            if (try? Job.decode(bytes)) != nil { accepted += 1 }
        }
        // Some mutations stay valid (a changed letter in a title); most do not.
        #expect(accepted < 20_000)
    }
}
