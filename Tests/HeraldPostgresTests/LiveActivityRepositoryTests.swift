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
}
