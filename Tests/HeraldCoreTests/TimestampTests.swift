import Testing
import HeraldCore

@Suite struct TimestampTests {
    @Test(arguments: [
        ("1970-01-01T00:00:00Z", Int64(0), Int32(0)),
        ("2026-12-02T17:34:19Z", Int64(1_796_232_859), Int32(0)),
        ("2026-12-02T18:34:19+01:00", Int64(1_796_232_859), Int32(0)),
        ("2026-12-02t17:34:19.25z", Int64(1_796_232_859), Int32(250_000_000)),
        ("2000-02-29T00:00:00Z", Int64(951_782_400), Int32(0)),
        ("1969-12-31T23:59:59Z", Int64(-1), Int32(0)),
    ])
    func parses(text: String, seconds: Int64, nanoseconds: Int32) throws {
        let timestamp = try #require(Timestamp(rfc3339: text))
        #expect(timestamp.seconds == seconds)
        #expect(timestamp.nanoseconds == nanoseconds)
    }

    @Test(arguments: ["2026-02-30T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-02T24:00:00Z", "2026-12-02 17:34:19",
                      "2026-12-02T17:34:19", "2026-12-02T17:34:19+0100", "2026-12-02T17:34:19.Z", "1900-02-29T00:00:00Z", "yesterday", ""])
    func refuses(text: String) {
        #expect(Timestamp(rfc3339: text) == nil)
    }

    @Test func writesUTCWithMinimalFraction() {
        #expect(Timestamp(seconds: 1_796_232_859).rfc3339 == "2026-12-02T17:34:19Z")
        #expect(Timestamp(seconds: 1_796_232_859, nanoseconds: 250_000_000).rfc3339 == "2026-12-02T17:34:19.250Z")
        #expect(Timestamp(seconds: -1).rfc3339 == "1969-12-31T23:59:59Z")
        #expect(Timestamp(seconds: 0, nanoseconds: 1).rfc3339 == "1970-01-01T00:00:00.000000001Z")
    }

    @Test func appendsTheSameBytesItWritesWithEveryFractionWidth() throws {
        var generator = SplitMix64(seed: 3339)
        for _ in 0..<2_000 {
            let seconds = Int64(generator.next() % 250_000_000_000) - 2_000_000_000
            let nanoseconds = [0, 250_000_000, 123_456_000, 987_654_321][Int(generator.next() % 4)]
            let timestamp = Timestamp(seconds: seconds, nanoseconds: Int32(nanoseconds))
            var out = Array("x".utf8)
            timestamp.appendRFC3339(to: &out)
            #expect(out == Array("x".utf8) + Array(timestamp.rfc3339.utf8))
            #expect(Timestamp(rfc3339: timestamp.rfc3339) == timestamp)
        }
    }

    @Test func roundTripsOverCenturies() throws {
        for seconds in stride(from: Int64(-2_000_000_000), through: 200_000_000_000, by: 7_777_777) {
            let timestamp = Timestamp(seconds: seconds)
            #expect(Timestamp(rfc3339: timestamp.rfc3339) == timestamp)
        }
    }

    @Test func ordersByInstant() throws {
        let earlier = try #require(Timestamp(rfc3339: "2026-12-02T18:00:00+02:00"))
        let later = try #require(Timestamp(rfc3339: "2026-12-02T17:00:00Z"))
        #expect(earlier < later)
    }
}
