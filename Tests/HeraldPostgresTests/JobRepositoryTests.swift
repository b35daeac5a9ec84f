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
}
