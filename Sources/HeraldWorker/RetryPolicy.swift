import HeraldCore
import HeraldFCM

/// When a retryable send is tried again, and when it gives up (docs/ARCHITECTURE.md): exponential backoff
/// with jitter, honouring `Retry-After`, until the job's `expires_at`, a maximum age (default
/// 24 h) or a number of attempts (default 8); then `failed` / `retries-exhausted`.
struct RetryPolicy: Sendable, Equatable {
    /// Attempts in all, the first included.
    var maximumAttempts = 8
    /// Seconds after the first attempt after which no retry is made.
    var maximumAgeSeconds: Int64 = 24 * 3600
    /// The delays (1 s doubling, 60 s base after a quota error, at most an hour).
    var backoff = FCMBackoff()

    /// The defaults.
    init() {}

    /// When to try again after attempt number `attempts` failed, or nil to give up.
    /// `random` is uniform in [0, 1) (injected, for tests).
    func nextAttempt(attempts: Int, firstAttemptAt: Timestamp, now: Timestamp, expiresAt: Timestamp?,
                     retryAfterSeconds: Int?, quotaExceeded: Bool, random: Double) -> Timestamp? {
        guard attempts < maximumAttempts else { return nil }
        let delay = backoff.delaySeconds(attempt: attempts, retryAfterSeconds: retryAfterSeconds, quotaExceeded: quotaExceeded, random: random)
        let milliseconds = Int64((delay * 1000).rounded(.up))
        // Floor division: `/` and `%` round towards zero, which before 1970 gives a negative
        // remainder, and a Timestamp's nanoseconds must stay in 0..<1e9.
        var (dueSeconds, dueMilliseconds) = (now.unixMilliseconds + milliseconds).quotientAndRemainder(dividingBy: 1000)
        if dueMilliseconds < 0 {
            dueSeconds -= 1
            dueMilliseconds += 1000
        }
        let due = Timestamp(seconds: dueSeconds, nanoseconds: Int32(dueMilliseconds) * 1_000_000)
        if due.seconds > firstAttemptAt.seconds + maximumAgeSeconds { return nil }
        if let expiresAt, due.seconds >= expiresAt.seconds { return nil }
        return due
    }
}
