import HeraldCore
import HeraldFCM
import Synchronization

/// Provider rate ceilings per app: `HERALD_APNS_RATE_PER_MINUTE` (default none) and
/// `HERALD_FCM_RATE_PER_MINUTE` (default 600,000, FCM's default quota per project), unless the
/// app's row sets its own (`apps.apns_rate_per_minute`, `fcm_rate_per_minute`).
struct ProviderCeilings: Sendable, Equatable {
    /// APNs sends a minute per app, all workers together; nil = no ceiling.
    var apnsPerMinute: Int64?
    /// FCM sends a minute per app (per Firebase project), all workers together; nil = none.
    var fcmPerMinute: Int64? = 600_000

    /// The defaults.
    init() {}

    func perMinute(_ provider: Receipt.Provider) -> Int64? {
        provider == .apns ? apnsPerMinute : fcmPerMinute
    }
}

/// Enforces the provider ceilings in one worker: each (app, provider) gets this worker's share
/// of the ceiling (the ceiling divided by the live workers, from their heartbeats), as a token
/// bucket holding at most a tenth of a second of sends. `QUOTA_EXCEEDED` from FCM halves the
/// share and it recovers gradually (``FCMAdaptiveRate``), so a project whose real quota is
/// below the configured ceiling settles under it instead of failing sends into retries.
final class ProviderRateLimits: Sendable {
    struct Key: Hashable {
        var appID: String
        var provider: Receipt.Provider
    }

    /// Kept by reference, so an answer changes it in place under the lock (a dictionary's
    /// in-place `modify` allocated on every answer).
    final class Bucket {
        var tokens: Double
        var refilledAt: Timestamp
        /// A factor of the share, 0.01...1.
        var adaptive = FCMAdaptiveRate(maximum: 1, minimum: 0.01)

        init(tokens: Double, refilledAt: Timestamp) {
            self.tokens = tokens
            self.refilledAt = refilledAt
        }
    }

    /// An app's own ceilings (nil: the default; 0: none), as read from `apps`.
    typealias Overrides = @Sendable (String) async -> (apns: Int64?, fcm: Int64?)

    let ceilings: ProviderCeilings
    let clock: any WallClock
    let workers: @Sendable () -> Int
    let overrides: Overrides?
    private let buckets = Mutex<[Key: Bucket]>([:])
    /// Per-app overrides with when they were read; re-read after a minute.
    private let appCeilings = Mutex<[String: (ceilings: ProviderCeilings, readAt: Timestamp)]>([:])

    /// Limits with `ceilings` (each app's `overrides` first), shared by `workers()` live
    /// workers, timed by `clock`.
    init(ceilings: ProviderCeilings, clock: any WallClock, overrides: Overrides? = nil, workers: @escaping @Sendable () -> Int) {
        self.ceilings = ceilings
        self.clock = clock
        self.overrides = overrides
        self.workers = workers
    }

    /// The ceilings that apply to `appID` (its overrides as last read, else the defaults).
    func ceilings(appID: String) -> ProviderCeilings {
        appCeilings.withLock { $0[appID]?.ceilings } ?? ceilings
    }

    /// Reads `appID`'s overrides when they were never read or are a minute old.
    func refreshOverrides(appID: String) async {
        guard let overrides else { return }
        let now = clock.now
        let fresh = appCeilings.withLock { $0[appID].map { now.seconds - $0.readAt.seconds < 60 } ?? false }
        if fresh { return }
        let (apns, fcm) = await overrides(appID)
        var effective = ceilings
        if let apns { effective.apnsPerMinute = apns == 0 ? nil : apns }
        if let fcm { effective.fcmPerMinute = fcm == 0 ? nil : fcm }
        appCeilings.withLock { $0[appID] = (effective, now) }
    }

    /// This worker's rate for `appID` on `provider` now, sends a second; nil = unlimited.
    func rate(appID: String, provider: Receipt.Provider) -> Double? {
        guard let perMinute = ceilings(appID: appID).perMinute(provider) else { return nil }
        let factor = buckets.withLock { $0[Key(appID: appID, provider: provider)]?.adaptive.current ?? 1 }
        return Double(perMinute) / 60 / Double(max(1, workers())) * factor
    }

    /// How long the caller must wait before its send, having reserved its slot.
    func reserve(appID: String, provider: Receipt.Provider) -> Double {
        guard let perMinute = ceilings(appID: appID).perMinute(provider) else { return 0 }
        let share = Double(perMinute) / 60 / Double(max(1, workers()))
        let now = clock.now
        return buckets.withLock { buckets in
            let key = Key(appID: appID, provider: provider)
            let bucket: Bucket
            if let existing = buckets[key] {
                bucket = existing
            } else {
                bucket = Bucket(tokens: max(1, share / 10), refilledAt: now)
                buckets[key] = bucket
            }
            let rate = max(0.001, share * bucket.adaptive.current)
            let elapsed = max(0, Double(now.unixMilliseconds - bucket.refilledAt.unixMilliseconds) / 1000)
            bucket.tokens = min(max(1, rate / 10), bucket.tokens + elapsed * rate)
            bucket.refilledAt = now
            // Reserve the token even when it is not there yet: callers queue behind each other.
            bucket.tokens -= 1
            return bucket.tokens >= 0 ? 0 : -bucket.tokens / rate
        }
    }

    /// Waits for a send's slot for `appID` on `provider`. An `urgent` send takes its slot (the
    /// campaign sends behind it wait that much longer) but never waits behind them.
    func acquire(appID: String, provider: Receipt.Provider, urgent: Bool = false) async {
        await refreshOverrides(appID: appID)
        let wait = reserve(appID: appID, provider: provider)
        if wait > 0 && !urgent { try? await Task.sleep(for: .microseconds(Int64(wait * 1_000_000))) }
    }

    /// The provider said the quota is exceeded: slow this app down on it.
    func quotaExceeded(appID: String, provider: Receipt.Provider) {
        let now = clock.now
        buckets.withLock { $0[Key(appID: appID, provider: provider)]?.adaptive.quotaExceeded(at: now) }
    }

    /// A send went through: let a slowed-down rate recover.
    func succeeded(appID: String, provider: Receipt.Provider) {
        let now = clock.now
        buckets.withLock { $0[Key(appID: appID, provider: provider)]?.adaptive.succeeded(at: now) }
    }
}
