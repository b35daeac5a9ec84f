import HeraldCore
import HeraldPostgres
import Synchronization

/// How the shard runner paces itself.
public struct ShardSettings: Sendable {
    /// Sends in flight per shard (default 256).
    public var window = 256
    /// Checkpoint after this many sends (default 500; with the window this bounds what a crash
    /// resends to window + 500 < 1,000, docs/ARCHITECTURE.md).
    var checkpointEvery = 500
    /// ... or after this long (default 1 s).
    var checkpointInterval: Duration = .seconds(1)
    /// Audience page size (default 1,000).
    var pageSize = 1_000
    /// Retry limits and delays.
    var retry = RetryPolicy()
    /// How long after the stop request sends in flight may take to answer before the shard
    /// checkpoints without them (they are resent by whoever takes the shard over): the
    /// sends-in-flight share of `HERALD_DRAIN_SECONDS` (``ShutdownBudget``, 40% of 30 s).
    var drainDeadline: Duration = .seconds(12)
    /// A shard whose only work left is retries due more than this many seconds away hands the
    /// wait to the scheduler and frees its shard slot (default 10): one app's throttled or
    /// failing provider must not hold every slot for its backoff while other jobs wait.
    var retryHoldSeconds: Double = 10
    /// How long a message may fail temporarily, when only it fails, before it is dead-lettered
    /// (`HERALD_MESSAGE_RETRY_SECONDS`, default 600; ``MessageRetryBudget``).
    var messageRetryBudget: Duration = .seconds(600)

    /// The defaults.
    public init() {}
}

/// Everything a shard run uses, shared by the worker's runners.
struct PipelineContext: Sendable {
    let workerID: String
    let jobs: JobRepository
    let audience: AudienceResolver
    let subscriptions: SubscriptionRepository
    let directory: ProviderDirectory
    let publisher: ReceiptPublisher
    let metrics: WorkerMetrics
    let log: WorkerLog
    let settings: ShardSettings
    let stop: StopSignal

    /// A context.
    init(workerID: String, jobs: JobRepository, audience: AudienceResolver, subscriptions: SubscriptionRepository,
                directory: ProviderDirectory, publisher: ReceiptPublisher, metrics: WorkerMetrics, log: WorkerLog,
                settings: ShardSettings, stop: StopSignal) {
        self.workerID = workerID
        self.jobs = jobs
        self.audience = audience
        self.subscriptions = subscriptions
        self.directory = directory
        self.publisher = publisher
        self.metrics = metrics
        self.log = log
        self.settings = settings
        self.stop = stop
    }
}

/// Runs shards: claims the lease, streams the audience from the checkpoint, sends with a
/// bounded window, publishes exactly one terminal receipt per subscription, parks retries, and
/// checkpoints (docs/ARCHITECTURE.md). One ``ShardRunner`` serves the worker; each run is independent.
struct ShardRunner: Sendable {
    let context: PipelineContext
    /// Completes scheduled jobs when their last sub-job completes (issue 10).
    var scheduling: SchedulePlanner?
    /// The token buckets of jobs with `delivery.throttle_per_minute` (issue 10).
    var throttles: ThrottleRepository?
    /// Provider rate ceilings, this worker's share (issue 10).
    var rateLimits: ProviderRateLimits?
    /// Where a shard left with only later retries puts its message to be produced again when
    /// the first falls due (``ShardSettings/retryHoldSeconds``). Without it the run holds its
    /// slot and waits.
    var retryWaits: ScheduleRepository?

    /// A runner.
    init(context: PipelineContext) {
        self.context = context
    }

