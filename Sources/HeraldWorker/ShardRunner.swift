import HeraldCore
import HeraldPostgres
import Synchronization

/// How the shard runner paces itself.
public struct ShardSettings: Sendable {
    /// Sends in flight per shard (default 256).
    public var window = 256
    /// Checkpoint after this many sends (default 500; with the window this bounds what a crash
    /// resends to window + 500 < 1,000, DESIGN §4).
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
/// checkpoints (DESIGN §4). One ``ShardRunner`` serves the worker; each run is independent.
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
        try await context.jobs.setState(jobID: job.id, to: "running", from: ["received", "planned"])
        context.metrics.shardStarted()
        // A sub-job sends and reports under the job the user sent (`job.reported`).
        let run = ShardRun(context: context, job: job.reported, lease: lease, range: range, delivery: delivery)
        run.source = source
        run.dropping = dropping
        if let perMinute = job.delivery.throttlePerMinute, let throttles {
            run.throttle = JobThrottle(jobID: job.reported.id, perMinute: perMinute, repository: throttles)
        }
        run.rateLimits = rateLimits
        // A live activity's run is planned afresh from its job (the numbering check), so only
        // audience shards hand their waits over.
        if retryWaits != nil, case .audience = source, dropping == nil, job.kind != .liveActivity {
            run.handOverAfterSeconds = context.settings.retryHoldSeconds
        }
        let outcome = try await run.run()
        await run.throttle?.finish()
        switch outcome {
        case .finished:
            context.metrics.shardFinished()
            try await completeJobIfDone(job)
        case .halted:
            try await context.jobs.setState(jobID: job.id, to: "halted", from: ["running", "planned"])
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
            context.metrics.jobFinished(state: try await context.jobs.state(jobID: job.id) ?? "completed")
            context.log.info("job completed", [
                "job_id": .string(job.id), "accepted": .int(Int(totals.accepted)), "unregistered": .int(Int(totals.unregistered)),
                "failed": .int(Int(totals.failed)), "dropped": .int(Int(totals.dropped)),
            ])
        }
        if let parentID = job.parentID { try await scheduling?.completeParentIfDone(parentID, appID: job.appID) }
    }
}

/// A subscription waiting for something: a retry, the verdict of the invalidation guard, or a
/// halted provider. Parked in `shard_retries` at checkpoints so the cursor can move on.
struct ParkedSubscription {
    enum Kind: Equatable {
        /// A retryable answer; try again at `due`.
        case retry
        /// "Unregistered", held until the invalidation guard decides.
        case awaitingVerdict(reason: Receipt.Reason, providerReason: String, timestamp: Timestamp?)
        /// Its provider is halted for the app.
        case halted(Receipt.Provider)
    }

    var member: AudienceMember
    var kind: Kind
    /// Attempts made.
    var attempts: Int
    var due: Timestamp
    var lastReason: String
    var firstAttemptAt: Timestamp
    /// Written to `shard_retries` (so resolving it must delete the row).
    var persisted = false
    /// Changed since the last checkpoint.
    var dirty = true
    /// Being sent right now.
    var inFlight = false

    /// The `shard_retries` row.
    var parked: ParkedRetry {
        let reason: String
        let next: Timestamp
        switch kind {
        case .retry:
            reason = String(lastReason.prefix(200))
            next = due
        case .awaitingVerdict(let receiptReason, _, _):
            // After a crash the send is simply repeated: the answer will be the same.
            reason = "verdict:" + receiptReason.rawValue
            next = .now
        case .halted(let provider):
            reason = "halted:\(provider.rawValue):\(lastReason.prefix(150))"
            next = Timestamp(seconds: Timestamp.now.seconds + 365 * 24 * 3600)
        }
        return ParkedRetry(subscriptionID: member.id, attempts: max(1, attempts), nextAttemptAt: next, lastReason: reason)
    }
}

