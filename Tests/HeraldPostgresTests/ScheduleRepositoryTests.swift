import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct ScheduleRepositoryTests {
    @Test func concurrentSchedulersClaimDisjointRowsAndDeleteOnlyAcknowledged() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 4)
        let jobs = JobRepository(pool: pool)
        let schedule = ScheduleRepository(pool: pool)
        _ = try await jobs.insert(id: "job-s", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let past = Timestamp.now.adding(seconds: -3600)
        for offset in 0..<30 {
            #expect(try await schedule.schedule(jobID: "job-s", appID: "app", dueAt: past.adding(seconds: Int64(offset)), lane: "campaign", body: #"{"n":\#(offset)}"#, reason: "send-after"))
        }
        // Idempotent: the same (job, reason, second) again is not a second row.
        #expect(try await !schedule.schedule(jobID: "job-s", appID: "app", dueAt: past, lane: "campaign", body: "{}", reason: "send-after"))
        _ = try await schedule.schedule(jobID: "job-s", appID: "app", dueAt: .now.adding(seconds: 3600), lane: "campaign", body: "{}", reason: "send-after")
        let ids = try await withThrowingTaskGroup(of: [Int64].self) { group in
            for _ in 0..<2 {
                group.addTask {
                    var claimed: [Int64] = []
                    try await schedule.releaseDue(limit: 10) { releases in
                        claimed = releases.map(\.id)
                        try? await Task.sleep(for: .milliseconds(300))  // hold the row locks while the other claims
                        return releases.map(\.id)
                    }
                    return claimed
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(ids.count == 20)
        #expect(Set(ids).count == 20, "no row handed to both schedulers")
        // Not acknowledged → stays.
        try await schedule.releaseDue(limit: 5) { _ in [] }
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["11"]])
        await database.tearDown(pool)
    }
}