    /// Runs shard `shard` of `job` until it is finished, halted, taken over or the worker stops.
    /// Database and broker failures are retried here with backoff under the message's retry
    /// budget (``MessageRetryBudget``); a failure the budget gives up on abandons the shard:
    /// its row is marked dead-lettered (the job completes without its unsent rest) and the
    /// caller dead-letters the message. `source`: where the subscriptions come from (a live
    /// activity's tokens instead of the audience); `dropping`: settle every one with this
    /// reason instead of sending.
    func run(job: Job, shard: Shard, source: ShardSource = .audience, dropping: Receipt.Reason? = nil) async -> ShardRunOutcome {
        var budget = MessageRetryBudget(budget: context.settings.messageRetryBudget)
        while true {
            do {
                return try await runOnce(job: job, shard: shard, source: source, dropping: dropping)
            } catch {
                if context.stop.isSet { return .interrupted }
                if error is PostgresError { context.metrics.postgresError() } else { context.metrics.kafkaError() }
                let failure = MessageFailure.classify(error)
                switch budget.failed(failure, at: .now) {
                case .deadLetter(let cause):
                    context.log.error("shard run failed for good; abandoning the shard", [
                        "job_id": .string(job.id), "shard": .int(shard.shardNo), "error": .string(failure.detail),
                        "cause": .string(cause.rawValue), "attempts": .int(budget.attempts),
                    ])
                    await abandon(job: job, shard: shard)
                    return .abandoned(cause, attempts: budget.attempts, detail: failure.detail)
                case .retry(let delay):
                    context.log.error("shard run failed; retrying", [
                        "job_id": .string(job.id), "shard": .int(shard.shardNo), "error": .string(failure.detail),
                        "failure": .string(failure.kind == .outage ? "outage" : "temporary"), "retry_in_ms": .int(Int(delay.milliseconds)),
                    ])
                    await context.stop.sleep(for: delay)
                }
            }
        }
    }

    /// When a shard message that found its shard leased elsewhere is produced again: once the
    /// lease can have lapsed (the next whole second after it), and never sooner than 5 s on.
    static func requeueTime(leaseUntil: Timestamp?, now: Timestamp) -> Timestamp {
        let floor = now.seconds + 5
        guard let leaseUntil else { return Timestamp(seconds: floor) }
        return Timestamp(seconds: max(floor, leaseUntil.seconds + 1))
    }

    /// Marks the shard dead-lettered and completes the job when it was the last one open. Its
    /// own statements failed, not these (small writes by key), which are retried a few times;
    /// a shard left unmarked is redelivered, or found by `herald jobs` as still running.
    private func abandon(job: Job, shard: Shard) async {
        for attempt in 1...5 {
            do {
                try await context.jobs.abandonShard(jobID: job.id, shardNo: shard.shardNo, shardCount: shard.shardCount,
                                                    range: SubscriptionRange(from: shard.idFrom, to: shard.idTo))
                try await completeJobIfDone(job)
                return
            } catch {
                context.log.error("cannot mark the shard dead-lettered", [
                    "job_id": .string(job.id), "shard": .int(shard.shardNo), "attempt": .int(attempt), "error": .string("\(error)"),
                ])
                if context.stop.isSet { return }
                await context.stop.sleep(for: .seconds(1))
            }
        }
    }