/// One run of one shard. Used by a single task: the sends run in child tasks that only send and
/// return their answer; every decision and all state stay here.
final class ShardRun {
    enum Event: Sendable {
        case sent(member: AudienceMember, attempts: Int, firstAttemptAt: Timestamp, outcome: DeliveryOutcome, seconds: Double, isRetry: Bool)
        case tick
    }

    struct LeaseLost: Error {}

    let context: PipelineContext
    let job: Job
    let range: SubscriptionRange
    var lease: ShardLease
    var delivery: AppDelivery
    var counts: ShardCounts
    var watermark = DeliveryWatermark()
    var receipts: [Receipt] = []
    var invalidations: [TokenInvalidation] = []
    var parked: [String: ParkedSubscription] = [:]
    var resolvedParked: Set<String> = []
    var sinceCheckpoint = 0
    var lastCheckpoint = ContinuousClock.now
    var lastRefresh = ContinuousClock.now
    var cancelled = false
    var announcedHalts: Set<Receipt.Provider> = []
    var running = 0
    var tickPending = false
    /// `delivery.throttle_per_minute`: one token per send, from the job's shared bucket.
    var throttle: JobThrottle?
    /// Provider ceilings: one slot per send, this worker's share.
    var rateLimits: ProviderRateLimits?
    /// Throttled runs send one request per provider and wait for its answer before the rest:
    /// sends paced while the connection and its token were still being set up would otherwise
    /// all reach the provider at once when it is ready.
    var warmedProviders: Set<Receipt.Provider> = []
    /// Where the subscriptions come from (issue 9: a live activity's tokens).
    var source: ShardSource = .audience
    /// Settle every subscription with this `dropped` reason instead of sending (a live-activity
    /// update refused by the numbering check).
    var dropping: Receipt.Reason?
    /// Subscriptions whose live-activity or push-to-start token was unregistered: only that
    /// token is invalidated at the checkpoint, never the subscription.
    var tokenInvalidations: [String] = []
    /// When set, a run left with nothing in flight and only retries due more than this many
    /// seconds away ends as ``ShardRunOutcome/waiting(until:)`` instead of waiting in its slot.
    var handOverAfterSeconds: Double?

    init(context: PipelineContext, job: Job, lease: ShardLease, range: SubscriptionRange, delivery: AppDelivery) {
        self.context = context
        self.job = job
        self.lease = lease
        self.range = range
        self.delivery = delivery
        counts = lease.counts
    }

    var appID: String { job.appID }

    func fields(_ extra: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var fields = extra
        fields["job_id"] = .string(job.id)
        fields["shard"] = .int(lease.shardNo)
        return fields
    }

    // MARK: - The run

    func run() async throws -> ShardRunOutcome {
        do {
            try await loadParked()
            cancelled = try await context.jobs.state(jobID: job.id) == "cancelled"
            return try await withThrowingTaskGroup(of: Event.self) { group in
                defer { group.cancelAll() }
                addTick(&group)
                let outcome = try await sweep(&group)
                return outcome
            }
        } catch is LeaseLost {
            context.log.warning("shard taken over by another worker; stopping", fields())
            return .leaseLost
        }
    }

