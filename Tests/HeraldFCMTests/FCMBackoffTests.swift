import HeraldFCM
import Testing

@Suite struct FCMBackoffTests {
    @Test func exponentialWithJitter() {
        let backoff = FCMBackoff()
        #expect(backoff.delaySeconds(attempt: 1, retryAfterSeconds: nil, quotaExceeded: false, random: 0) == 0.5)
        #expect(backoff.delaySeconds(attempt: 1, retryAfterSeconds: nil, quotaExceeded: false, random: 1) == 1)
        #expect(backoff.delaySeconds(attempt: 4, retryAfterSeconds: nil, quotaExceeded: false, random: 0.5) == 6)
        #expect(backoff.delaySeconds(attempt: 40, retryAfterSeconds: nil, quotaExceeded: false, random: 1) == 3600)
    }

    @Test func quotaWaitsAtLeastAMinuteAndRetryAfterIsHonoured() {
        let backoff = FCMBackoff()
        #expect(backoff.delaySeconds(attempt: 1, retryAfterSeconds: nil, quotaExceeded: true, random: 0) == 60)
        #expect(backoff.delaySeconds(attempt: 2, retryAfterSeconds: nil, quotaExceeded: true, random: 1) == 120)
        #expect(backoff.delaySeconds(attempt: 1, retryAfterSeconds: 30, quotaExceeded: false, random: 0) == 30)
    }
}
