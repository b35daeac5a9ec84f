import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct SubscriptionRepositoryTests {
    @Test func batchedInvalidationMarksNeverDeletesAndHonoursReRegistration() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let ids = (1...4).map { "00000000-0000-4000-8000-00000000000\($0)" }
        for id in ids {
            try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token, token_updated_at) VALUES ($1::uuid, 'app', 'ios', 'aa', now())", [id], idempotent: false)
        }
        let subscriptions = SubscriptionRepository(pool: pool)
        let invalidated = try await subscriptions.invalidate(appID: "app", [
            TokenInvalidation(subscriptionID: ids[0], reason: "Unregistered"),
            TokenInvalidation(subscriptionID: ids[1].uppercased(), reason: "BadDeviceToken", providerTimestamp: .now.adding(seconds: 60)),
            // A 410 older than the token's registration leaves it valid.
            TokenInvalidation(subscriptionID: ids[2], reason: "Unregistered", providerTimestamp: .now.adding(seconds: -3600)),
            TokenInvalidation(subscriptionID: "not-a-uuid'; DELETE FROM subscriptions; --", reason: "x"),
        ])
        #expect(invalidated == [ids[0], ids[1]])
        #expect(try await subscriptions.invalidate(appID: "app", [TokenInvalidation(subscriptionID: ids[0], reason: "again")]).isEmpty)
        let rows = try await pool.query("SELECT id::text, invalidated_reason FROM subscriptions ORDER BY id").rows
        #expect(rows == [[ids[0], "Unregistered"], [ids[1], "BadDeviceToken"], [ids[2], nil], [ids[3], nil]])
        await database.tearDown(pool)
    }
}
