public import HeraldCore

/// An app's FCM send rate that backs off when FCM answers `QUOTA_EXCEEDED` and recovers
/// gradually (additive increase, multiplicative decrease). Pure: time is passed in.
public struct FCMAdaptiveRate: Sendable, Equatable {
    /// The configured rate, messages per second; never exceeded.
    public let maximum: Double
    /// The rate never drops below this.
    public let minimum: Double
    /// The rate now.
    public private(set) var current: Double
    /// A burst of quota errors from one window counts once: decreases are this far apart.
    public let decreaseIntervalSeconds: Int64
    /// Without a quota error for this long, the rate climbs by ``recoveryStep`` of the maximum.
    public let recoveryIntervalSeconds: Int64
    public let recoveryStep: Double
    private var lastDecrease: Int64?
    private var lastChange: Int64?

    /// Creates a rate starting at `maximum`.
    public init(maximum: Double, minimum: Double = 1, decreaseIntervalSeconds: Int64 = 5, recoveryIntervalSeconds: Int64 = 10, recoveryStep: Double = 0.1) {
        self.maximum = max(maximum, minimum)
        self.minimum = minimum
        self.current = max(maximum, minimum)
        self.decreaseIntervalSeconds = decreaseIntervalSeconds
        self.recoveryIntervalSeconds = recoveryIntervalSeconds
        self.recoveryStep = recoveryStep
    }

    /// FCM answered `QUOTA_EXCEEDED`: halve the rate (once per decrease interval).
    public mutating func quotaExceeded(at now: Timestamp) {
        if let lastDecrease, now.seconds - lastDecrease < decreaseIntervalSeconds { return }
        current = max(minimum, current / 2)
        lastDecrease = now.seconds
        lastChange = now.seconds
    }

    /// A send went through: after each quiet recovery interval, add a step of the maximum.
    public mutating func succeeded(at now: Timestamp) {
        guard current < maximum else { return }
        let since = lastChange ?? now.seconds
        let steps = (now.seconds - since) / recoveryIntervalSeconds
        guard steps > 0 else {
            if lastChange == nil { lastChange = now.seconds }
            return
        }
        current = min(maximum, current + Double(steps) * recoveryStep * maximum)
        lastChange = since + steps * recoveryIntervalSeconds
    }

    /// Seconds between sends at the current rate.
    public var intervalSeconds: Double { 1 / current }
}
