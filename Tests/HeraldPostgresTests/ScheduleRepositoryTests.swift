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

    /// A shard waiting for its retries: two shards of one job may wait until the same second
    /// (the shard is part of the key), the same shard's wait stored twice is one row, and the
    /// table refuses a shard release on a job lane or a job release with a shard.
    @Test func shardReleasesAreKeyedByShardAndReadBackWithIt() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "job-w", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let schedule = ScheduleRepository(pool: pool)
        let due = Timestamp.now.adding(seconds: -5)
        let body = { (shard: Int) in #"{"schema":"herald.shard.v1","job_id":"job-w","shard_no":\#(shard)}"# }
        let wait = { (shard: Int, lane: String) in
            try await schedule.scheduleRetryWait(jobID: "job-w", reportedJobID: "job-w", appID: "app", shardNo: shard, dueAt: due, lane: lane, body: body(shard))
        }
        #expect(try await wait(0, "shards") == Timestamp(seconds: due.seconds))
        #expect(try await wait(1, "shards-urgent") == Timestamp(seconds: due.seconds))
        _ = try await wait(0, "shards")
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["2"]], "the same shard's wait again is one row")
        #expect(try await schedule.schedule(jobID: "job-w", appID: "app", dueAt: due, lane: "campaign", body: "{}", reason: "retry"))
        let insert = "INSERT INTO scheduled_jobs (job_id, app_id, due_at, lane, body, reason, shard_no) VALUES ('job-w', 'app', date_trunc('second', now()), $1, '{}', $2, 2)"
        await #expect(throws: PostgresError.self, "a shard on a job lane") {
            try await pool.query(insert, ["campaign", "retry"], idempotent: false)
        }
        await #expect(throws: PostgresError.self, "a shard release for another reason than retry") {
            try await pool.query(insert, ["shards", "send-after"], idempotent: false)
        }
        var released: [ScheduledRelease] = []
        try await schedule.releaseDue { releases in
            released = releases
            return releases.map(\.id)
        }
        #expect(released.map(\.shardNo).sorted { ($0 ?? -1) < ($1 ?? -1) } == [nil, 0, 1])
        #expect(released.first { $0.shardNo == 1 }?.lane == "shards-urgent")
        #expect(released.first { $0.shardNo == 0 }.map { $0.body.contains(#""shard_no": 0"#) || $0.body.contains(#""shard_no":0"#) } == true)
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["0"]])
        await database.tearDown(pool)
    }

    /// A shard handing its wait over again while a scheduler is producing the row of the same
    /// key (claimed, about to be deleted) clears the claim, so the row is kept with its new body
    /// and produced again: the wait is not swallowed. The same key otherwise stays one row.
    @Test func aRetryWaitMeetingTheRowBeingReleasedIsStoredAfterIt() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 4)
        _ = try await JobRepository(pool: pool).insert(id: "job-r", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let schedule = ScheduleRepository(pool: pool)
        let due = Timestamp(seconds: Timestamp.now.seconds - 5)
        let wait: @Sendable (String) async throws -> Timestamp = { body in
            try await schedule.scheduleRetryWait(jobID: "job-r", reportedJobID: "job-r", appID: "app", shardNo: 0, dueAt: due, lane: "shards", body: body)
        }
        #expect(try await wait(#"{"n": 1}"#) == due)
        #expect(try await wait(#"{"n": 1}"#) == due)
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["1"]])
        var again: Task<Timestamp, any Error>?
        try await schedule.releaseDue { releases in
            again = Task { try await wait(#"{"n": 2}"#) }
            _ = try? await again?.value  // stored while this round still holds its claim
            return releases.map(\.id)
        }
        #expect(try await again?.value == due)
        #expect(try await pool.query("SELECT body::text FROM scheduled_jobs").rows == [[#"{"n": 2}"#]])
        await database.tearDown(pool)
    }

    /// The broker may take minutes: no transaction (and no row lock) is held meanwhile, other
    /// schedulers skip the claimed rows, and a claim that expired (its scheduler died) is taken.
    @Test func releasesAreProducedWithNoTransactionOpenAndAnExpiredClaimIsTakenOver() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 4)
        _ = try await JobRepository(pool: pool).insert(id: "job-c", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        let schedule = ScheduleRepository(pool: pool)
        _ = try await schedule.schedule(jobID: "job-c", appID: "app", dueAt: Timestamp.now.adding(seconds: -5), lane: "campaign", body: "{}", reason: "send-after")
        var openTransactions: [[String?]] = []
        var secondRound = -1
        try await schedule.releaseDue { releases in
            openTransactions = (try? await pool.query(
                "SELECT state FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'").rows) ?? [["query failed"]]
            secondRound = (try? await schedule.releaseDue { inner in inner.map(\.id) }) ?? -2
            return []  // not acknowledged: given back
        }
        #expect(openTransactions.isEmpty, "a transaction stayed open while producing: \(openTransactions)")
        #expect(secondRound == 0, "a claimed row is not handed to another scheduler")
        // A scheduler that died holding a claim: once it expires, the row is produced again.
        try await schedule.releaseDue(claimFor: .milliseconds(1)) { _ in
            try? await Task.sleep(for: .milliseconds(50))
            return []
        }
        try await pool.query("UPDATE scheduled_jobs SET claim = 'dead-scheduler', claimed_until = now() - interval '1 second'")
        #expect(try await schedule.releaseDue { $0.map(\.id) } == 1)
        #expect(try await pool.query("SELECT count(*) FROM scheduled_jobs").rows == [["0"]])
        await database.tearDown(pool)
    }

    /// A wait stored for a job already cancelled is due now, so the shard runs and drops the rest.
    @Test func aRetryWaitOfACancelledJobIsDueNow() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        _ = try await JobRepository(pool: pool).insert(id: "job-c", appID: "app", kind: "notification", body: "{}", createdAt: .now)
        #expect(try await JobAdministration(pool: pool).cancel(jobID: "job-c"))
        let later = Timestamp.now.adding(seconds: 3600)
        let stored = try await ScheduleRepository(pool: pool).scheduleRetryWait(jobID: "job-c", reportedJobID: "job-c", appID: "app", shardNo: 1,
                                                                                 dueAt: later, lane: "shards", body: "{}")
        #expect(stored.seconds <= Timestamp.now.seconds)
        #expect(try await pool.query("SELECT (due_at <= now())::text FROM scheduled_jobs WHERE shard_no = 1").rows == [["true"]])
        await database.tearDown(pool)
    }
}
