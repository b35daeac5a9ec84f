import HeraldCore
import Testing

@Suite struct DurationMillisecondsTests {
    @Test func wholeMillisecondsRoundTowardZero() {
        #expect(Duration.seconds(2).milliseconds == 2000)
        #expect(Duration.milliseconds(1500).milliseconds == 1500)
        #expect(Duration.microseconds(1999).milliseconds == 1)
        #expect(Duration.nanoseconds(999_999).milliseconds == 0)
        #expect(Duration.seconds(86_400 * 365).milliseconds == 31_536_000_000)
        #expect((Duration.zero - .milliseconds(250)).milliseconds == -250)
    }
}