    private func sweep(_ group: inout ThrowingTaskGroup<Event, any Error>) async throws -> ShardRunOutcome {
        let query = AudienceQuery(appID: appID, audience: job.audience ?? .all)
        var pages = ShardPages(source: source, appID: appID, audience: context.audience,
                               iterator: context.audience.pages(query, in: range, after: lease.cursor, pageSize: context.settings.pageSize).makeAsyncIterator(),
                               cursor: lease.cursor, pageSize: context.settings.pageSize, listed: ShardPages.listedIDs(job.audience))
        // 1. The audience, in id order, from the checkpoint.
        sweeping: while !context.stop.isSet {
            guard let page = try await pages.next() else { break }
            try await refresh()
            for member in page {
                if context.stop.isSet { break sweeping }
                watermark.dispatched(member.id)
                if settling(member.id, firstAttempt: true, { resolveWithoutSending(member, attempts: 0, firstAttemptAt: .now) }) {
                    continue
                }
                while running >= context.settings.window {
                    try await handle(try await group.next(), &group)
                }
                if throttle != nil {
                    let provider = AppDelivery.provider(for: member, kind: job.kind)
                    while !warmedProviders.contains(provider) && running > 0 {
                        try await handle(try await group.next(), &group)
                    }
                }
                try await throttle?.acquire()
                counts.sent += 1
                dispatch(member, attempts: 1, firstAttemptAt: .now, isRetry: false, &group)
                sinceCheckpoint += 1
                if checkpointDue { try await checkpoint() }
            }
            try await dispatchDueRetries(&group)
            if checkpointDue { try await checkpoint() }
        }
        // 2. What is parked: retries as they fall due, verdicts, halts lifted meanwhile.
        var waitingUntil: Timestamp?
        while !context.stop.isSet {
            settleParked(final: false)
            try await dispatchDueRetries(&group)
            if running == 0 {
                settleParked(final: true)
                let waiting = parked.values.filter { if case .halted = $0.kind { return false } else { return true } }
                if waiting.isEmpty { break }
                if let until = handOverTime(waiting) {
                    waitingUntil = until
                    break
                }
            }
            try await handle(try await group.next(), &group)
            if checkpointDue { try await checkpoint() }
        }
        // 3. Answers still in flight (bounded on a stop), then the last checkpoint.
        while running > 0 {
            if let requested = context.stop.requestedAt, ContinuousClock.now > requested + context.settings.drainDeadline { break }
            try await handle(try await group.next(), &group)
        }
        settleParked(final: !context.stop.isSet)
        try await checkpoint()
        if context.stop.isSet {
            try await context.jobs.release(lease)
            context.log.info("shard checkpointed and released for shutdown", fields(["cursor": lease.cursor.map(JSONValue.string) ?? .null]))
            return .interrupted
        }
        if let waitingUntil, !parked.isEmpty {
            try await context.jobs.release(lease)
            context.log.info("shard waits for its retries outside its slot", fields([
                "parked": .int(parked.count), "until": .string(waitingUntil.rfc3339),
            ]))
            return .waiting(until: waitingUntil)
        }
        if parked.isEmpty {
            try await context.jobs.finish(lease, counts: counts)
            context.log.info("shard finished", fields([
                "sent": .int(Int(counts.sent)), "accepted": .int(Int(counts.accepted)), "unregistered": .int(Int(counts.unregistered)),
                "failed": .int(Int(counts.failed)), "dropped": .int(Int(counts.dropped)),
            ]))
            return .finished
        }
        try await context.jobs.release(lease)
        context.log.warning("shard stopped: the rest waits behind a halted provider", fields(["parked": .int(parked.count)]))
        return .halted
    }

    /// With nothing in flight and only retries left (none in flight, none waiting for a
    /// verdict), the due time of the first when it is further away than the hold: the run
    /// hands the wait over. Nil to keep waiting here.
    private func handOverTime(_ waiting: [ParkedSubscription]) -> Timestamp? {
        guard let hold = handOverAfterSeconds,
              waiting.allSatisfy({ $0.kind == .retry && !$0.inFlight }),
              let first = waiting.map(\.due).min() else { return nil }
        return Double(first.unixMilliseconds - Timestamp.now.unixMilliseconds) / 1000 > hold ? first : nil
    }

    // MARK: - Sending

    /// The token this job uses for `member`: the VoIP token for VoIP jobs on iOS.
    private func token(for member: AudienceMember) -> String? {
        if job.kind == .voip && member.platform == .ios { return member.voipToken }
        return member.token
    }

