import Testing
import HeraldCore

@Suite struct DeadLetterTests {
    @Test func keepsTheOriginalBytesExactly() throws {
        let original: [UInt8] = [0x7B, 0xFF, 0x00, 0x22]  // not even UTF-8: kept as it came
        let letter = DeadLetter(reason: "not valid UTF-8", source: .init(topic: "herald.jobs", partition: 2, offset: 77),
                                original: original, at: Timestamp(seconds: 1_796_232_859))
        let decoded = try DeadLetter.decode(letter.json.serializedBytes())
        #expect(decoded == letter)
        #expect(decoded.original == original)
    }

    @Test(arguments: ["====", "QUJD=", "QQ=A", "QQ======", "QQ"])
    func refusesMalformedBase64(text: String) {
        let document = #"{"schema":"herald.dead-letter.v1","reason":"r","source":{"topic":"t","partition":0,"offset":0},"original_base64":"\#(text)","at":"2026-12-02T10:00:00Z"}"#
        #expect(throws: ValidationError(at: JSONPath.root.appending("original_base64"), "must be base64")) {
            try DeadLetter.decode(Array(document.utf8))
        }
    }
}
