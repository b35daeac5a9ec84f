public import HeraldPostgres

/// Deletes old `jobs` (and, through `ON DELETE CASCADE`, their `job_shards`, `shard_retries` and
/// `scheduled_jobs`) and old `device_event_seen` rows, every `interval`, after
/// `HERALD_RETENTION_DAYS` (DESIGN §3).
///
/// A job goes once it was completed or cancelled more than `retentionDays` ago, or, whatever its
/// state, once it was received more than twice that long ago (a job stuck in `running` or
/// `halted` must not stay forever). Rows go in batches of ``batchSize``, each its own short
/// statement, so no sweep holds long locks or bloats one transaction. Every worker runs a
/// sweeper; a session advisory lock lets one of them sweep at a time, the others skip that round.
public struct RetentionSweeper: Sendable {
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
    private let retentionDays: Int
    private let log: WorkerLog
    private let interval: Duration

    /// A sweeper over `pool` keeping `retentionDays` days (0 keeps everything: ``run(stop:)``
    /// returns at once), sweeping every `interval` (an hour by default; shorter in tests).
    public init(pool: PostgresPool, retentionDays: Int, log: WorkerLog, interval: Duration = .seconds(3600)) {
        self.pool = pool
        self.retentionDays = retentionDays
        self.log = log
        self.interval = interval
    }

    /// Sweeps now, then every `interval`, until `stop` is set. A failed sweep is logged and
    /// tried again next round; it never ends the worker.
    public func run(stop: StopSignal) async {
        guard retentionDays > 0 else {
            log.info("retention off (HERALD_RETENTION_DAYS=0): old jobs and device events are kept")
            return
        }
        while !stop.isSet {
            do {
                if let outcome = try await sweep(), outcome.jobs + outcome.deviceEvents > 0 {
                    log.info("retention sweep", ["jobs": .int(outcome.jobs), "device_events": .int(outcome.deviceEvents),
                                                 "retention_days": .int(retentionDays)])
                }
            } catch {
                log.warning("retention sweep failed; trying again next round", ["error": .string(error.message)])
            }
            // Sleeps in short slices so a stop request is seen within a quarter of a second.
            let clock = ContinuousClock()
            let deadline = clock.now.advanced(by: interval)
            while !stop.isSet && clock.now < deadline {
                try? await Task.sleep(for: min(.milliseconds(250), clock.now.duration(to: deadline)))
            }
        }
    }

    /// One sweep: everything older than the retention, batch after batch. Nil when another
    /// worker holds the lock (it is sweeping) or retention is off.
    public func sweep() async throws(PostgresError) -> Outcome? {
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
