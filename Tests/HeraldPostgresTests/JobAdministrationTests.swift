import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct JobAdministrationTests {
    static let ranges = [
        SubscriptionRange(from: Shard.minimumID, to: "40000000-0000-0000-0000-000000000000"),
        SubscriptionRange(from: "40000000-0000-0000-0000-000000000000", to: "80000000-0000-0000-0000-000000000000"),
        SubscriptionRange(from: "80000000-0000-0000-0000-000000000000", to: nil),
    ]

    /// A planned, urgent job of three shards: shard 0 running with a checkpoint and two parked
    /// retries (one parked by a halt), shard 1 finished, shard 2 pending.
    private func halfDoneJob(_ pool: PostgresPool, id: String = "job-1") async throws {
        let jobs = JobRepository(pool: pool)
        _ = try await jobs.insert(id: id, appID: "app", kind: "notification", body: #"{"id":"\#(id)"}"#,
                                  createdAt: .now, urgent: true)
        try await jobs.plan(jobID: id, ranges: Self.ranges, audienceEstimate: 1200)
        guard case .claimed(var lease) = try await jobs.claim(jobID: id, shardNo: 0, shardCount: 3, range: Self.ranges[0], holder: "worker-a") else {
            Issue.record("shard 0 not claimed")
            return
        }
        let later = Timestamp.now.adding(seconds: 3600)
        try await jobs.checkpoint(&lease, cursor: "10000000-0000-0000-0000-000000000000",
                                  counts: ShardCounts(sent: 10, accepted: 7, unregistered: 1),
                                  park: [ParkedRetry(subscriptionID: "00000000-0000-0000-0000-00000000000a", attempts: 1, nextAttemptAt: later, lastReason: "halted:credentials"),
                                         ParkedRetry(subscriptionID: "00000000-0000-0000-0000-00000000000b", attempts: 2, nextAttemptAt: later, lastReason: "provider-error")])
        guard case .claimed(let finished) = try await jobs.claim(jobID: id, shardNo: 1, shardCount: 3, range: Self.ranges[1], holder: "worker-b") else {
            Issue.record("shard 1 not claimed")
            return
        }
        try await jobs.finish(finished, counts: ShardCounts(sent: 5, accepted: 5))
    }

    @Test func showsTheJobItsShardsAndParkedRetries() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await halfDoneJob(pool)
        let administration = JobAdministration(pool: pool)
        let status = try #require(try await administration.show(jobID: "job-1"))
        #expect(status.appID == "app" && status.kind == "notification" && status.state == "planned" && status.urgent)
        #expect(status.audienceEstimate == 1200 && status.shardCount == 3)
        #expect(status.createdAt != nil && status.receivedAt != nil && status.plannedAt != nil && status.cancelledAt == nil)
        #expect(status.shards.map(\.shardNo) == [0, 1, 2])
        #expect(status.shards.map(\.state) == ["running", "finished", "pending"])
        let first = status.shards[0]
        #expect(first.cursor == "10000000-0000-0000-0000-000000000000")
        #expect(first.counts == ShardCounts(sent: 10, accepted: 7, unregistered: 1))
        #expect(first.leaseHolder == "worker-a" && first.leaseExpiresAt != nil && first.claims == 1)
        #expect(first.parkedRetries == 2 && status.parkedRetries == 2)
        #expect(status.shards[1].counts.accepted == 5 && status.shards[1].leaseHolder == nil)
        #expect(status.shards[2].idTo == nil && status.shards[2].idFrom == "80000000-0000-0000-0000-000000000000")

        let json = status.json
        #expect(json["id"] == .string("job-1"))
        #expect(json["state"] == .string("planned"))
        #expect(json["cancelled_at"] == .null)
        #expect(json["shards"]?.arrayValue?.count == 3)
        #expect(json["shards"]?.arrayValue?.first?["parked_retries"] == .int(2))
        // What `herald jobs show --json` prints parses back.
        #expect(try JSONValue.parse(json.serialized()) == json)

        #expect(try await administration.show(jobID: "no-such-job") == nil)
        await database.tearDown(pool)
    }

    @Test func cancelChangesAnUnfinishedJobOnce() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await halfDoneJob(pool)
        let administration = JobAdministration(pool: pool)
        #expect(try await administration.cancel(jobID: "job-1"))
        let status = try #require(try await administration.show(jobID: "job-1"))
        #expect(status.state == "cancelled" && status.cancelledAt != nil)
        #expect(try await administration.cancel(jobID: "job-1") == false, "already cancelled: nothing changes")
        #expect(try await administration.show(jobID: "job-1")?.cancelledAt == status.cancelledAt)

        try await pool.query("UPDATE jobs SET state = 'completed', completed_at = now() WHERE id = 'job-1'")
        #expect(try await administration.cancel(jobID: "job-1") == false, "a completed job stays completed")
        #expect(try await administration.show(jobID: "job-1")?.state == "completed")

        await #expect { try await administration.cancel(jobID: "no-such-job") } throws: { error in
            (error as? PostgresError)?.code == .notFound
        }
        await database.tearDown(pool)
    }

    /// Shards waiting for their retries in scheduled_jobs are made due at once by a cancel (one
    /// row per shard, the earliest kept); other jobs' waits and the job's own releases stay.
    @Test func cancelMakesTheJobsRetryWaitsDueNow() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await halfDoneJob(pool)
        try await halfDoneJob(pool, id: "job-2")
        let schedule = ScheduleRepository(pool: pool)
        let later = Timestamp.now.adding(seconds: 3600)
        for (job, shard, due) in [("job-1", 0, later), ("job-1", 0, later.adding(seconds: 60)), ("job-1", 2, later), ("job-2", 0, later)] {
            try await schedule.scheduleRetryWait(jobID: job, reportedJobID: job, appID: "app", shardNo: shard, dueAt: due, lane: "shards", body: #"{"shard":\#(shard)}"#)
        }
        try await schedule.schedule(jobID: "job-1", appID: "app", dueAt: later, lane: "campaign", body: "{}", reason: "send-after")
        #expect(try await JobAdministration(pool: pool).cancel(jobID: "job-1"))
        let rows = try await pool.query("""
            SELECT job_id, shard_no::text, (due_at <= now())::text, body::text FROM scheduled_jobs ORDER BY job_id, shard_no, due_at
            """).rows
        #expect(rows.map { $0.map { $0 ?? "-" } } == [
            ["job-1", "-1", "false", "{}"],
            ["job-1", "0", "true", #"{"shard": 0}"#],
            ["job-1", "2", "true", #"{"shard": 2}"#],
            ["job-2", "0", "false", #"{"shard": 0}"#],
        ])
        await database.tearDown(pool)
    }

    @Test func resumeClearsHaltsReleasesHaltedRetriesAndReturnsUnfinishedShards() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app", "other"])
        try await halfDoneJob(pool)
        try await pool.query("UPDATE jobs SET state = 'halted' WHERE id = 'job-1'")
        try await pool.query("""
            UPDATE apps SET apns_halted_reason = 'credentials', apns_halted_at = now(),
                            fcm_halted_reason = 'suspected-misconfiguration', fcm_halted_at = now()
            """)
        let administration = JobAdministration(pool: pool)
        let shards = try await administration.resume(jobID: "job-1")

        #expect(shards.map(\.shardNo) == [0, 2], "the finished shard is not re-queued")
        #expect(shards.allSatisfy { $0.jobID == "job-1" && $0.appID == "app" && $0.shardCount == 3 })
        #expect(shards.first?.idFrom == Shard.minimumID && shards.first?.idTo == "40000000-0000-0000-0000-000000000000")
        #expect(shards.last?.idTo == nil)
        // The shard messages are valid herald.shard.v1, as a worker will read them.
        for shard in shards { #expect(try Shard.decode(shard.json.serializedBytes()) == shard) }

        #expect(try await administration.show(jobID: "job-1")?.state == "running")
        let halts = try await pool.query("""
            SELECT id, apns_halted_reason IS NULL AND apns_halted_at IS NULL AND fcm_halted_reason IS NULL AND fcm_halted_at IS NULL
            FROM apps ORDER BY id
            """).rows
        #expect(halts == [["app", "t"], ["other", "f"]], "only the job's app is released")
        let retries = try await pool.query("""
            SELECT last_reason, next_attempt_at <= now() FROM shard_retries WHERE job_id = 'job-1' ORDER BY last_reason
            """).rows
        #expect(retries == [["halted:credentials", "t"], ["provider-error", "f"]], "only retries parked by the halt are due now")

        // A running job resumes too (its shards are re-queued; their claims are idempotent).
        #expect(try await administration.resume(jobID: "job-1").count == 2)
        await database.tearDown(pool)
    }

    @Test func expiredJobsHoldingHaltedRetriesGiveBackTheirUnclaimedShards() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app"])
        try await halfDoneJob(pool)
        let administration = JobAdministration(pool: pool)
        // Not expired, or its shard still leased: nothing to do.
        #expect(try await administration.expiredHaltedShards().isEmpty)
        try await pool.query("UPDATE jobs SET expires_at = now() - interval '1 minute' WHERE id = 'job-1'")
        #expect(try await administration.expiredHaltedShards().isEmpty, "shard 0 is still leased by worker-a")
        try await pool.query("UPDATE job_shards SET lease_expires_at = now() - interval '1 second' WHERE job_id = 'job-1' AND shard_no = 0")
        let found = try await administration.expiredHaltedShards()
        // Shard 0 holds the retry parked by the halt; shard 1 finished; shard 2 holds none.
        #expect(found.map(\.shard.shardNo) == [0])
        #expect(found.first?.urgent == true && found.first?.shard.jobID == "job-1" && found.first?.shard.shardCount == 3)
        // Completed or cancelled jobs are left alone.
        try await pool.query("UPDATE jobs SET state = 'completed', completed_at = now() WHERE id = 'job-1'")
        #expect(try await administration.expiredHaltedShards().isEmpty)
        await database.tearDown(pool)
    }

    @Test func theBacklogCountsHaltedAppsParkedRetriesAndScheduledReleases() async throws {
        let (database, pool) = try await TestDatabase.migrated(apps: ["app", "other"])
        let administration = JobAdministration(pool: pool)
        #expect(try await administration.backlog() == (0, 0, 0, 0))
        try await halfDoneJob(pool)  // two parked retries
        try await pool.query("UPDATE apps SET fcm_halted_reason = 'credentials', fcm_halted_at = now() WHERE id = 'other'")
        let schedule = ScheduleRepository(pool: pool)
        try await schedule.schedule(jobID: "job-1", appID: "app", dueAt: Timestamp.now.adding(seconds: -5), lane: "campaign", body: "{}", reason: "send-after")
        try await schedule.schedule(jobID: "job-1", appID: "app", dueAt: Timestamp.now.adding(seconds: 3600), lane: "campaign", body: #"{"b":1}"#, reason: "local-time")
        #expect(try await administration.backlog() == (1, 2, 1, 1))
        await database.tearDown(pool)
    }

    @Test func resumeRefusesUnknownCompletedAndCancelledJobs() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        try await halfDoneJob(pool, id: "done")
        try await halfDoneJob(pool, id: "gone")
        try await pool.query("UPDATE jobs SET state = 'completed', completed_at = now() WHERE id = 'done'")
        let administration = JobAdministration(pool: pool)
        #expect(try await administration.cancel(jobID: "gone"))
        try await pool.query("UPDATE apps SET apns_halted_reason = 'credentials', apns_halted_at = now()")

        await #expect { try await administration.resume(jobID: "nope") } throws: { error in
            (error as? PostgresError)?.code == .notFound
        }
        for id in ["done", "gone"] {
            await #expect { try await administration.resume(jobID: id) } throws: { error in
                guard let error = error as? PostgresError else { return false }
                return error.code == .invalidState && error.message.contains(id == "done" ? "completed" : "cancelled")
            }
        }
        // A refused resume changes nothing.
        let halted = try await pool.query("SELECT apns_halted_reason FROM apps WHERE id = 'app'").rows
        #expect(halted == [["credentials"]])
        await database.tearDown(pool)
    }
}