    private func runOnce(job: Job, shard: Shard, source: ShardSource, dropping: Receipt.Reason?) async throws -> ShardRunOutcome {
        let range = SubscriptionRange(from: shard.idFrom, to: shard.idTo)
        var lease: ShardLease
        claiming: while true {
            if context.stop.isSet { return .interrupted }
            switch try await context.jobs.claim(jobID: job.id, shardNo: shard.shardNo, shardCount: shard.shardCount,
                                                range: range, holder: context.workerID) {
            case .claimed(let claimed):
                lease = claimed
                break claiming
            case .finished:
                try await completeJobIfDone(job)
                return .alreadyDone
            case .cancelled:
                return .alreadyDone
            case .heldElsewhere(let holder, let until):
                // The holder is alive (its checkpoints renew the lease) or crashed (the lease
                // lapses within 30 s). Rather than hold this slot until then, the message waits
                // in scheduled_jobs, as a retry wait does, until the lease can lapse: at most
                // once every 5 s, and while the holder lives about once a lease (30 s).
                if let retryWaits, case .audience = source, dropping == nil, job.kind != .liveActivity {
                    let due = Self.requeueTime(leaseUntil: until, now: .now)
                    try await retryWaits.scheduleRetryWait(jobID: shard.jobID, reportedJobID: job.reported.id, appID: job.appID,
                                                           shardNo: shard.shardNo, dueAt: due,
                                                           lane: job.delivery.urgent ? "shards-urgent" : "shards", body: shard.json.serialized())
                    context.log.info("shard held elsewhere; its message waits for the lease", [
                        "job_id": .string(job.id), "shard": .int(shard.shardNo), "holder": .string(holder), "due": .string(due.rfc3339),
                    ])
                    return .waiting(until: due)
                }
                let wait = until.map { max(0.2, min(5, Double($0.unixMilliseconds - Timestamp.now.unixMilliseconds) / 1000 + 0.2)) } ?? 1
                context.log.debug("shard held elsewhere; waiting", [
                    "job_id": .string(job.id), "shard": .int(shard.shardNo), "holder": .string(holder),
                ])
                try? await Task.sleep(for: .milliseconds(Int64(wait * 1000)))
            }
        }
        guard let delivery = try await context.directory.delivery(appID: job.appID, fresh: true) else {
            // The app was deleted after the job was planned: nothing can be sent.
            context.log.error("the job's app no longer exists; shard released", ["job_id": .string(job.id), "app_id": .string(job.appID)])
            try await context.jobs.release(lease)
            return .halted
        }
        try await context.jobs.setState(jobID: job.id, to: .running, from: [.received, .planned])
        context.metrics.shardStarted()
        // A sub-job sends and reports under the job the user sent (`job.reported`).
        // A live activity's run is planned afresh from its job (the numbering check), so only
        // audience shards hand their waits over.
        var handOver: Double?
        if retryWaits != nil, case .audience = source, dropping == nil, job.kind != .liveActivity {
            handOver = context.settings.retryHoldSeconds
        }
        let run = ShardRun(context: context, job: job.reported, lease: lease, range: range, delivery: delivery,
                           source: source, dropping: dropping, handOverAfterSeconds: handOver)
        if let perMinute = job.delivery.throttlePerMinute, let throttles {
            run.throttle = JobThrottle(jobID: job.reported.id, perMinute: perMinute, repository: throttles)
        }
        run.rateLimits = rateLimits
        let outcome = try await run.run()
        await run.throttle?.finish()
        switch outcome {
        case .finished:
            context.metrics.shardFinished()
            try await completeJobIfDone(job)
        case .halted:
            try await context.jobs.setState(jobID: job.id, to: .halted, from: [.running, .planned])
        case .waiting(let until):
            // Released already: a crash from here on redelivers the shard message, whose run
            // finds the same parked retries and stores the same release (same key) again.
            if let retryWaits {
                // Whole seconds, rounded up, so the run it starts finds the first retry due.
                let due = Timestamp(seconds: until.seconds + (until.nanoseconds > 0 ? 1 : 0))
                try await retryWaits.scheduleRetryWait(jobID: shard.jobID, reportedJobID: job.reported.id, appID: job.appID,
                                                       shardNo: shard.shardNo, dueAt: due,
                                                       lane: job.delivery.urgent ? "shards-urgent" : "shards", body: shard.json.serialized())
            }
        case .alreadyDone, .leaseLost, .interrupted, .abandoned:
            break
        }
        return outcome
    }

    /// Publishes `completed` with the totals when every shard of the job is finished, then
    /// records it. Publishing first means a crash in between repeats the event (same receipt id)
    /// rather than losing it.
    func completeJobIfDone(_ job: Job) async throws {
        guard let (totals, deadLettered) = try await context.jobs.completion(jobID: job.id) else { return }
        if let stored = try await context.jobs.storedJob(id: job.id), stored.completedAt != nil { return }
        var receipt = Receipt(jobID: job.id, appID: job.appID, stage: .completed, at: .now)
        receipt.totals = totals
        if deadLettered > 0 { receipt.deadLetteredShards = deadLettered }
        // A sub-job's totals are reported in its parent's `completed` event, not on their own.
        if job.parentID == nil { try await context.publisher.publish([receipt]) }
        if try await context.jobs.markCompleted(jobID: job.id, totals: totals) {
            // markCompleted keeps a cancelled job cancelled.
            context.metrics.jobFinished(state: (try await context.jobs.state(jobID: job.id) ?? .completed).rawValue)
            context.log.info("job completed", [
                "job_id": .string(job.id), "accepted": .int(Int(totals.accepted)), "unregistered": .int(Int(totals.unregistered)),
                "failed": .int(Int(totals.failed)), "dropped": .int(Int(totals.dropped)),
            ])
        }
        if let parentID = job.parentID { try await scheduling?.completeParentIfDone(parentID, appID: job.appID) }
    }
}