    private func dispatch(_ member: AudienceMember, attempts: Int, firstAttemptAt: Timestamp, isRetry: Bool,
                          _ group: inout ThrowingTaskGroup<Event, any Error>) {
        let delivery = self.delivery
        let job = self.job
        let token = self.token(for: member) ?? member.token
        running += 1
        context.metrics.adjustInFlight(1)
        let rateLimits = self.rateLimits
        let appID = self.appID
        group.addTask {
            // The provider ceiling's wait happens in the send's own task: the window bounds it.
            await rateLimits?.acquire(appID: appID, provider: AppDelivery.provider(for: member, kind: job.kind), urgent: job.delivery.urgent)
            let started = ContinuousClock.now
            let outcome = await delivery.send(job, to: member, token: token, now: .now)
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return .sent(member: member, attempts: attempts, firstAttemptAt: firstAttemptAt, outcome: outcome, seconds: seconds, isRetry: isRetry)
        }
    }

    private func addTick(_ group: inout ThrowingTaskGroup<Event, any Error>) {
        guard !tickPending else { return }
        tickPending = true
        group.addTask {
            try? await Task.sleep(for: .milliseconds(250))
            return .tick
        }
    }

    private func dispatchDueRetries(_ group: inout ThrowingTaskGroup<Event, any Error>) async throws {
        let now = Timestamp.now
        let due = parked.values.filter { $0.kind == .retry && !$0.inFlight && $0.due <= now }.sorted { $0.due < $1.due }
        for entry in due {
            if context.stop.isSet { return }
            if settling(entry.member.id, firstAttempt: false, {
                resolveWithoutSending(entry.member, attempts: entry.attempts, firstAttemptAt: entry.firstAttemptAt)
            }) { continue }
            while running >= context.settings.window {
                try await handle(try await group.next(), &group)
            }
            guard var current = parked[entry.member.id], current.kind == .retry, !current.inFlight else { continue }
            try await throttle?.acquire()
            current.inFlight = true
            parked[entry.member.id] = current
            dispatch(entry.member, attempts: entry.attempts + 1, firstAttemptAt: entry.firstAttemptAt, isRetry: true, &group)
            if checkpointDue { try await checkpoint() }
        }
    }

    /// Settles a subscription without a send when the job no longer wants one: cancelled,
    /// expired, its provider halted, no VoIP token. True when settled (or parked).
    private func resolveWithoutSending(_ member: AudienceMember, attempts: Int, firstAttemptAt: Timestamp) -> Bool {
        // A listed subscription that does not exist, opted out or has no token for this job.
        if let reason = member.unavailable {
            drop(member, reason, attempts: attempts)
            return true
        }
        if cancelled {
            drop(member, .cancelled, attempts: attempts)
            return true
        }
        if let dropping {
            drop(member, dropping, attempts: attempts)
            return true
        }
        if job.isExpired(at: .now) {
            drop(member, .expired, attempts: attempts)
            return true
        }
        let provider = AppDelivery.provider(for: member, kind: job.kind)
        if let reason = delivery.haltReason(provider) {
            park(member, kind: .halted(provider), attempts: attempts, due: .now, reason: reason, firstAttemptAt: firstAttemptAt)
            announceHalt(provider, reason: reason)
            return true
        }
        if token(for: member) == nil {
            drop(member, .noVoIPToken, attempts: attempts)
            return true
        }
        return false
    }

    // MARK: - Answers

    private func handle(_ event: Event?, _ group: inout ThrowingTaskGroup<Event, any Error>) async throws {
        guard let event else { return }
        switch event {
        case .tick:
            tickPending = false
            // Ticks go on while finishing too, so a stop's drain deadline is checked even while
            // every answer in flight is late.
            addTick(&group)
            if ContinuousClock.now - lastRefresh >= .seconds(2) { try await refresh() }
            if checkpointDue { try await checkpoint() }
        case .sent(let member, let attempts, let firstAttemptAt, let outcome, let seconds, let isRetry):
            running -= 1
            context.metrics.adjustInFlight(-1)
            let provider = AppDelivery.provider(for: member, kind: job.kind)
            warmedProviders.insert(provider)
            context.metrics.sendDuration(provider: provider.rawValue, seconds: seconds)
            context.metrics.sendAttempt(provider: provider.rawValue, result: outcome.attemptResult)
            if isRetry, var entry = parked[member.id] {
                entry.inFlight = false
                parked[member.id] = entry
            }
            settling(member.id, firstAttempt: !isRetry) {
                apply(outcome, to: member, provider: provider, attempts: attempts, firstAttemptAt: firstAttemptAt)
                return true
            }
        }
    }

