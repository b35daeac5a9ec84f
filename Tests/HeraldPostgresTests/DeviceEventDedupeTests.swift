import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct DeviceEventDedupeTests {
    @Test func firstSightingOnlyAcrossAndWithinBatches() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let dedupe = DeviceEventDedupe(pool: pool)
        let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let batch = [DeviceEventKey(type: "received", jobID: "j1", subscriptionID: sub),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub, actionID: "open"),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub.uppercased(), actionID: "open"),
                     DeviceEventKey(type: "clicked", jobID: "j1", subscriptionID: sub, actionID: "later")]
        #expect(try await dedupe.firstSightings(batch) == [true, true, false, true])
        #expect(try await dedupe.firstSightings(batch + [DeviceEventKey(type: "confirmed", jobID: "j1", subscriptionID: sub)])
                == [false, false, false, false, true])
        #expect(try await dedupe.firstSightings([]) == [])
        await database.tearDown(pool)
    }
}
