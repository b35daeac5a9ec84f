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

    @Test func wholeNanosecondsClampAtTheEndsOfInt64() {
        #expect(Duration.milliseconds(1500).nanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).nanoseconds == 7)
        #expect((Duration.zero - .microseconds(3)).nanoseconds == -3_000)
        #expect(Duration.seconds(Int64.max / 2).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min / 2).nanoseconds == .min)
    }
}