    /// Runs `body`, which settles subscription `id` (true: a receipt, a park, a drop) or leaves it
    /// as it was (false), and lets what it counted and invalidated wait for the cursor: the
    /// watermark hands it back when the cursor passes the subscription, so `counts` and
    /// `invalidations` (saved with the cursor at checkpoints) cover exactly the subscriptions up
    /// to the cursor. Counting an answer beyond it at once counted it twice when a takeover resent
    /// from the cursor; invalidating one beyond it left it out of the resumed audience, never
    /// counted. `firstAttempt`: the subscription's first resolution in this run (it moves the
    /// cursor); otherwise a parked one settling later, held the same way until the cursor passes.
    @discardableResult
    private func settling(_ id: String, firstAttempt: Bool, _ body: () -> Bool) -> Bool {
        let (before, invalidationsBefore) = (counts, invalidations.count)
        guard body() else { return false }
        // Most parked subscriptions settle nothing on a given turn: nothing to hold.
        if !firstAttempt && counts == before && invalidations.count == invalidationsBefore { return true }
        let settled = DeliveryWatermark.Settled(counts: counts.outcomes(since: before),
                                                invalidations: Array(invalidations[invalidationsBefore...]))
        counts = counts.removing(settled.counts)
        invalidations.removeSubrange(invalidationsBefore...)
        let handedBack = firstAttempt ? watermark.resolved(id, leaving: settled) : watermark.settledLater(id, leaving: settled)
        counts.add(handedBack.counts)
        invalidations += handedBack.invalidations
        return true
    }

    private func apply(_ outcome: DeliveryOutcome, to member: AudienceMember, provider: Receipt.Provider, attempts: Int, firstAttemptAt: Timestamp) {
        if outcome.isVerdictOnToken {
            var invalid = false
            if case .unregistered = outcome { invalid = true }
            _ = context.directory.guards.record(appID: appID, provider: provider.rawValue, invalid: invalid)
        }
        switch outcome {
        case .accepted(let providerID):
            rateLimits?.succeeded(appID: appID, provider: provider)
            var receipt = deviceReceipt(member, .accepted, reason: nil, attempts: attempts)
            receipt.providerID = providerID
            settle(member, receipt)
            counts.accepted += 1
            context.metrics.notification(provider: provider.rawValue, outcome: "accepted")
        case .unregistered(let reason, let providerReason, let timestamp):
            switch context.directory.guards.verdict(appID: appID, provider: provider.rawValue) {
            case .apply:
                unregister(member, reason: reason, providerReason: providerReason, timestamp: timestamp, attempts: attempts)
            case .undecided:
                park(member, kind: .awaitingVerdict(reason: reason, providerReason: providerReason, timestamp: timestamp),
                     attempts: attempts, due: .now, reason: providerReason, firstAttemptAt: firstAttemptAt)
            case .misconfigured:
                halt(provider, reason: .suspectedMisconfiguration, detail: "the share of unregistered answers is above the threshold")
                park(member, kind: .halted(provider), attempts: attempts, due: .now, reason: "suspected-misconfiguration", firstAttemptAt: firstAttemptAt)
            }
        case .retryable(let providerReason, let retryAfter, let quota):
            if quota { rateLimits?.quotaExceeded(appID: appID, provider: provider) }
            context.metrics.notification(provider: provider.rawValue, outcome: "retried")
            let next = context.settings.retry.nextAttempt(attempts: attempts, firstAttemptAt: firstAttemptAt, now: .now, expiresAt: job.expiresAt,
                                                          retryAfterSeconds: retryAfter, quotaExceeded: quota, random: Double.random(in: 0..<1))
            if let next {
                park(member, kind: .retry, attempts: attempts, due: next, reason: providerReason, firstAttemptAt: firstAttemptAt)
            } else {
                var receipt = deviceReceipt(member, .failed, reason: .retriesExhausted, attempts: attempts)
                receipt.providerReason = String(providerReason.prefix(200))
                settle(member, receipt)
                counts.failed += 1
                context.metrics.notification(provider: provider.rawValue, outcome: "failed", reason: .retriesExhausted)
            }
        case .failed(let reason, let providerReason):
            var receipt = deviceReceipt(member, .failed, reason: reason, attempts: attempts)
            receipt.providerReason = String(providerReason.prefix(200))
            settle(member, receipt)
            counts.failed += 1
            context.metrics.notification(provider: provider.rawValue, outcome: "failed", reason: reason)
        case .credentialFault(let providerReason, let haltReason):
            halt(provider, reason: haltReason, detail: providerReason)
            park(member, kind: .halted(provider), attempts: attempts, due: .now, reason: providerReason, firstAttemptAt: firstAttemptAt)
        }
    }

