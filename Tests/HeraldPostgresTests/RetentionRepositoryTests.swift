import HeraldPostgres
import HeraldTestSupport
import Testing

/// `RetentionRepository` on its own (RetentionSweeperTests runs it through the worker's
/// sweeper, with jobs, shards and scheduled work): the lock, retention off, the batches.
@Suite(.enabled(if: TestEnvironment.shouldRun(needing: TestEnvironment.databaseVariable)), .timeLimit(.minutes(1)))
struct RetentionRepositoryTests {
    @Test func sweepsInBatchesUnderItsLockAndNotAtZero() async throws {
        let (database, pool) = try await TestDatabase.migrated()
        let count = RetentionRepository.batchSize + 5
        try await pool.query("""
            INSERT INTO device_event_seen (type, job_id, subscription_id, seen_at)
            SELECT 'received', 'job', gen_random_uuid(), now() - interval '40 days' FROM generate_series(1, \(count))
            UNION ALL SELECT 'clicked', 'job', gen_random_uuid(), now() - interval '10 days'
            """, idempotent: false)
        let retention = RetentionRepository(pool: pool)
        #expect(try await retention.sweep(retentionDays: 0) == nil, "0 keeps everything")
        let other = try await pool.acquire()
        _ = try await other.query("SELECT pg_advisory_lock($1::bigint)", [String(RetentionRepository.advisoryLockKey)])
        #expect(try await retention.sweep(retentionDays: 30) == nil, "another worker is sweeping")
        _ = try await other.query("SELECT pg_advisory_unlock($1::bigint)", [String(RetentionRepository.advisoryLockKey)])
        pool.release(other)
        #expect(try await retention.sweep(retentionDays: 30) == RetentionRepository.Outcome(jobs: 0, deviceEvents: count))
        #expect(try await pool.query("SELECT type FROM device_event_seen").rows == [["clicked"]])
        await database.tearDown(pool)
    }
}
