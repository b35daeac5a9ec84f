import HeraldCore
import Testing

@Suite struct WallClockTests {
    @Test func manualClockMovesOnlyWhenTold() {
        let clock = ManualWallClock(Timestamp(seconds: 1_000))
        #expect(clock.now == Timestamp(seconds: 1_000))
        clock.advance(seconds: 59)
        #expect(clock.now == Timestamp(seconds: 1_059))
        clock.set(Timestamp(seconds: 5))
        #expect(clock.now.seconds == 5)
        #expect(abs(SystemWallClock().now.seconds - Timestamp.now.seconds) <= 1)
    }
}
