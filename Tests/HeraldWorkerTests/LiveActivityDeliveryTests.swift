import HeraldCore
import HeraldPostgres
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
}
