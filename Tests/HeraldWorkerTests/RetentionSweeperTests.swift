import Foundation
import HeraldCore
import HeraldPostgres
import HeraldTestSupport
@testable import HeraldWorker
import Synchronization
import Testing

/// `RetentionSweeper` against the test database: what goes, what stays, one sweeper at a time.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(2)))
struct RetentionSweeperTests {
    private static let log = WorkerLog(workerID: "retention-test", sink: { _ in })

    /// A migrated database of its own with an app `app`, and a pool on it.
    private func migrated() async throws -> (database: WorkerTestDatabase, pool: PostgresPool) {
        let database = try await WorkerTestDatabase.migrated()
        return (database, database.pool(size: 3))
    }

    private func drop(_ database: WorkerTestDatabase, _ pool: PostgresPool) async {
        await pool.close()
        await database.drop()
    }

    /// A job of two shards with one parked retry, then its times set `days` back (`state`
    /// decides which of completed_at / cancelled_at is set).
    private func job(_ pool: PostgresPool, _ id: String, state: String, receivedDaysAgo: Int, finishedDaysAgo: Int?) async throws {
        let jobs = JobRepository(pool: pool)
        _ = try await jobs.insert(id: id, appID: "app", kind: "notification", body: #"{"id":"\#(id)"}"#, createdAt: .now)
        try await jobs.plan(jobID: id, ranges: [
            SubscriptionRange(from: Shard.minimumID, to: "80000000-0000-0000-0000-000000000000"),
            SubscriptionRange(from: "80000000-0000-0000-0000-000000000000", to: nil),
        ], audienceEstimate: 10)
        try await pool.query("""
            INSERT INTO shard_retries (job_id, shard_no, subscription_id, next_attempt_at)
            VALUES ($1, 0, '00000000-0000-0000-0000-000000000001', now())
            """, [id], idempotent: false)
        let finished = finishedDaysAgo.map { "now() - make_interval(days => \($0))" } ?? "NULL"
        try await pool.query("""
            UPDATE jobs SET state = $2, received_at = now() - make_interval(days => $3::int),
                   completed_at = (CASE WHEN $2 = 'completed' THEN \(finished) END)::timestamptz,
                   cancelled_at = (CASE WHEN $2 = 'cancelled' THEN \(finished) END)::timestamptz
            WHERE id = $1
            """, [id, state, String(receivedDaysAgo)], idempotent: false)
    }

    private func ids(_ pool: PostgresPool, _ sql: String) async throws -> [String] {
        try await pool.query(sql).rows.compactMap { $0.first ?? nil }
    }

    @Test func oldFinishedAndStuckJobsGoWithTheirShardsRecentOnesStay() async throws {
        let (database, pool) = try await migrated()
        try await job(pool, "old-completed", state: "completed", receivedDaysAgo: 40, finishedDaysAgo: 35)
        try await job(pool, "old-cancelled", state: "cancelled", receivedDaysAgo: 32, finishedDaysAgo: 31)
        try await job(pool, "recently-completed", state: "completed", receivedDaysAgo: 40, finishedDaysAgo: 5)
        try await job(pool, "old-running", state: "running", receivedDaysAgo: 45, finishedDaysAgo: nil)
        try await job(pool, "stuck-running", state: "running", receivedDaysAgo: 61, finishedDaysAgo: nil)
        try await job(pool, "fresh", state: "planned", receivedDaysAgo: 0, finishedDaysAgo: nil)
        try await pool.query("""
            INSERT INTO device_event_seen (type, job_id, subscription_id, seen_at) VALUES
              ('received', 'gone-job', '00000000-0000-0000-0000-000000000001', now() - interval '31 days'),
              ('clicked', 'gone-job', '00000000-0000-0000-0000-000000000001', now() - interval '29 days')
            """, idempotent: false)

        let sweeper = RetentionSweeper(pool: pool, retentionDays: 30, log: Self.log)
        let outcome = try await sweeper.sweep()
        #expect(outcome == RetentionSweeper.Outcome(jobs: 3, deviceEvents: 1))
        #expect(try await ids(pool, "SELECT id FROM jobs ORDER BY id") == ["fresh", "old-running", "recently-completed"])
        #expect(try await ids(pool, "SELECT DISTINCT job_id FROM job_shards ORDER BY job_id") == ["fresh", "old-running", "recently-completed"])
        #expect(try await ids(pool, "SELECT job_id FROM shard_retries ORDER BY job_id") == ["fresh", "old-running", "recently-completed"])
        #expect(try await ids(pool, "SELECT type FROM device_event_seen") == ["clicked"])
        // A second sweep finds nothing more.
        #expect(try await sweeper.sweep() == RetentionSweeper.Outcome())
        await drop(database, pool)
    }

    @Test func scheduledWorkStaysWhileAnyOfItIsPending() async throws {
        let (database, pool) = try await migrated()
        // A parent received long ago, planned into two sub-jobs: one completed long ago, one
        // released months later (its row still in scheduled_jobs).
        try await job(pool, "parent", state: "scheduled", receivedDaysAgo: 100, finishedDaysAgo: nil)
        try await job(pool, "parent:tz:0", state: "completed", receivedDaysAgo: 100, finishedDaysAgo: 90)
        try await job(pool, "parent:tz:1", state: "received", receivedDaysAgo: 100, finishedDaysAgo: nil)
        try await pool.query("UPDATE jobs SET parent_id = 'parent' WHERE id LIKE 'parent:%'", idempotent: false)
        try await ScheduleRepository(pool: pool).schedule(jobID: "parent:tz:1", appID: "app", dueAt: .now.adding(seconds: 86_400 * 60),
                                                          lane: "campaign", body: "{}", reason: "local-time")
        let sweeper = RetentionSweeper(pool: pool, retentionDays: 30, log: Self.log)
        _ = try await sweeper.sweep()
        #expect(try await ids(pool, "SELECT id FROM jobs ORDER BY id") == ["parent", "parent:tz:0", "parent:tz:1"])
        // Released, completed, and the parent completed: all of it goes once old enough.
        try await pool.query("DELETE FROM scheduled_jobs", idempotent: false)
        try await pool.query("""
            UPDATE jobs SET state = 'completed', completed_at = now() - interval '40 days' WHERE completed_at IS NULL
            """, idempotent: false)
        _ = try await sweeper.sweep()
        #expect(try await ids(pool, "SELECT id FROM jobs ORDER BY id") == [])
        await drop(database, pool)
    }

    @Test func deletesInBatchesUntilNothingIsLeft() async throws {
        let (database, pool) = try await migrated()
        let count = RetentionSweeper.batchSize * 2 + 17
        try await pool.query("""
            INSERT INTO device_event_seen (type, job_id, subscription_id, seen_at)
            SELECT 'received', 'job', gen_random_uuid(), now() - interval '100 days' FROM generate_series(1, \(count))
            """, idempotent: false)
        let outcome = try await RetentionSweeper(pool: pool, retentionDays: 30, log: Self.log).sweep()
        #expect(outcome?.deviceEvents == count)
        #expect(try await pool.query("SELECT count(*) FROM device_event_seen").rows == [["0"]])
        await drop(database, pool)
    }

    @Test func oneSweeperAtATimeAndZeroKeepsEverything() async throws {
        let (database, pool) = try await migrated()
        try await job(pool, "old-completed", state: "completed", receivedDaysAgo: 40, finishedDaysAgo: 35)
        // Another worker is sweeping: it holds the lock on a connection of its own.
        let other = try await pool.acquire()
        _ = try await other.query("SELECT pg_advisory_lock($1::bigint)", [String(RetentionSweeper.advisoryLockKey)])
        let sweeper = RetentionSweeper(pool: pool, retentionDays: 30, log: Self.log)
        #expect(try await sweeper.sweep() == nil, "skipped while another sweeper holds the lock")
        #expect(try await ids(pool, "SELECT id FROM jobs") == ["old-completed"])
        _ = try await other.query("SELECT pg_advisory_unlock($1::bigint)", [String(RetentionSweeper.advisoryLockKey)])
        pool.release(other)

        #expect(try await RetentionSweeper(pool: pool, retentionDays: 0, log: Self.log).sweep() == nil)
        #expect(try await ids(pool, "SELECT id FROM jobs") == ["old-completed"])
        await RetentionSweeper(pool: pool, retentionDays: 0, log: Self.log).run(stop: StopSignal())  // returns at once
        await drop(database, pool)
    }

    @Test func runSweepsEveryIntervalUntilStopped() async throws {
        let (database, pool) = try await migrated()
        let lines = Mutex<[String]>([])
        let log = WorkerLog(workerID: "retention-test", sink: { line in lines.withLock { $0.append(line) } })
        let stop = StopSignal()
        let sweeper = RetentionSweeper(pool: pool, retentionDays: 30, log: log, interval: .milliseconds(200))
        let running = Task { await sweeper.run(stop: stop) }
        // A row that turns old while the sweeper runs goes at a later round.
        try await Task.sleep(for: .milliseconds(300))
        try await job(pool, "old-completed", state: "completed", receivedDaysAgo: 40, finishedDaysAgo: 35)
        let deadline = ContinuousClock.now + .seconds(10)
        while try await !ids(pool, "SELECT id FROM jobs").isEmpty && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(try await ids(pool, "SELECT id FROM jobs").isEmpty)
        stop.set()
        await running.value
        // A stop request ends the sleep between rounds: a sweeper of a two-minute interval
        // stops in seconds.
        let patient = StopSignal()
        let waiting = Task { await RetentionSweeper(pool: pool, retentionDays: 30, log: log, interval: .seconds(120)).run(stop: patient) }
        try await Task.sleep(for: .milliseconds(500))
        let started = ContinuousClock.now
        patient.set()
        await waiting.value
        #expect(ContinuousClock.now - started < .seconds(30), "a stop request ends the sleep")
        #expect(lines.withLock { $0 }.contains { $0.contains("retention sweep") && $0.contains("\"jobs\":1") })
        await drop(database, pool)
    }
}
