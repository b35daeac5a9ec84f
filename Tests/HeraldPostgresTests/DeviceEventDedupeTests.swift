import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Synchronization
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

    private func counts(_ pool: PostgresPool, _ jobID: String) async throws -> [String?] {
        try await pool.query("SELECT received, confirmed, clicked FROM jobs WHERE id = $1", [jobID]).rows.first ?? []
    }

    @Test func recordCountsFirstSightingsOnlyAndOnlyOnTheNamedApp() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "job-events", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let dedupe = DeviceEventDedupe(pool: pool)
        let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let other = "1b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        let events = [DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: sub),
                      DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: other),
                      DeviceEventKey(type: "confirmed", jobID: "job-events", subscriptionID: sub),
                      DeviceEventKey(type: "clicked", jobID: "job-events", subscriptionID: sub, actionID: "open"),
                      DeviceEventKey(type: "clicked", jobID: "job-events", subscriptionID: sub, actionID: "later")]
        for event in events {
            #expect(try await dedupe.seen(event) == false)
            #expect(try await dedupe.record(event, appID: "app"))
            #expect(try await dedupe.seen(event))
        }
        #expect(try await counts(pool, "job-events") == ["2", "1", "2"])
        // Redelivered (and the same subscription written in upper case): not recorded again, not counted.
        for event in events + [DeviceEventKey(type: "received", jobID: "job-events", subscriptionID: sub.uppercased())] {
            #expect(try await dedupe.record(event, appID: "app") == false)
        }
        #expect(try await counts(pool, "job-events") == ["2", "1", "2"])
        #expect(try await dedupe.firstSightings(events) == [false, false, false, false, false])
        // The counter matches the job id and the app id: another app's name counts nothing.
        #expect(try await dedupe.record(DeviceEventKey(type: "confirmed", jobID: "job-events", subscriptionID: other), appID: "intruder"))
        #expect(try await counts(pool, "job-events") == ["2", "1", "2"])
        await database.tearDown(pool)
    }

    @Test func ownersNameTheAppsOfTheJobAndTheSubscription() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await pool.query("INSERT INTO apps (id, name) VALUES ('other', 'Other') ON CONFLICT DO NOTHING")
        let sub = "0b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234"
        try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token) VALUES ($1::uuid, 'other', 'android', 'tok')", [sub])
        _ = try await JobRepository(pool: pool).insert(id: "job-a", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let dedupe = DeviceEventDedupe(pool: pool)
        #expect(try await dedupe.owners(jobID: "job-a", subscriptionID: sub.uppercased())
                == DeviceEventOwners(jobAppID: "app", subscriptionAppID: "other", platform: .android))
        #expect(try await dedupe.owners(jobID: "job-gone", subscriptionID: "1b6c3a2e-4f1d-4a8e-9c2b-5d7e8f901234")
                == DeviceEventOwners(jobAppID: nil, subscriptionAppID: nil, platform: nil))
        await database.tearDown(pool)
    }
}