    private func deviceReceipt(_ member: AudienceMember, _ stage: Receipt.Stage, reason: Receipt.Reason?, attempts: Int) -> Receipt {
        // An id of no subscription has no platform to report.
        let platform = member.unavailable == .unknownSubscription ? nil : member.platform
        var receipt = Receipt(jobID: job.id, appID: appID, stage: stage, subscriptionID: member.id, platform: platform,
                              reason: reason, at: .now)
        if attempts > 0 { receipt.attempts = attempts }
        return receipt
    }

    /// Records a terminal receipt and takes the subscription off the parked list.
    private func settle(_ member: AudienceMember, _ receipt: Receipt) {
        receipts.append(receipt)
        if let entry = parked.removeValue(forKey: member.id), entry.persisted {
            resolvedParked.insert(member.id)
        }
    }

    private func drop(_ member: AudienceMember, _ reason: Receipt.Reason, attempts: Int) {
        settle(member, deviceReceipt(member, .dropped, reason: reason, attempts: attempts))
        counts.dropped += 1
        context.metrics.notification(provider: AppDelivery.provider(for: member, kind: job.kind).rawValue, outcome: "dropped", reason: reason)
    }

    private func unregister(_ member: AudienceMember, reason: Receipt.Reason, providerReason: String, timestamp: Timestamp?, attempts: Int) {
        var receipt = deviceReceipt(member, .unregistered, reason: reason, attempts: attempts)
        receipt.providerReason = String(providerReason.prefix(200))
        settle(member, receipt)
        if source.sendsToOwnToken(member) {
            tokenInvalidations.append(member.id)
        } else {
            invalidations.append(TokenInvalidation(subscriptionID: member.id, reason: String(providerReason.prefix(200)), providerTimestamp: timestamp))
        }
        counts.unregistered += 1
        context.metrics.notification(provider: AppDelivery.provider(for: member, kind: job.kind).rawValue, outcome: "unregistered", reason: reason)
    }

    private func park(_ member: AudienceMember, kind: ParkedSubscription.Kind, attempts: Int, due: Timestamp, reason: String, firstAttemptAt: Timestamp) {
        var entry = parked[member.id] ?? ParkedSubscription(member: member, kind: kind, attempts: attempts, due: due,
                                                            lastReason: reason, firstAttemptAt: firstAttemptAt)
        entry.kind = kind
        entry.attempts = attempts
        entry.due = due
        entry.lastReason = reason
        entry.dirty = true
        entry.inFlight = false
        parked[member.id] = entry
        if case .halted(let provider) = kind {
            context.metrics.notification(provider: provider.rawValue, outcome: "halted")
        }
    }

    // MARK: - Halts and verdicts

