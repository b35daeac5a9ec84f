import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct LiveActivityRepositoryTests {
    /// 8 writers race with sequences 1…8 on one stream, 20 times: the mark always ends at 8,
    /// and the writer of 8 is always accepted.
    @Test func highestSequenceWinsARaceOfEightWriters() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 8)
        let activities = LiveActivityRepository(pool: pool)
        for round in 0..<20 {
            let activity = "activity-\(round)"
            let outcomes = try await withThrowingTaskGroup(of: (Int64, LiveActivityMark).self) { group in
                for sequence in Int64(1)...8 {
                    group.addTask {
                        (sequence, try await activities.checkAndSet(appID: "app", activityID: activity, streamID: "s1",
                                                                    sequence: sequence, timestamp: 1_780_000_000 + sequence))
                    }
                }
                return try await group.reduce(into: [Int64: LiveActivityMark]()) { $0[$1.0] = $1.1 }
            }
            #expect(outcomes[8] == .accepted(timestamp: 1_780_000_008))
            let mark = try await activities.mark(appID: "app", activityID: activity)
            #expect(mark?.streamID == "s1" && mark?.lastSequence == 8 && mark?.lastTimestamp == 1_780_000_008)
            // Whatever the interleaving, no lower sequence is accepted after a higher one committed.
            #expect(outcomes.values.filter { $0 == .accepted(timestamp: 1_780_000_008) }.count == 1)
        }
        await database.tearDown(pool)
    }

    @Test func otherStreamReplacesTheMarkTimestampNeverGoesBackAndEndIsFinal() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let activities = LiveActivityRepository(pool: pool)
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 10, timestamp: 500, attributesType: "T") == .accepted(timestamp: 500))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 10, timestamp: 600) == .stale(streamID: "s1", lastSequence: 10))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 9, timestamp: 600) == .stale(streamID: "s1", lastSequence: 10))
        // A new stream starts over at a lower sequence; the timestamp does not go back.
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s2", sequence: 1, timestamp: 400) == .accepted(timestamp: 500))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s2", sequence: 2, timestamp: 700, ending: true) == .accepted(timestamp: 700))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s3", sequence: 1, timestamp: 800) == .ended)
        await database.tearDown(pool)
    }

    /// Issue 9: a start reopens an ended activity; the same job asking again (a redelivery) gets
    /// its acceptance back; the verdict recorded on the job is the first one.
    @Test func startReopensAnEndedActivityAndTheSameJobKeepsItsDecision() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let activities = LiveActivityRepository(pool: pool)
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 1, timestamp: 100, jobID: "j1") == .accepted(timestamp: 100))
        // Redelivered j1: the same answer, and the mark does not move.
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 1, timestamp: 150, jobID: "j1") == .accepted(timestamp: 100))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 1, timestamp: 150, jobID: "j2") == .stale(streamID: "s1", lastSequence: 1))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 2, timestamp: 200, ending: true, jobID: "j3") == .accepted(timestamp: 200))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s1", sequence: 3, timestamp: 300, jobID: "j4") == .ended)
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s2", sequence: 1, timestamp: 300, jobID: "j5") == .ended)
        // A start on any stream opens it again, with its own numbering.
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s3", sequence: 1, timestamp: 250, starting: true,
                                                 attributesType: "RideAttributes", jobID: "j6") == .accepted(timestamp: 250))
        #expect(try await activities.checkAndSet(appID: "app", activityID: "a", streamID: "s3", sequence: 2, timestamp: 260, jobID: "j7") == .accepted(timestamp: 260))

        // Verdicts on the jobs table: the first one recorded wins.
        for id in ["j1", "j2"] {
            try await pool.query("INSERT INTO jobs (id, app_id, kind, body, created_at) VALUES ($1, 'app', 'live_activity', '{}', now())", [id], idempotent: false)
        }
        #expect(try await activities.verdict(jobID: "j1") == nil)
        #expect(try await activities.recordVerdict(jobID: "j1", .accepted(timestamp: 100)) == .accepted(timestamp: 100))
        #expect(try await activities.recordVerdict(jobID: "j1", .ended) == .accepted(timestamp: 100))
        #expect(try await activities.recordVerdict(jobID: "j2", .stale(streamID: "s1", lastSequence: 1)) == .stale(streamID: "", lastSequence: 0))
        await database.tearDown(pool)
    }

    /// Who an event goes to: attached subscriptions (iOS with the activity token, Android with
    /// its FCM token), push-to-start tokens; an invalidated token is skipped and its
    /// subscription stays valid.
    @Test func attachedSubscriptionsAndTokenInvalidation() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let activities = LiveActivityRepository(pool: pool)
        let ids = (1...4).map { "00000000-0000-4000-8000-00000000000\($0)" }
        for (index, id) in ids.enumerated() {
            try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token) VALUES ($1::uuid, 'app', $2, $3)",
                                 [id, index < 2 ? "ios" : "android", "device-\(index)"], idempotent: false)
        }
        _ = try await activities.checkAndSet(appID: "app", activityID: "ride-1", streamID: "s", sequence: 1, timestamp: 1)
        for id in ids.prefix(2) {
            try await pool.query("INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token) VALUES ('app', 'ride-1', $1::uuid, $2)",
                                 [id, "activity-" + id.suffix(1)], idempotent: false)
            try await pool.query("INSERT INTO push_to_start_tokens (app_id, subscription_id, attributes_type, token) VALUES ('app', $1::uuid, 'RideAttributes', $2)",
                                 [id, "start-" + id.suffix(1)], idempotent: false)
        }
        try await activities.attachAndroid(appID: "app", activityID: "ride-1", [(ids[2], "device-2")])
        try await activities.attachAndroid(appID: "app", activityID: "ride-2", [(ids[3], "device-3")])
        var members = try await activities.attached(appID: "app", activityID: "ride-1", after: nil, limit: 10)
        #expect(members.map(\.id) == Array(ids.prefix(3)))
        #expect(members.map(\.token) == ["activity-1", "activity-2", "device-2"])
        #expect(try await activities.attached(appID: "app", activityID: "ride-1", after: ids[0], limit: 1).map(\.id) == [ids[1]])
        #expect(try await activities.attached(appID: "app", activityID: "ride-1", ids: [ids[2], ids[3]]).map(\.id) == [ids[2]])
        #expect(try await activities.attachedCount(appID: "app", activityID: "ride-2") == 1)
        #expect(try await activities.pushToStartTokens(appID: "app", attributesType: "RideAttributes", ids: ids) == [ids[0]: "start-1", ids[1]: "start-2"])

        #expect(try await activities.invalidateActivityTokens(appID: "app", activityID: "ride-1", subscriptionIDs: [ids[0]]) == 1)
        #expect(try await activities.invalidatePushToStartTokens(appID: "app", attributesType: "RideAttributes", subscriptionIDs: [ids[1]]) == 1)
        members = try await activities.attached(appID: "app", activityID: "ride-1", after: nil, limit: 10)
        #expect(members.map(\.id) == [ids[1], ids[2]])
        #expect(try await activities.pushToStartTokens(appID: "app", attributesType: "RideAttributes", ids: ids) == [ids[0]: "start-1"])
        #expect(try await pool.query("SELECT count(*) FROM subscriptions WHERE invalidated_at IS NOT NULL").rows == [["0"]])
        await database.tearDown(pool)
    }

    /// An attached member is read with every column an audience member has, as the audience
    /// queries read it: an iOS subscription registered through FCM stays an FCM one (its
    /// activity token goes to APNs all the same: the worker routes by job kind).
    @Test func attachedMembersKeepTheSubscriptionsProvider() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let activities = LiveActivityRepository(pool: pool)
        let ios = "00000000-0000-4000-8000-000000000001"
        let android = "00000000-0000-4000-8000-000000000002"
        try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token, provider) VALUES ($1::uuid, 'app', 'ios', 'fcm-ios', 'fcm')",
                             [ios], idempotent: false)
        try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token) VALUES ($1::uuid, 'app', 'android', 'fcm-android')",
                             [android], idempotent: false)
        _ = try await activities.checkAndSet(appID: "app", activityID: "ride-1", streamID: "s", sequence: 1, timestamp: 1)
        try await pool.query("INSERT INTO activity_tokens (app_id, activity_id, subscription_id, token) VALUES ('app', 'ride-1', $1::uuid, 'activity-1')",
                             [ios], idempotent: false)
        try await activities.attachAndroid(appID: "app", activityID: "ride-1", [(android, "fcm-android")])
        let members = try await activities.attached(appID: "app", activityID: "ride-1", after: nil, limit: 10)
        #expect(members.map(\.token) == ["activity-1", "fcm-android"])
        #expect(members.map(\.provider) == [.fcm, .fcm])
        await database.tearDown(pool)
    }
}
