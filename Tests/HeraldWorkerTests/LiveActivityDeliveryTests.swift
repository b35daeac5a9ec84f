import HeraldCore
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Testing

@Suite struct LiveActivityDeliveryTests {
    static func update(_ event: String) throws -> LiveActivityUpdate {
        let extra = event == "start" ? #","alert":{"title":"t","body":"b"},"attributes_type":"RideAttributes","attributes":{}"# : ""
        let job = try Job.decode(Array("""
            {"schema":"herald.job.v1","id":"j","app_id":"app","kind":"live_activity","created_at":"2026-12-02T10:00:00Z",\
            "audience":{"all":true},"live_activity":{"activity_id":"ride-1","event":"\(event)","stream_id":"s","sequence":1,"content_state":{}\(extra)}}
            """.utf8))
        return try #require(job.liveActivity)
    }

    static func member(_ platform: Platform) -> AudienceMember {
        AudienceMember(id: "00000000-0000-4000-8000-000000000001", platform: platform, token: "t", sandbox: false, sdk: true,
                       language: nil, timeZone: nil, voipToken: nil)
    }

    /// An unregistered answer to an iOS live-activity send is about the activity's (or the
    /// push-to-start) token, so only that token is invalidated; Android live updates and every
    /// other job use the subscription's own token.
    @Test func onlyIOSLiveActivitySendsUseATokenOfTheirOwn() throws {
        let pool = PostgresPool(PostgresPoolConfiguration(url: "postgresql://nobody@127.0.0.1:1/none", size: 1))
        let repository = LiveActivityRepository(pool: pool)
        for event in ["start", "update", "end"] {
            let source = ShardSource.liveActivity(LiveActivityTargets(repository: repository, update: try Self.update(event)))
            #expect(source.sendsToOwnToken(Self.member(.ios)))
            #expect(!source.sendsToOwnToken(Self.member(.android)))
        }
        #expect(!ShardSource.audience.sendsToOwnToken(Self.member(.ios)))
    }

    /// A start that lists its subscriptions keeps every one: an iOS device without a
    /// push-to-start token for the type as `no-push-to-start-token`, an unknown id as it came.
    @Test(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)))
    func aListedStartKeepsEveryIDAndMarksIOSDevicesWithoutAPushToStartToken() async throws {
        let database = try await WorkerTestDatabase.migrated(apps: ["app"])
        let pool = database.pool()
        let ids = (1...4).map { "00000000-0000-4000-8000-00000000000\($0)" }
        try await pool.query("""
            INSERT INTO subscriptions (id, app_id, platform, token) VALUES
                ($1::uuid, 'app', 'ios', 'a1'), ($2::uuid, 'app', 'ios', 'a2'), ($3::uuid, 'app', 'android', 'f3')
            """, Array(ids.prefix(3)))
        try await pool.query("""
            INSERT INTO push_to_start_tokens (app_id, subscription_id, attributes_type, token) VALUES ('app', $1::uuid, 'RideAttributes', 'p1')
            """, [ids[0]])
        let targets = LiveActivityTargets(repository: LiveActivityRepository(pool: pool), update: try Self.update("start"))
        let listed = try await AudienceResolver(pool: pool).listedMembers(appID: "app", ids: ids)
        #expect(listed.map(\.unavailable) == [nil, nil, nil, .unknownSubscription])
        let members = try await targets.startMembers(appID: "app", listed, listed: true)
        #expect(members.map(\.id) == ids)
        #expect(members[0].token == "p1" && members[0].unavailable == nil, "sent to its push-to-start token")
        #expect(members[1].unavailable == .noPushToStartToken)
        #expect(members[2].unavailable == nil && members[2].platform == .android)
        #expect(members[3].unavailable == .unknownSubscription)
        // Without the listing (filter or all), such iOS devices are left out as before.
        let unlisted = try await targets.startMembers(appID: "app", Array(listed.prefix(3)))
        #expect(unlisted.map(\.id) == [ids[0], ids[2]])
        await pool.close()
        await database.drop()
    }
}