    /// Halts the app on `provider` (every worker sees it through PostgreSQL) and reports it once
    /// per run. Subscriptions waiting for a verdict on that provider are parked behind the halt:
    /// their invalidations are discarded (DESIGN §4).
    private func halt(_ provider: Receipt.Provider, reason: Receipt.Reason, detail: String) {
        if delivery.markHaltedLocally(provider, reason: reason.rawValue) {
            context.log.error("provider halted for app", fields([
                "app_id": .string(appID), "provider": .string(provider.rawValue), "reason": .string(reason.rawValue),
                "detail": .string(String(detail.prefix(300))),
            ]))
            pendingHalts.append((provider, reason.rawValue))
        }
        announceHalt(provider, reason: reason.rawValue)
        for (id, entry) in parked where !entry.inFlight {
            if case .awaitingVerdict = entry.kind, AppDelivery.provider(for: entry.member, kind: job.kind) == provider {
                var updated = entry
                updated.kind = .halted(provider)
                updated.dirty = true
                parked[id] = updated
            }
        }
    }

    /// Halts recorded locally and still to be written to PostgreSQL (at the next checkpoint).
    var pendingHalts: [(Receipt.Provider, String)] = []

    private func announceHalt(_ provider: Receipt.Provider, reason: String) {
        guard announcedHalts.insert(provider).inserted else { return }
        var receipt = Receipt(jobID: job.id, appID: appID, stage: .halted,
                              reason: Receipt.Reason(rawValue: reason) ?? .credentials, at: .now)
        receipt.provider = provider
        receipts.append(receipt)
    }

    /// Applies the guard's verdicts to subscriptions waiting for one, turns halted ones whose
    /// provider was resumed back into retries, and drops everything left on a cancellation.
    private func settleParked(final: Bool) {
        for (id, entry) in parked where !entry.inFlight {
            settling(id, firstAttempt: false) {
                settleParked(entry, final: final)
                return true
            }
        }
    }

    /// One parked subscription's turn of ``settleParked(final:)``.
    private func settleParked(_ entry: ParkedSubscription, final: Bool) {
        let id = entry.member.id
        let provider = AppDelivery.provider(for: entry.member, kind: job.kind)
        if cancelled {
            drop(entry.member, .cancelled, attempts: entry.attempts)
            return
        }
        switch entry.kind {
        case .awaitingVerdict(let reason, let providerReason, let timestamp):
            switch context.directory.guards.verdict(appID: appID, provider: provider.rawValue, final: final) {
            case .apply:
                unregister(entry.member, reason: reason, providerReason: providerReason, timestamp: timestamp, attempts: entry.attempts)
            case .misconfigured:
                halt(provider, reason: .suspectedMisconfiguration, detail: "the share of unregistered answers is above the threshold")
            case .undecided:
                break
            }
        case .halted(let haltedProvider):
            // Expired behind the halt (HaltedJobSweeper ran the shard again): nothing will send it.
            if job.isExpired(at: .now) {
                drop(entry.member, .expired, attempts: entry.attempts)
                return
            }
            if delivery.haltReason(haltedProvider) == nil {
                var updated = entry
                updated.kind = .retry
                updated.due = .now
                updated.dirty = true
                parked[id] = updated
            }
        case .retry:
            break
        }
    }

    /// Re-reads the app (halts set or lifted elsewhere) and the job's state (cancellation).
    private func refresh() async throws {
        lastRefresh = ContinuousClock.now
        if let latest = try await context.directory.delivery(appID: appID) {
            delivery = latest
        }
        if !cancelled, try await context.jobs.state(jobID: job.id) == "cancelled" {
            cancelled = true
            context.log.info("job cancelled; dropping the rest of the shard", fields())
        }
    }

    // MARK: - Checkpoints

    var checkpointDue: Bool {
        sinceCheckpoint >= context.settings.checkpointEvery
            || (ContinuousClock.now - lastCheckpoint >= context.settings.checkpointInterval
                && (sinceCheckpoint > 0 || !receipts.isEmpty || ContinuousClock.now - lastCheckpoint >= .seconds(10)))
    }

