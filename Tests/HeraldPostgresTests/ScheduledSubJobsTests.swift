import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct ScheduledSubJobsTests {
    @Test func aSubJobIsStoredOnceWithItsReleaseAndTheParentCompletesWhenEverySubJobDid() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        let schedule = ScheduleRepository(pool: pool)
        _ = try await jobs.insert(id: "p", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let due = Timestamp(seconds: Timestamp.now.seconds + 3600)
        func sub(_ id: String) -> ScheduledSubJob {
            ScheduledSubJob(id: id, parentID: "p", appID: "app", kind: "notification", body: #"{"id":"\#(id)"}"#, createdAt: .now,
                            expiresAt: nil, urgent: id.hasSuffix("1"), dueAt: due, reason: "local-time")
        }
        #expect(try await schedule.schedule(sub("p:tz:0")))
        #expect(try await schedule.schedule(sub("p:tz:1")))
        // Planned again after a crash: a known sub-job stores nothing, even once released.
        #expect(try await !schedule.schedule(sub("p:tz:0")))
        let rows = try await pool.query("SELECT job_id, lane FROM scheduled_jobs ORDER BY job_id")
        #expect(rows.rows == [["p:tz:0", "campaign"], ["p:tz:1", "urgent"]])
        #expect(try await jobs.storedJob(id: "p:tz:1")?.state == .received)

        // Not done while planning is (state received) or a sub-job is not complete.
        #expect(try await schedule.totalsIfSubJobsDone(parentID: "p") == nil)
        try await schedule.markScheduled(jobID: "p", dropped: 2)
        #expect(try await schedule.totalsIfSubJobsDone(parentID: "p") == nil)
        try await jobs.markCompleted(jobID: "p:tz:0", totals: .init(accepted: 3, failed: 1))
        #expect(try await schedule.totalsIfSubJobsDone(parentID: "p") == nil)
        try await jobs.markCompleted(jobID: "p:tz:1", totals: .init(accepted: 4, unregistered: 1, dropped: 1))
        #expect(try await schedule.totalsIfSubJobsDone(parentID: "p") == Receipt.Totals(accepted: 7, unregistered: 1, failed: 1, dropped: 3))
        try await jobs.markCompleted(jobID: "p", totals: .init(accepted: 7))
        #expect(try await schedule.totalsIfSubJobsDone(parentID: "p") == nil, "reported once")
        await database.tearDown(pool)
    }

    @Test func timingPagesReadZonesQuietWindowsAndHistogramsInIDOrder() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await pool.query("UPDATE apps SET default_time_zone = 'Asia/Kathmandu' WHERE id = 'app'")
        let histogram = "{" + (0..<24).map { $0 == 18 ? "9" : "0" }.joined(separator: ",") + "}"
        try await pool.query("""
            INSERT INTO subscriptions (id, app_id, platform, token, time_zone, quiet_start, quiet_end, activity_histogram) VALUES
            ('00000000-0000-4000-8000-000000000001', 'app', 'ios', 'a', 'Europe/Paris', '22:30', '07:15', $1::integer[]),
            ('00000000-0000-4000-8000-000000000002', 'app', 'android', 'b', NULL, NULL, NULL, NULL),
            ('00000000-0000-4000-8000-000000000003', 'app', 'android', 'c', NULL, NULL, NULL, NULL)
            """, [histogram])
        let schedule = ScheduleRepository(pool: pool)
        #expect(try await schedule.defaultTimeZone(appID: "app") == "Asia/Kathmandu")
        let query = AudienceQuery(appID: "app", audience: .all)
        let first = try await schedule.timingPage(query, after: nil, limit: 2)
        #expect(first.map(\.id) == ["00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"])
        #expect(first[0] == SubscriptionTiming(id: "00000000-0000-4000-8000-000000000001", platform: .ios, timeZone: "Europe/Paris",
                                               quiet: QuietWindow(startMinutes: 22 * 60 + 30, endMinutes: 7 * 60 + 15),
                                               histogram: (0..<24).map { $0 == 18 ? 9 : 0 }))
        #expect(first[1].timeZone == nil && first[1].quiet == nil && first[1].histogram == nil && first[1].platform == .android)
        let second = try await schedule.timingPage(query, after: first.last?.id, limit: 2)
        #expect(second.map(\.id) == ["00000000-0000-4000-8000-000000000003"])
        await database.tearDown(pool)
    }
}
