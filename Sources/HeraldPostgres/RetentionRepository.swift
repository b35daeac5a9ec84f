/// The deletes behind `HERALD_RETENTION_DAYS` (the worker's `RetentionSweeper` runs them every
/// hour): old `jobs` (and, through `ON DELETE CASCADE`, their `job_shards`, `shard_retries` and
/// `scheduled_jobs`) and old `device_event_seen` rows.
///
/// A job goes once it was completed or cancelled more than `retentionDays` ago, or, whatever its
/// state, once it was received more than twice that long ago (a job stuck in `running` or
/// `halted` must not stay forever). Rows go in batches of ``batchSize``, each its own short
/// statement, so no sweep holds long locks or bloats one transaction. A session advisory lock
/// lets one worker sweep at a time; the others skip that round.
public struct RetentionRepository: Sendable {
    /// What one sweep deleted.
    public struct Outcome: Sendable, Equatable {
        /// `jobs` rows (their shards and retries went with them).
        public var jobs = 0
        /// `device_event_seen` rows.
        public var deviceEvents = 0

        /// Counts.
        public init(jobs: Int = 0, deviceEvents: Int = 0) {
            self.jobs = jobs
            self.deviceEvents = deviceEvents
        }
    }

    /// The advisory lock key: the ASCII of "retain" in an int64 (Migrator uses "herald").
    public static let advisoryLockKey: Int64 = 0x7265_7461_696E
    /// Rows per `DELETE`.
    public static let batchSize = 10_000

    private let pool: PostgresPool

    /// A repository over `pool`.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// One sweep: everything older than `retentionDays`, batch after batch. Nil when another
    /// worker holds the lock (it is sweeping) or `retentionDays` is 0 (retention off).
    public func sweep(retentionDays: Int) async throws(PostgresError) -> Outcome? {
        guard retentionDays > 0 else { return nil }
        let days = String(retentionDays)
        let key = String(Self.advisoryLockKey)
        return try await pool.withConnection { connection throws(PostgresError) -> Outcome? in
            let locked = try await connection.query("SELECT pg_try_advisory_lock($1::bigint)", [key])
            guard locked.rows.first?.first == "t" else { return nil }
            do throws(PostgresError) {
                var outcome = Outcome()
                // received_at <= completed_at and cancelled_at, so the first condition holds for
                // every row that goes and lets PostgreSQL use jobs_received_at_idx.
                outcome.jobs = try await deleteInBatches(connection, """
                    DELETE FROM jobs WHERE ctid IN (
                        SELECT ctid FROM jobs
                        WHERE received_at < now() - make_interval(days => $1::int)
                          AND (completed_at < now() - make_interval(days => $1::int)
                               OR cancelled_at < now() - make_interval(days => $1::int)
                               OR received_at < now() - make_interval(days => 2 * $1::int))
                          -- Scheduled work (issue 10) stays while it is pending: a release still
                          -- to come, a sub-job not completed, or a parent not completed yet (whose
                          -- totals will sum this sub-job's).
                          AND NOT EXISTS (SELECT 1 FROM scheduled_jobs s WHERE s.job_id = jobs.id)
                          AND NOT EXISTS (SELECT 1 FROM jobs c WHERE c.parent_id = jobs.id AND c.completed_at IS NULL)
                          AND (jobs.parent_id IS NULL
                               OR EXISTS (SELECT 1 FROM jobs p WHERE p.id = jobs.parent_id AND p.completed_at IS NOT NULL))
                        LIMIT \(Self.batchSize))
                    """, days)
                outcome.deviceEvents = try await deleteInBatches(connection, """
                    DELETE FROM device_event_seen WHERE ctid IN (
                        SELECT ctid FROM device_event_seen WHERE seen_at < now() - make_interval(days => $1::int) LIMIT \(Self.batchSize))
                    """, days)
                _ = try await connection.query("SELECT pg_advisory_unlock($1::bigint)", [key])
                return outcome
            } catch {
                // A lost connection drops the session lock with it; otherwise give it back.
                if !connection.isBroken { _ = try? await connection.query("SELECT pg_advisory_unlock($1::bigint)", [key]) }
                throw error
            }
        }
    }

    private func deleteInBatches(_ connection: PostgresConnection, _ sql: String, _ days: String) async throws(PostgresError) -> Int {
        var total = 0
        while true {
            let deleted = try await connection.query(sql, [days]).affected
            total += deleted
            if deleted < Self.batchSize { return total }
        }
    }
}