    /// Makes progress durable, in this order: halts recorded, receipts acknowledged by Kafka,
    /// then the cursor, counts, parked subscriptions and token invalidations in one transaction
    /// (which also renews the lease). A crash before the last step repeats the work since the
    /// previous checkpoint, with the same receipt ids. (Invalidating before that transaction
    /// lost subscriptions: a takeover resumes with the audience minus the invalidated ones, so
    /// their counts, and their receipts if not yet published, were never made again.)
    func checkpoint() async throws {
        for (provider, reason) in pendingHalts {
            try await context.directory.recordHalt(appID: appID, provider: provider, reason: reason)
        }
        pendingHalts.removeAll()
        if !tokenInvalidations.isEmpty {
            // Live-activity tokens only (never a subscription): idempotent, safe before the receipts.
            try await source.invalidateTokens(appID: appID, subscriptionIDs: tokenInvalidations)
            tokenInvalidations.removeAll()
        }
        if !receipts.isEmpty {
            try await context.publisher.publish(receipts)
            receipts.removeAll()
        }
        let dirty = parked.values.filter(\.dirty)
        let park = dirty.map(\.parked)
        let resolved = Array(resolvedParked)
        var current = lease
        let result: Result<Void, PostgresError>
        do throws(PostgresError) {
            try await context.jobs.checkpoint(&current, cursor: watermark.cursor, counts: counts, park: park, resolved: resolved,
                                              invalidations: invalidations.isEmpty ? nil : (appID, invalidations))
            result = .success(())
        } catch {
            result = .failure(error)
        }
        if case .failure(let error) = result {
            if error.code == .leaseLost { throw LeaseLost() }
            throw error
        }
        lease = current
        invalidations.removeAll()
        for entry in dirty {
            parked[entry.member.id]?.dirty = false
            parked[entry.member.id]?.persisted = true
        }
        resolvedParked.removeAll()
        sinceCheckpoint = 0
        lastCheckpoint = ContinuousClock.now
    }

    /// Reads the shard's parked subscriptions back after a crash, a takeover or a resume.
    private func loadParked() async throws {
        let rows = try await context.jobs.parkedRetries(lease)
        guard !rows.isEmpty else { return }
        var members: [String: AudienceMember] = [:]
        var index = 0
        while index < rows.count {
            let batch = rows[index..<min(index + 1000, rows.count)].map(\.subscriptionID)
            for member in try await source.members(appID: appID, ids: Array(batch), audience: context.audience) { members[member.id] = member }
            index += 1000
        }
        for row in rows {
            // Parked beyond the checkpointed cursor: the sweep from the cursor sends it again as
            // a first attempt, so the parked copy goes (a second copy would be sent and counted twice).
            if lease.cursor.map({ row.subscriptionID.lowercased() > $0.lowercased() }) ?? true {
                resolvedParked.insert(row.subscriptionID)
                continue
            }
            guard let member = members[row.subscriptionID] else {
                // Deleted meanwhile: nothing to send to.
                let ghost = AudienceMember(id: row.subscriptionID, platform: .android, token: "", sandbox: false, sdk: false,
                                           language: nil, timeZone: nil, voipToken: nil)
                settle(ghost, deviceReceipt(ghost, .dropped, reason: .optedOut, attempts: row.attempts))
                resolvedParked.insert(row.subscriptionID)
                counts.dropped += 1
                continue
            }
            let reason = row.lastReason ?? ""
            var entry = ParkedSubscription(member: member, kind: .retry, attempts: row.attempts, due: row.nextAttemptAt,
                                           lastReason: reason, firstAttemptAt: row.firstAttemptAt ?? .now)
            entry.persisted = true
            entry.dirty = false
            if reason.hasPrefix("halted:") {
                let provider = AppDelivery.provider(for: member, kind: job.kind)
                if let haltReason = delivery.haltReason(provider) {
                    entry.kind = .halted(provider)
                    entry.lastReason = haltReason
                } else {
                    entry.due = .now
                    entry.dirty = true
                }
            } else if reason.hasPrefix("verdict:") {
                entry.due = .now
            }
            parked[member.id] = entry
        }
        context.log.info("resuming parked subscriptions", fields(["parked": .int(parked.count)]))
    }
}
