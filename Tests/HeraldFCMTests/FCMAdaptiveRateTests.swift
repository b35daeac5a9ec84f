import HeraldCore
import HeraldFCM
import Testing

@Suite struct FCMAdaptiveRateTests {
    @Test func halvesOnQuotaExceededOncePerBurst() {
        var rate = FCMAdaptiveRate(maximum: 1000, minimum: 10)
        rate.quotaExceeded(at: Timestamp(seconds: 100))
        rate.quotaExceeded(at: Timestamp(seconds: 101))  // same burst
        #expect(rate.current == 500)
        rate.quotaExceeded(at: Timestamp(seconds: 106))
        #expect(rate.current == 250)
        for second in stride(from: 111, to: 200, by: 5) { rate.quotaExceeded(at: Timestamp(seconds: Int64(second))) }
        #expect(rate.current == 10)
    }

    @Test func recoversGraduallyToTheMaximum() {
        var rate = FCMAdaptiveRate(maximum: 1000, minimum: 10)
        rate.quotaExceeded(at: Timestamp(seconds: 0))
        #expect(rate.current == 500)
        rate.succeeded(at: Timestamp(seconds: 5))
        #expect(rate.current == 500)  // not yet a full quiet interval
        rate.succeeded(at: Timestamp(seconds: 10))
        #expect(rate.current == 600)
        rate.succeeded(at: Timestamp(seconds: 35))
        #expect(rate.current == 800)
        rate.succeeded(at: Timestamp(seconds: 1000))
        #expect(rate.current == 1000)
        #expect(rate.intervalSeconds == 0.001)
    }
}
