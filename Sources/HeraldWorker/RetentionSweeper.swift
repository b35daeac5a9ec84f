import HeraldPostgres

/// Runs `HERALD_RETENTION_DAYS` (schemas/): ``RetentionRepository``'s sweep (where the SQL
/// is) now and then every `interval`, logging what went. Every worker runs a sweeper; the
/// repository's advisory lock lets one of them sweep at a time.
struct RetentionSweeper: Sendable {
    /// What one sweep deleted.
    typealias Outcome = RetentionRepository.Outcome

    /// The advisory lock key of ``RetentionRepository``.
    static let advisoryLockKey = RetentionRepository.advisoryLockKey
    /// Rows per `DELETE`.
    static let batchSize = RetentionRepository.batchSize

    private let pool: PostgresPool
    private let retentionDays: Int
    private let log: WorkerLog
    private let interval: Duration

    /// A sweeper over `pool` keeping `retentionDays` days (0 keeps everything: ``run(stop:)``
    /// returns at once), sweeping every `interval` (an hour by default; shorter in tests).
    init(pool: PostgresPool, retentionDays: Int, log: WorkerLog, interval: Duration = .seconds(3600)) {
        self.pool = pool
        self.retentionDays = retentionDays
        self.log = log
        self.interval = interval
    }

    /// Sweeps now, then every `interval`, until `stop` is set. A failed sweep is logged and
    /// tried again next round; it never ends the worker.
    func run(stop: StopSignal) async {
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
            await stop.sleep(for: interval)
        }
    }

    /// One sweep: everything older than the retention, batch after batch. Nil when another
    /// worker holds the lock (it is sweeping) or retention is off.
    func sweep() async throws(PostgresError) -> Outcome? {
        try await RetentionRepository(pool: pool).sweep(retentionDays: retentionDays)
    }
}

extension RetentionSweeper: Service {
    var name: String { "retention-sweeper" }
}
