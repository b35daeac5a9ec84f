import HeraldCore
@testable import HeraldWorker
import Testing

@Suite struct RetryPolicyTests {
    private let now = Timestamp(seconds: 1_800_000_000)

    /// Milliseconds from `now` to the retry, or nil when the policy gives up.
    private func delay(_ policy: RetryPolicy = RetryPolicy(), attempts: Int, firstAttemptAt: Timestamp? = nil,
                       expiresAt: Timestamp? = nil, retryAfter: Int? = nil, quota: Bool = false, random: Double = 0.5) -> Int64? {
        policy.nextAttempt(attempts: attempts, firstAttemptAt: firstAttemptAt ?? now, now: now, expiresAt: expiresAt,
                           retryAfterSeconds: retryAfter, quotaExceeded: quota, random: random)
            .map { $0.unixMilliseconds - now.unixMilliseconds }
    }

    @Test func delaysGrowExponentiallyWithJitterUpToAnHour() throws {
        var policy = RetryPolicy()
        policy.maximumAttempts = 40
        let delays = try (1...7).map { try #require(delay(policy, attempts: $0)) }
        // Equal jitter: 1 s doubling, at random 0.5 three quarters of each step.
        #expect(delays == [750, 1500, 3000, 6000, 12_000, 24_000, 48_000])
        for attempt in 1...20 {
            let low = try #require(delay(policy, attempts: attempt, random: 0))
            let high = try #require(delay(policy, attempts: attempt, random: 0.999_999))
            #expect(low <= high)
            #expect(high <= 3_600_000, "never more than an hour")
            #expect(low >= min(500 << (attempt - 1), 1_800_000), "never below half the step")
        }
        #expect(delay(policy, attempts: 30, random: 0) == 1_800_000, "the hour cap halved by the jitter")
    }

    @Test func retryAfterIsHonoured() {
        #expect(delay(attempts: 1, retryAfter: 120) == 120_000)
        // A shorter Retry-After does not shorten the backoff.
        #expect(delay(attempts: 5, retryAfter: 2, random: 0) == 8_000)
        // An absurd Retry-After is capped at the longest delay rather than overflowing.
        #expect(delay(attempts: 1, retryAfter: Int.max) == 3_600_000)
    }

    @Test func quotaErrorsWaitAtLeastAMinute() {
        for attempt in 1...7 {
            let waited = delay(attempts: attempt, quota: true, random: 0)
            #expect(waited.map { $0 >= 60_000 } == true, "attempt \(attempt): \(String(describing: waited))")
        }
    }

    @Test func givesUpAfterTheMaximumAttempts() {
        #expect(delay(attempts: 7) != nil, "the 8th attempt is still made")
        #expect(delay(attempts: 8) == nil)
        var policy = RetryPolicy()
        policy.maximumAttempts = 3
        #expect(delay(policy, attempts: 2) != nil)
        #expect(delay(policy, attempts: 3) == nil)
        #expect(delay(policy, attempts: 4) == nil)
    }

    @Test func givesUpAfterTheMaximumAge() {
        let first = now.adding(seconds: -(86_400 - 10))
        // Attempt 5: 8 s (random 0) lands inside the 24 h, 16 s (random 1) after it.
        #expect(delay(attempts: 5, firstAttemptAt: first, random: 0) == 8_000)
        #expect(delay(attempts: 5, firstAttemptAt: first, random: 1) == nil)
        #expect(delay(attempts: 1, firstAttemptAt: first, retryAfter: 60) == nil)
        #expect(delay(attempts: 1, firstAttemptAt: now.adding(seconds: -90_000)) == nil, "already older than the maximum age")
        var policy = RetryPolicy()
        policy.maximumAgeSeconds = 60
        #expect(delay(policy, attempts: 1, firstAttemptAt: now.adding(seconds: -1), quota: true) == nil)
        #expect(delay(policy, attempts: 1, firstAttemptAt: now.adding(seconds: -1)) != nil)
    }

    @Test func givesUpWhenTheNextAttemptWouldBeAtOrAfterExpiry() {
        let expiresAt = now.adding(seconds: 10)
        #expect(delay(attempts: 1, expiresAt: expiresAt, retryAfter: 9) == 9_000)
        #expect(delay(attempts: 1, expiresAt: expiresAt, retryAfter: 10) == nil, "at expires_at is too late")
        #expect(delay(attempts: 1, expiresAt: expiresAt, retryAfter: 11) == nil)
        #expect(delay(attempts: 1, expiresAt: now.adding(seconds: -1)) == nil, "already expired")
        #expect(delay(attempts: 5, expiresAt: expiresAt, random: 1) == nil, "16 s backoff outlives a job expiring in 10 s")
    }

    /// Whatever the inputs (years 0001–9999, as `Timestamp` allows), the retry time is a
    /// well-formed timestamp exactly the backoff delay (rounded up to a millisecond) after `now`.
    @Test func nextAttemptIsAlwaysWellFormed() {
        var random = SplitMix64(seed: 0x5EED_8)
        let policy = RetryPolicy()
        var given = 0
        for _ in 0..<20_000 {
            let now = Timestamp(seconds: Int64.random(in: -62_135_596_800...253_402_300_000, using: &random),
                                nanoseconds: Int32.random(in: 0..<1_000_000_000, using: &random))
            let attempts = Int.random(in: 1...8, using: &random)
            let retryAfter = Bool.random(using: &random) ? Int.random(in: 0...100_000, using: &random) : nil
            let quota = Bool.random(using: &random)
            let jitter = Double.random(in: 0..<1, using: &random)
            let first = now.adding(seconds: -Int64.random(in: 0..<86_400, using: &random))
            let expiresAt = Bool.random(using: &random) ? now.adding(seconds: Int64.random(in: -10...7200, using: &random)) : nil
            guard let next = policy.nextAttempt(attempts: attempts, firstAttemptAt: first, now: now, expiresAt: expiresAt,
                                                retryAfterSeconds: retryAfter, quotaExceeded: quota, random: jitter) else { continue }
            given += 1
            #expect((0..<1_000_000_000).contains(next.nanoseconds), "\(next.seconds) s \(next.nanoseconds) ns from \(now.seconds) s \(now.nanoseconds) ns")
            #expect(next.nanoseconds % 1_000_000 == 0)
            #expect(next > now)
            let expected = Int64((policy.backoff.delaySeconds(attempt: attempts, retryAfterSeconds: retryAfter, quotaExceeded: quota,
                                                              random: jitter) * 1000).rounded(.up))
            #expect(next.unixMilliseconds - now.unixMilliseconds == expected)
            if let expiresAt { #expect(next < expiresAt) }
            if next.nanoseconds < 0 || next.nanoseconds >= 1_000_000_000 { break }  // one report is enough
        }
        #expect(given > 1000)
    }
}
