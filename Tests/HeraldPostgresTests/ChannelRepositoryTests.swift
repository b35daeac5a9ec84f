import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

/// `ChannelRepository` against PostgreSQL: stored as given, versioned by the table's trigger.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct ChannelRepositoryTests {
    @Test func upsertListAndDeleteWithoutTheCredentialsKey() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let channels = ChannelRepository(pool: pool)
        var channel = NotificationChannel(key: "orders", name: "Orders")
        channel.light = .custom("#00ff00")
        var stored = try await channels.upsert(appID: "app", channel)
        #expect(stored.version == 1 && stored.light == .custom("#00ff00"))
        channel.importance = .urgent
        stored = try await channels.upsert(appID: "app", channel)
        #expect(stored.version == 2, "an Android setting changed")
        #expect(try await channels.channels(appID: "app")["orders"] == stored)
        #expect(try await channels.delete(appID: "app", key: "orders"))
        #expect(try await !channels.delete(appID: "app", key: "orders"))
        #expect(try await channels.channels(appID: "app").isEmpty)
        await database.tearDown(pool)
    }
}
