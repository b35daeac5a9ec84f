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

    @Test func carriesItsCauseAndAttempts() throws {
        let letter = DeadLetter(reason: "planning: PostgreSQL refused the job", cause: .statementTimeout, attempts: 3,
                                source: .init(topic: "herald.jobs", partition: 0, offset: 1), original: Array("{}".utf8), at: Timestamp(seconds: 1_796_232_859))
        let text = String(decoding: letter.json.serializedBytes(), as: UTF8.self)
        #expect(text.contains(#""cause":"statement-timeout""#) && text.contains(#""attempts":3"#))
        #expect(try DeadLetter.decode(letter.json.serializedBytes()) == letter)
        // Letters of older workers have neither and still read.
        let old = #"{"schema":"herald.dead-letter.v1","reason":"r","source":{"topic":"t","partition":0,"offset":0},"original_base64":"","at":"2026-12-02T10:00:00Z"}"#
        let decoded = try DeadLetter.decode(Array(old.utf8))
        #expect(decoded.cause == nil && decoded.attempts == nil && !decoded.originalTruncated)
    }

    @Test func aLetterOverTheLimitKeepsAsMuchOfTheOriginalAsFitsWithItsSizeAndDigest() throws {
        let original = (0..<900_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let letter = DeadLetter(reason: "job is 900000 bytes, larger than the limit", cause: .invalid, attempts: 1,
                                source: .init(topic: "herald.jobs", partition: 3, offset: 9), original: original, at: Timestamp(seconds: 1_796_232_859))
        #expect(letter.json.serializedBytes().count > 1_000_000)
        let digest = String(repeating: "ab", count: 32)
        let fitted = try #require(letter.fitting(maxBytes: 1_000_000 - 512) { bytes in
            #expect(bytes.count == original.count)
            return digest
        })
        let size = fitted.json.serializedBytes().count
        #expect(size <= 1_000_000 - 512 && size > 1_000_000 - 512 - 8, "\(size) bytes: as much as fits, no more")
        #expect(fitted.originalTruncated && fitted.originalSize == 900_000 && fitted.originalSHA256 == digest)
        #expect(fitted.original == Array(original.prefix(fitted.original.count)))
        #expect(try DeadLetter.decode(fitted.json.serializedBytes()) == fitted)
        // A letter that fits is left whole; a limit below the envelope is refused.
        #expect(fitted.fitting(maxBytes: 2_000_000) { _ in digest } == fitted)
        #expect(letter.fitting(maxBytes: 100) { _ in digest } == nil)
    }

    @Test func aTruncatedLetterMustSayWhatWasCut() {
        let base = #""schema":"herald.dead-letter.v1","reason":"r","source":{"topic":"t","partition":0,"offset":0},"original_base64":"QUJD","at":"2026-12-02T10:00:00Z""#
        #expect(throws: ValidationError.self) { try DeadLetter.decode(Array("{\(base),\"original_truncated\":true}".utf8)) }
        #expect(throws: ValidationError.self) {
            try DeadLetter.decode(Array("{\(base),\"original_truncated\":true,\"original_size\":3,\"original_sha256\":\"\(String(repeating: "0", count: 64))\"}".utf8))
        }
        #expect(throws: ValidationError.self) { try DeadLetter.decode(Array("{\(base),\"cause\":\"gremlins\"}".utf8)) }
    }
}
