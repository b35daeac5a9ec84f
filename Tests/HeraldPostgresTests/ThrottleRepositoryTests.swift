import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct ThrottleRepositoryTests {
    @Test func theBucketStartsFullRefillsAtTheRateUpToItsCapacityAndTakesTokensBack() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "t", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let throttles = ThrottleRepository(pool: pool)
        let start = Timestamp(seconds: 2_000_000_000)
        // 600 a minute = 10 a second; capacity 5.
        var grant = try await throttles.take(jobID: "t", perMinute: 600, capacity: 5, wanted: 8, now: start)
        #expect(grant.granted == 5 && grant.remaining == 0, "full at first, never more than the capacity")
        grant = try await throttles.take(jobID: "t", perMinute: 600, capacity: 5, wanted: 8, now: start)
        #expect(grant.granted == 0)
        // 0.25 s later: 2.5 tokens, 2 whole ones granted, half a token left.
        grant = try await throttles.take(jobID: "t", perMinute: 600, capacity: 5, wanted: 8,
                                         now: Timestamp(seconds: start.seconds, nanoseconds: 250_000_000))
        #expect(grant.granted == 2 && abs(grant.remaining - 0.5) < 1e-9)
        // An hour idle refills only to the capacity.
        grant = try await throttles.take(jobID: "t", perMinute: 600, capacity: 5, wanted: 100, now: start.adding(seconds: 3600))
        #expect(grant.granted == 5)
        // A finishing shard's unused tokens go back (up to the capacity).
        try await throttles.giveBack(jobID: "t", tokens: 3)
        grant = try await throttles.take(jobID: "t", perMinute: 600, capacity: 5, wanted: 100, now: start.adding(seconds: 3600))
        #expect(grant.granted == 3)
        // An app's own provider ceilings.
        try await pool.query("UPDATE apps SET fcm_rate_per_minute = 0, apns_rate_per_minute = 1200 WHERE id = 'app'")
        let ceilings = try await throttles.providerCeilings(appID: "app")
        #expect(ceilings.apns == 1200 && ceilings.fcm == 0)
        await database.tearDown(pool)
    }
}
