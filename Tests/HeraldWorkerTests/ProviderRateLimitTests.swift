import HeraldCore
@testable import HeraldWorker
import Testing

@Suite struct ProviderRateLimitTests {
    @Test func eachWorkerSendsItsShareOfTheCeilingAndSlowsDownOnQuotaExceeded() {
        var ceilings = ProviderCeilings()
        ceilings.fcmPerMinute = 600  // 10 a second for the app, 5 for each of two workers
        let clock = ManualWallClock(Timestamp(seconds: 1_000_000))
        let limits = ProviderRateLimits(ceilings: ceilings, clock: clock) { 2 }
        #expect(limits.rate(appID: "a", provider: .fcm) == 5)
        // 50 sends reserved at one instant: one goes now, each next one 0.2 s after the last.
        let waits = (0..<50).map { _ in limits.reserve(appID: "a", provider: .fcm) }
        #expect(waits[0] == 0)
        #expect(abs(waits[49] - 49 * 0.2) < 1e-9)
        // Another app has a bucket of its own; APNs has no ceiling by default.
        #expect(limits.reserve(appID: "b", provider: .fcm) == 0)
        #expect((0..<1_000).allSatisfy { _ in limits.reserve(appID: "a", provider: .apns) == 0 })

        // QUOTA_EXCEEDED halves the share; quiet time brings it back step by step.
        clock.advance(seconds: 60)
        limits.quotaExceeded(appID: "a", provider: .fcm)
        #expect(limits.rate(appID: "a", provider: .fcm) == 2.5)
        _ = limits.reserve(appID: "a", provider: .fcm)
        #expect(abs(limits.reserve(appID: "a", provider: .fcm) - 0.4) < 1e-9, "0.4 s between sends at 2.5 a second")
        clock.advance(seconds: 30)
        limits.succeeded(appID: "a", provider: .fcm)
        #expect(limits.rate(appID: "a", provider: .fcm) == 4, "a tenth of the share back every quiet 10 s")
        clock.advance(seconds: 20)
        limits.succeeded(appID: "a", provider: .fcm)
        #expect(limits.rate(appID: "a", provider: .fcm) == 5, "recovered to the full share")
    }

    @Test func anAppsOwnCeilingsReplaceTheDefaultsAndAreReadAgainAfterAMinute() async {
        let clock = ManualWallClock(Timestamp(seconds: 1_000_000))
        let reads = Recorded<String>()
        let limits = ProviderRateLimits(ceilings: ProviderCeilings(), clock: clock, overrides: { appID in
            reads.append([appID])
            return appID == "small" ? (apns: 1_200, fcm: 0) : (apns: nil, fcm: nil)
        }, workers: { 4 })
        await limits.acquire(appID: "small", provider: .apns)
        await limits.acquire(appID: "other", provider: .fcm)
        #expect(limits.rate(appID: "small", provider: .apns) == 5, "1,200 a minute over 4 workers")
        #expect(limits.rate(appID: "small", provider: .fcm) == nil, "0: no ceiling for this app")
        #expect(limits.rate(appID: "other", provider: .fcm) == 2_500, "the default 600,000 over 4 workers")
        await limits.acquire(appID: "small", provider: .apns)
        #expect(reads.all == ["small", "other"], "read once a minute, not per send")
        clock.advance(seconds: 61)
        await limits.acquire(appID: "small", provider: .fcm)
        #expect(reads.all.count == 3)
    }
}
