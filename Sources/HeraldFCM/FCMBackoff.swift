/// How long to wait before retrying an FCM send (`shared/reference/protocols.md` §B3):
/// exponential with jitter, at least a minute after `QUOTA_EXCEEDED`, never shorter than
/// `Retry-After`. Pure: the random draw is passed in.
public struct FCMBackoff: Sendable, Equatable {
    /// The first delay, seconds.
    public var baseSeconds: Double = 1
    /// The first delay after `QUOTA_EXCEEDED` (Google: at least one minute).
    public var quotaBaseSeconds: Double = 60
    /// The longest delay, seconds.
    public var maximumSeconds: Double = 3600

    /// Creates the default policy.
    public init() {}

    /// The delay before retry number `attempt` (1 for the first retry). `random` in 0..<1
    /// spreads retries so many failed sends do not come back at once.
    public func delaySeconds(attempt: Int, retryAfterSeconds: Int?, quotaExceeded: Bool, random: Double) -> Double {
        let base = quotaExceeded ? quotaBaseSeconds : baseSeconds
        let exponent = Double(min(max(attempt, 1) - 1, 30))
        let ceiling = min(maximumSeconds, base * Double(sign: .plus, exponent: Int(exponent), significand: 1))
        // Half fixed, half random ("equal jitter"): never below half the exponential step.
        let jittered = ceiling / 2 + ceiling / 2 * min(max(random, 0), 1)
        return min(maximumSeconds, max(jittered, Double(retryAfterSeconds ?? 0), quotaExceeded ? quotaBaseSeconds : 0))
    }
}
