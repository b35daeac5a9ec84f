import HeraldCore
import HeraldPostgres
import HeraldTestSupport
import Testing

@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct JobRepositoryTests {
    private func insertJob(_ jobs: JobRepository, _ id: String) async throws -> Bool {
        try await jobs.insert(id: id, appID: "app", kind: "notification", body: #"{"id":"\#(id)"}"#, createdAt: .now)
    }

    @Test func insertIsIdempotentByID() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<6 { group.addTask { try await insertJob(jobs, "job-1") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 1, "exactly one insert is new")
        #expect(try await jobs.job(id: "job-1")?.state == "received")
        await database.tearDown(pool)
    }

    /// Two workers race to claim every shard of one job, over and over: each shard is
    /// processed by exactly one of them, and a finished shard is never claimed again.
    @Test func twoWorkersNeverProcessOneShardTwice() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 6)
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-race")
        let shardCount = 40
        let processed = try await withThrowingTaskGroup(of: [(Int, String)].self) { group in
            for worker in ["worker-a", "worker-b"] {
                group.addTask {
                    var mine: [(Int, String)] = []
                    for _ in 0..<2 {
                        for shardNo in (0..<shardCount).shuffled() {
                            let claim = try await jobs.claim(jobID: "job-race", shardNo: shardNo, shardCount: shardCount,
                                                             range: SubscriptionRange(from: Shard.minimumID), holder: worker)
                            guard case .claimed(var lease) = claim else { continue }
                            mine.append((shardNo, worker))
                            try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(sent: 1, accepted: 1))
                            try await jobs.finish(lease, counts: ShardCounts(sent: 1, accepted: 1))
                        }
                    }
                    return mine
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        let seen = Dictionary(grouping: processed, by: \.0).mapValues { $0.map(\.1) }
        #expect(seen.count == shardCount)
        #expect(seen.values.allSatisfy { $0.count == 1 })
        #expect(Set(seen.values.flatMap { $0 }).count == 2, "both workers got some shards")
        let claims = try await pool.query("SELECT sum(claims), count(*) FILTER (WHERE state = 'finished') FROM job_shards WHERE job_id = 'job-race'").rows
        #expect(claims == [[String(shardCount), String(shardCount)]])
        await database.tearDown(pool)
    }

    @Test func leaseIsTakenOverOnlyAfterExpiryAndCheckpointResumes() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-lease")
        let ids = (0..<3).map { "00000000-0000-4000-8000-00000000000\($0)" }
        let range = SubscriptionRange(from: Shard.minimumID, to: "80000000-0000-0000-0000-000000000000")
        guard case .claimed(var a) = try await jobs.claim(jobID: "job-lease", shardNo: 0, shardCount: 1, range: range, holder: "a") else {
            Issue.record("first claim must succeed"); return
        }
        #expect(a.cursor == nil && a.claims == 1)
        guard case .heldElsewhere(let holder, let until) = try await jobs.claim(jobID: "job-lease", shardNo: 0, shardCount: 1, range: range, holder: "b") else {
            Issue.record("a live lease must not be taken over"); return
        }
        #expect(holder == "a")
        #expect(until.map { $0 > .now.adding(seconds: 20) } == true, "a 30 s lease")
        let retryAt = Timestamp.now.adding(seconds: -1)
        try await jobs.checkpoint(&a, cursor: ids[1], counts: ShardCounts(sent: 2, accepted: 1),
                                  park: [ParkedRetry(subscriptionID: ids[0], attempts: 1, nextAttemptAt: retryAt, lastReason: "429")])
        #expect(try await jobs.dueRetries(a).map(\.subscriptionID) == [ids[0]])
        // The holder crashes; its lease lapses.
        try await pool.query("UPDATE job_shards SET lease_expires_at = now() - interval '1 second' WHERE job_id = 'job-lease'", idempotent: false)
        guard case .claimed(var b) = try await jobs.claim(jobID: "job-lease", shardNo: 0, shardCount: 1, range: range, holder: "b") else {
            Issue.record("an expired lease is taken over"); return
        }
        #expect(b.cursor == ids[1])
        #expect(b.counts == ShardCounts(sent: 2, accepted: 1))
        #expect(b.claims == 2)
        // The old holder's checkpoint now fails and writes nothing.
        await #expect {
            try await jobs.checkpoint(&a, cursor: ids[2], counts: ShardCounts(sent: 9))
        } throws: { error in
            (error as? PostgresError)?.code == .leaseLost
        }
        #expect(try await jobs.dueRetries(b).first?.attempts == 1)
        try await jobs.checkpoint(&b, cursor: ids[2], counts: ShardCounts(sent: 3, accepted: 3), resolved: [ids[0]])
        #expect(try await jobs.parkedCount(jobID: "job-lease", shardNo: 0) == 0)
        try await jobs.finish(b, counts: b.counts)
        #expect(try await jobs.claim(jobID: "job-lease", shardNo: 0, shardCount: 1, range: range, holder: "c") == .finished)
        await database.tearDown(pool)
    }

    /// Tokens found unregistered are invalidated by the checkpoint that saves their counts, and
    /// not at all by a holder that lost the lease (the new holder resends and invalidates them).
    @Test func checkpointInvalidatesTokensWithItsCounts() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-invalidate")
        let ids = (0..<2).map { "00000000-0000-4000-8000-00000000000\($0)" }
        for id in ids {
            try await pool.query("INSERT INTO subscriptions (id, app_id, platform, token, token_updated_at) VALUES ($1::uuid, 'app', 'ios', 'aa', now())", [id], idempotent: false)
        }
        let range = SubscriptionRange(from: Shard.minimumID, to: nil)
        guard case .claimed(var a) = try await jobs.claim(jobID: "job-invalidate", shardNo: 0, shardCount: 1, range: range, holder: "a") else {
            Issue.record("first claim must succeed"); return
        }
        try await jobs.checkpoint(&a, cursor: ids[0], counts: ShardCounts(sent: 1, unregistered: 1),
                                  invalidations: ("app", [TokenInvalidation(subscriptionID: ids[0], reason: "Unregistered")]))
        try await pool.query("UPDATE job_shards SET lease_expires_at = now() - interval '1 second' WHERE job_id = 'job-invalidate'", idempotent: false)
        guard case .claimed = try await jobs.claim(jobID: "job-invalidate", shardNo: 0, shardCount: 1, range: range, holder: "b") else {
            Issue.record("an expired lease is taken over"); return
        }
        await #expect {
            try await jobs.checkpoint(&a, cursor: ids[1], counts: ShardCounts(sent: 2, unregistered: 2),
                                      invalidations: ("app", [TokenInvalidation(subscriptionID: ids[1], reason: "Unregistered")]))
        } throws: { error in
            (error as? PostgresError)?.code == .leaseLost
        }
        let rows = try await pool.query("SELECT id::text, invalidated_at IS NOT NULL FROM subscriptions ORDER BY id").rows
        #expect(rows == [[ids[0], "t"], [ids[1], "f"]])
        await database.tearDown(pool)
    }

    @Test func planCreatesShardsIdempotently() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-plan")
        let ranges = [SubscriptionRange(from: Shard.minimumID, to: "40000000-0000-0000-0000-000000000000"),
                      SubscriptionRange(from: "40000000-0000-0000-0000-000000000000", to: nil)]
        try await jobs.plan(jobID: "job-plan", ranges: ranges, audienceEstimate: 12)
        try await jobs.plan(jobID: "job-plan", ranges: ranges, audienceEstimate: 12)
        let rows = try await pool.query("SELECT shard_no, id_from::text, id_to::text, state FROM job_shards WHERE job_id = 'job-plan' ORDER BY shard_no").rows
        #expect(rows == [["0", Shard.minimumID, "40000000-0000-0000-0000-000000000000", "pending"],
                         ["1", "40000000-0000-0000-0000-000000000000", nil, "pending"]])
        #expect(try await jobs.job(id: "job-plan")?.shardCount == 2)
        await database.tearDown(pool)
    }

    // MARK: - What the pipeline reads and writes besides claims and checkpoints

    private static let ranges = [
        SubscriptionRange(from: Shard.minimumID, to: "40000000-0000-0000-0000-000000000000"),
        SubscriptionRange(from: "40000000-0000-0000-0000-000000000000", to: "80000000-0000-0000-0000-000000000000"),
        SubscriptionRange(from: "80000000-0000-0000-0000-000000000000", to: nil),
    ]

    private func claimed(_ jobs: JobRepository, _ jobID: String, _ shardNo: Int, holder: String,
                         shardCount: Int = 3) async throws -> ShardLease {
        let claim = try await jobs.claim(jobID: jobID, shardNo: shardNo, shardCount: shardCount, range: Self.ranges[shardNo], holder: holder)
        guard case .claimed(let lease) = claim else { throw NotClaimed(claim: claim) }
        return lease
    }

    private struct NotClaimed: Error { let claim: ShardClaim }

    /// What `herald jobs cancel` records.
    private func cancel(_ pool: PostgresPool, _ jobID: String) async throws {
        try await pool.query("UPDATE jobs SET state = 'cancelled', cancelled_at = now() WHERE id = $1", [jobID])
    }

    @Test func storedJobAndState() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        #expect(try await jobs.insert(id: "job-urgent", appID: "app", kind: "notification", body: #"{"id":"job-urgent","n":1}"#,
                                      createdAt: .now, expiresAt: Timestamp.now.adding(seconds: 3600), urgent: true))
        _ = try await insertJob(jobs, "job-plain")
        let stored = try #require(try await jobs.storedJob(id: "job-urgent"))
        let body = try JSONValue.parse(stored.body)
        #expect(body["id"]?.stringValue == "job-urgent")
        #expect(stored.state == .received)
        #expect(stored.shardCount == nil)
        #expect(stored.urgent)
        #expect(stored.completedAt == nil)
        #expect(try await jobs.storedJob(id: "job-plain")?.urgent == false)
        #expect(try await jobs.storedJob(id: "job-unknown") == nil)
        try await jobs.plan(jobID: "job-urgent", ranges: Self.ranges, audienceEstimate: 10)
        #expect(try await jobs.storedJob(id: "job-urgent")?.shardCount == 3)

        #expect(try await jobs.state(jobID: "job-urgent") == .planned)
        #expect(try await jobs.state(jobID: "job-unknown") == nil)
        try await jobs.setState(jobID: "job-urgent", to: .running, from: [.planned])
        #expect(try await jobs.state(jobID: "job-urgent") == .running)
        // Not from one of the listed states: nothing changes (a cancelled job stays cancelled).
        try await cancel(pool, "job-plain")
        try await jobs.setState(jobID: "job-plain", to: .running, from: [.received, .planned])
        #expect(try await jobs.state(jobID: "job-plain") == .cancelled)
        await database.tearDown(pool)
    }

    @Test func releasedShardIsClaimedAtOnceByAnotherHolder() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-release")
        var a = try await claimed(jobs, "job-release", 0, holder: "a")
        try await jobs.checkpoint(&a, cursor: "10000000-0000-0000-0000-000000000000", counts: ShardCounts(sent: 5, accepted: 5))
        // Someone who does not hold it cannot give it up.
        var stranger = a
        stranger.holder = "c"
        #expect(try await jobs.release(stranger) == false)
        guard case .heldElsewhere(let holder, _) = try await jobs.claim(jobID: "job-release", shardNo: 0, shardCount: 3,
                                                                       range: Self.ranges[0], holder: "b") else {
            Issue.record("a live lease is not taken over"); return
        }
        #expect(holder == "a")

        #expect(try await jobs.release(a))
        // No waiting for the 30 s lease: b takes it over now and resumes from a's checkpoint.
        let b = try await claimed(jobs, "job-release", 0, holder: "b")
        #expect(b.cursor == "10000000-0000-0000-0000-000000000000")
        #expect(b.counts == ShardCounts(sent: 5, accepted: 5))
        #expect(b.claims == 2)
        #expect(try await jobs.release(a) == false, "a no longer holds it")
        await #expect {
            try await jobs.checkpoint(&a, cursor: "20000000-0000-0000-0000-000000000000", counts: ShardCounts(sent: 9))
        } throws: { error in
            (error as? PostgresError)?.code == .leaseLost
        }
        try await jobs.finish(b, counts: ShardCounts(sent: 7, accepted: 7))
        #expect(try await jobs.release(b) == false, "a finished shard is not released")
        #expect(try await jobs.claim(jobID: "job-release", shardNo: 0, shardCount: 3, range: Self.ranges[0], holder: "c") == .finished)
        await database.tearDown(pool)
    }

    @Test func parkedRetriesAreAllReadBackAndKeepTheirFirstAttempt() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-parked")
        var lease = try await claimed(jobs, "job-parked", 0, holder: "a")
        let ids = ["30000000-0000-4000-8000-000000000003", "10000000-0000-4000-8000-000000000001", "20000000-0000-4000-8000-000000000002"]
        let past = Timestamp(seconds: Timestamp.now.seconds - 5, nanoseconds: 250_000_000)
        let future = Timestamp(seconds: Timestamp.now.seconds + 600, nanoseconds: 125_000_000)
        try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(sent: 3), park: [
            ParkedRetry(subscriptionID: ids[0], attempts: 1, nextAttemptAt: future, lastReason: "HTTP 503"),
            ParkedRetry(subscriptionID: ids[1], attempts: 2, nextAttemptAt: past, lastReason: "HTTP 429 QUOTA_EXCEEDED"),
            ParkedRetry(subscriptionID: ids[2], attempts: 1, nextAttemptAt: future, lastReason: nil),
        ])
        let parked = try await jobs.parkedRetries(lease)
        #expect(parked.map(\.subscriptionID) == ids.sorted())
        #expect(parked.map(\.attempts) == [2, 1, 1])
        #expect(parked.map(\.nextAttemptAt) == [past, future, future])
        #expect(parked.map(\.lastReason) == ["HTTP 429 QUOTA_EXCEEDED", nil, "HTTP 503"])
        #expect(parked.allSatisfy { $0.firstAttemptAt != nil })
        #expect(try await jobs.dueRetries(lease).map(\.subscriptionID) == [ids[1]], "parkedRetries includes the ones not due")
        #expect(try await jobs.parkedRetries(lease, pageSize: 2).map(\.subscriptionID) == ids.sorted(), "paged, not cut off")

        // Parked again after another failure: the attempt count moves, the first attempt does not
        // (it bounds the retries' maximum age).
        let firstAttempt = try #require(parked.first?.firstAttemptAt)
        try await Task.sleep(for: .milliseconds(20))
        try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(sent: 4), park: [
            ParkedRetry(subscriptionID: ids[1], attempts: 3, nextAttemptAt: future, lastReason: "HTTP 500"),
        ])
        let again = try #require(try await jobs.parkedRetries(lease).first)
        #expect(again.attempts == 3)
        #expect(again.lastReason == "HTTP 500")
        #expect(again.firstAttemptAt == firstAttempt)
        // Another shard's retries are its own.
        let other = try await claimed(jobs, "job-parked", 1, holder: "a")
        #expect(try await jobs.parkedRetries(other).isEmpty)
        await database.tearDown(pool)
    }

    /// Above the old 200,000-row load limit: every parked retry is read back (the rest were left
    /// behind the cursor, never sent again), and a shard with parked retries left cannot finish.
    @Test(.timeLimit(.minutes(2))) func aQuarterMillionParkedRetriesAreAllLoadedAndHoldTheShardOpen() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-many")
        let lease = try await claimed(jobs, "job-many", 0, holder: "a")
        try await pool.query("""
            INSERT INTO shard_retries (job_id, shard_no, subscription_id, next_attempt_at)
            SELECT 'job-many', 0, ('00000000-0000-4000-8000-' || lpad(to_hex(n), 12, '0'))::uuid, now() + interval '1 hour'
            FROM generate_series(1, 250000) AS n
            """, idempotent: false)
        let parked = try await jobs.parkedRetries(lease)
        #expect(parked.count == 250_000)
        #expect(Set(parked.map(\.subscriptionID)).count == 250_000)
        await #expect {
            try await jobs.finish(lease, counts: ShardCounts(sent: 250_000))
        } throws: { error in
            (error as? PostgresError).map { $0.code == .invalidState && $0.message.contains("250000 parked retries are left") } ?? false
        }
        try await pool.query("DELETE FROM shard_retries WHERE job_id = 'job-many'", idempotent: false)
        try await jobs.finish(lease, counts: ShardCounts(sent: 250_000))
        await database.tearDown(pool)
    }

    /// A takeover resolves the rows it found beyond the cursor and sends those subscriptions
    /// again; one refused again is parked again before the next checkpoint, which carries it in
    /// both lists. The new row must stay (deleted after the insert, it was gone: lost).
    @Test func aRowResolvedAndParkedAgainInOneCheckpointStays() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-reparked")
        var lease = try await claimed(jobs, "job-reparked", 0, holder: "a")
        let ids = ["10000000-0000-4000-8000-000000000001", "20000000-0000-4000-8000-000000000002"]
        let soon = Timestamp(seconds: Timestamp.now.seconds + 60)
        try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(sent: 2), park: ids.map {
            ParkedRetry(subscriptionID: $0, attempts: 1, nextAttemptAt: soon, lastReason: "HTTP 503")
        })
        let later = Timestamp(seconds: Timestamp.now.seconds + 120)
        try await jobs.checkpoint(&lease, cursor: nil, counts: ShardCounts(sent: 3),
                                  park: [ParkedRetry(subscriptionID: ids[1], attempts: 1, nextAttemptAt: later, lastReason: "HTTP 429")],
                                  resolved: ids)
        let parked = try await jobs.parkedRetries(lease)
        #expect(parked.map(\.subscriptionID) == [ids[1]])
        #expect(parked.first?.nextAttemptAt == later && parked.first?.lastReason == "HTTP 429")
        await database.tearDown(pool)
    }

    @Test func pendingShardsAreTheOnesNoWorkerStarted() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-pending")
        #expect(try await jobs.pendingShards(jobID: "job-pending", appID: "app").isEmpty, "not planned yet")
        try await jobs.plan(jobID: "job-pending", ranges: Self.ranges, audienceEstimate: 30)
        let all = try await jobs.pendingShards(jobID: "job-pending", appID: "app")
        #expect(all.map(\.shardNo) == [0, 1, 2])
        #expect(all.map(\.idFrom) == Self.ranges.map { $0.from ?? Shard.minimumID })
        #expect(all.map(\.idTo) == Self.ranges.map(\.to))
        #expect(all.allSatisfy { $0.jobID == "job-pending" && $0.appID == "app" && $0.shardCount == 3 })
        let lease = try await claimed(jobs, "job-pending", 1, holder: "a")
        #expect(try await jobs.pendingShards(jobID: "job-pending", appID: "app").map(\.shardNo) == [0, 2])
        // Released, it is no longer pending (a worker has started it; its own message resumes it).
        try await jobs.release(lease)
        #expect(try await jobs.pendingShards(jobID: "job-pending", appID: "app").map(\.shardNo) == [0, 2])
        #expect(try await jobs.pendingShards(jobID: "job-unknown", appID: "app").isEmpty)
        await database.tearDown(pool)
    }

    @Test func totalsOnlyOnceEveryPlannedShardIsFinished() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-totals")
        #expect(try await jobs.totalsIfFinished(jobID: "job-totals") == nil, "not planned")
        try await jobs.plan(jobID: "job-totals", ranges: Self.ranges, audienceEstimate: 30)
        #expect(try await jobs.totalsIfFinished(jobID: "job-totals") == nil)
        let finals = [ShardCounts(sent: 10, accepted: 7, unregistered: 1, failed: 1, dropped: 1),
                      ShardCounts(sent: 4, accepted: 4),
                      ShardCounts(sent: 6, accepted: 1, unregistered: 2, failed: 0, dropped: 3)]
        for shardNo in [2, 0] {
            let lease = try await claimed(jobs, "job-totals", shardNo, holder: "a")
            try await jobs.finish(lease, counts: finals[shardNo])
            #expect(try await jobs.totalsIfFinished(jobID: "job-totals") == nil, "shard 1 is not finished")
        }
        // Running (claimed, checkpointed) is not finished either.
        var last = try await claimed(jobs, "job-totals", 1, holder: "a")
        try await jobs.checkpoint(&last, cursor: nil, counts: ShardCounts(sent: 2, accepted: 2))
        #expect(try await jobs.totalsIfFinished(jobID: "job-totals") == nil)
        try await jobs.finish(last, counts: finals[1])
        #expect(try await jobs.totalsIfFinished(jobID: "job-totals")
                == Receipt.Totals(accepted: 12, unregistered: 3, failed: 1, dropped: 4))
        #expect(try await jobs.totalsIfFinished(jobID: "job-unknown") == nil)

        // An audience of nobody: planned with no shards, finished at once with zero totals.
        _ = try await insertJob(jobs, "job-empty")
        try await jobs.plan(jobID: "job-empty", ranges: [], audienceEstimate: 0)
        #expect(try await jobs.totalsIfFinished(jobID: "job-empty") == Receipt.Totals())
        await database.tearDown(pool)
    }

    @Test func markCompletedRecordsOnceAndKeepsACancellation() async throws {
        let (database, pool) = try await TestDatabase.migrated(poolSize: 6)
        let jobs = JobRepository(pool: pool)
        _ = try await insertJob(jobs, "job-done")
        let totals = Receipt.Totals(accepted: 12, unregistered: 3, failed: 1, dropped: 4)
        // Two shards finishing at once both see the totals; exactly one may announce completion.
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<6 { group.addTask { try await jobs.markCompleted(jobID: "job-done", totals: totals) } }
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 1)
        #expect(try await jobs.markCompleted(jobID: "job-done", totals: totals) == false)
        let stored = try #require(try await jobs.storedJob(id: "job-done"))
        #expect(stored.state == .completed)
        #expect(stored.completedAt != nil)
        let counts = try await pool.query("SELECT accepted, unregistered, failed, dropped FROM jobs WHERE id = 'job-done'").rows
        #expect(counts == [["12", "3", "1", "4"]])

        _ = try await insertJob(jobs, "job-cancelled")
        try await cancel(pool, "job-cancelled")
        #expect(try await jobs.markCompleted(jobID: "job-cancelled", totals: Receipt.Totals(dropped: 5)))
        let cancelled = try #require(try await jobs.storedJob(id: "job-cancelled"))
        #expect(cancelled.state == .cancelled, "completion does not hide a cancellation")
        #expect(cancelled.completedAt != nil)
        #expect(try await jobs.markCompleted(jobID: "job-unknown", totals: totals) == false)
        await database.tearDown(pool)
    }
}
