import HeraldCore
import HeraldPostgres

/// One run of one shard: the driver of ``ShardRunState``. It pages the audience, sends in child
/// tasks that only send and return their answer, reads the time, the app's halts and the
/// invalidation guard, and performs what the state decides — receipts, parks, halts and
/// checkpoints. Used by a single task; every decision is in the state.
final class ShardRun {
    enum Event: Sendable {
        case sent(ShardRunState.Send, outcome: DeliveryOutcome, seconds: Double)
        case tick
    }

    struct LeaseLost: Error {}

    let context: PipelineContext
    let job: Job
    let range: SubscriptionRange
    var lease: ShardLease
    var delivery: AppDelivery
    var state: ShardRunState
    var lastCheckpoint = ContinuousClock.now
    var lastRefresh = ContinuousClock.now
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
    let source: ShardSource

    init(context: PipelineContext, job: Job, lease: ShardLease, range: SubscriptionRange, delivery: AppDelivery,
         source: ShardSource, dropping: Receipt.Reason?, handOverAfterSeconds: Double?) {
        self.context = context
        self.job = job
        self.lease = lease
        self.range = range
        self.delivery = delivery
        self.source = source
        var facts = ShardRunState.Facts(job: job, dropping: dropping, retry: context.settings.retry, handOverAfterSeconds: handOverAfterSeconds)
        if case .liveActivity = source { facts.sendsToOwnTokens = true }
        state = ShardRunState(facts: facts, counts: lease.counts)
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
            if try await context.jobs.state(jobID: job.id) == .cancelled { state.cancel() }
            return try await withThrowingTaskGroup(of: Event.self) { group in
                defer { group.cancelAll() }
                addTick(&group)
                return try await sweep(&group)
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
                let provider = AppDelivery.provider(for: member, kind: job.kind)
                guard case .send(let send) = state.admit(member, haltReason: delivery.haltReason(provider), now: .now) else { continue }
                try await self.send(send, provider: provider, &group)
            }
            try await dispatchDueRetries(&group)
            if checkpointDue { try await checkpoint() }
        }
        // 2. What is parked: retries as they fall due, verdicts, halts lifted meanwhile.
        var waitingUntil: Timestamp?
        while !context.stop.isSet {
            settleParked(final: false)
            try await dispatchDueRetries(&group)
            if state.inFlight == 0 {
                settleParked(final: true)
                if state.waiting.isEmpty { break }
                if let until = state.handOverTime(now: .now) {
                    waitingUntil = until
                    break
                }
            }
            try await handle(try await group.next(), &group)
            if checkpointDue { try await checkpoint() }
        }
        // 3. Answers still in flight (bounded on a stop), then the last checkpoint.
        while state.inFlight > 0 {
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
        if let waitingUntil, !state.parked.isEmpty {
            try await context.jobs.release(lease)
            context.log.info("shard waits for its retries outside its slot", fields([
                "parked": .int(state.parked.count), "until": .string(waitingUntil.rfc3339),
            ]))
            return .waiting(until: waitingUntil)
        }
        if state.parked.isEmpty {
            let counts = state.counts
            try await context.jobs.finish(lease, counts: counts)
            context.log.info("shard finished", fields([
                "sent": .int(Int(counts.sent)), "accepted": .int(Int(counts.accepted)), "unregistered": .int(Int(counts.unregistered)),
                "failed": .int(Int(counts.failed)), "dropped": .int(Int(counts.dropped)),
            ]))
            return .finished
        }
        try await context.jobs.release(lease)
        context.log.warning("shard stopped: the rest waits behind a halted provider", fields(["parked": .int(state.parked.count)]))
        return .halted
    }

    // MARK: - Sending

    /// Sends what the state admitted: within the window (answers handled meanwhile), after a
    /// throttled run's first answer from the provider, and after the job's throttle.
    private func send(_ send: ShardRunState.Send, provider: Receipt.Provider, _ group: inout ThrowingTaskGroup<Event, any Error>) async throws {
        // The admitted send is counted in flight already.
        while state.inFlight > context.settings.window {
            try await handle(try await group.next(), &group)
        }
        if throttle != nil {
            while !warmedProviders.contains(provider) && state.inFlight > 1 {
                try await handle(try await group.next(), &group)
            }
        }
        try await throttle?.acquire()
        dispatch(send, provider: provider, &group)
        if checkpointDue { try await checkpoint() }
    }

    private func dispatch(_ send: ShardRunState.Send, provider: Receipt.Provider, _ group: inout ThrowingTaskGroup<Event, any Error>) {
        let delivery = self.delivery
        let job = self.job
        context.metrics.adjustInFlight(1)
        let rateLimits = self.rateLimits
        let appID = self.appID
        group.addTask {
            // The provider ceiling's wait happens in the send's own task: the window bounds it.
            await rateLimits?.acquire(appID: appID, provider: provider, urgent: job.delivery.urgent)
            let started = ContinuousClock.now
            let outcome = await delivery.send(job, to: send.member, token: send.token, now: .now)
            let elapsed = ContinuousClock.now - started
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            return .sent(send, outcome: outcome, seconds: seconds)
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
        for entry in state.dueRetries(now: .now) {
            if context.stop.isSet { return }
            let provider = AppDelivery.provider(for: entry.member, kind: job.kind)
            guard case .send(let send) = state.admitRetry(entry.member.id, haltReason: delivery.haltReason(provider), now: .now) else { continue }
            try await self.send(send, provider: provider, &group)
        }
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
        case .sent(let send, let outcome, let seconds):
            context.metrics.adjustInFlight(-1)
            let provider = AppDelivery.provider(for: send.member, kind: job.kind)
            warmedProviders.insert(provider)
            context.metrics.sendDuration(provider: provider.rawValue, seconds: seconds)
            context.metrics.sendAttempt(provider: provider.rawValue, result: outcome.attemptResult)
            var verdict: InvalidationGuard.Verdict?
            if outcome.isVerdictOnToken {
                var invalid = false
                if case .unregistered = outcome { invalid = true }
                verdict = context.directory.guards.record(appID: appID, provider: provider.rawValue, invalid: invalid)
            }
            let effects = state.answered(send, outcome, verdict: verdict, now: .now, random: Double.random(in: 0..<1))
            switch effects.rate {
            case .succeeded: rateLimits?.succeeded(appID: appID, provider: provider)
            case .quotaExceeded: rateLimits?.quotaExceeded(appID: appID, provider: provider)
            case nil: break
            }
            if let halt = effects.halt { record(halt) }
        }
    }

    /// Settles what is parked against the guard's verdicts and the app's halts now.
    private func settleParked(final: Bool) {
        guard !state.parked.isEmpty else { return }
        var verdicts: [Receipt.Provider: InvalidationGuard.Verdict] = [:]
        for provider in [Receipt.Provider.apns, .fcm] {
            verdicts[provider] = context.directory.guards.verdict(appID: appID, provider: provider.rawValue, final: final)
        }
        for halt in state.settleParked(verdicts: verdicts, halts: delivery.haltReasons, now: .now) { record(halt) }
    }

    /// Halts the app on the provider in this worker at once; the first run to do so logs it and
    /// writes it to PostgreSQL (every worker sees it) at its next checkpoint.
    private func record(_ halt: ShardRunState.Halt) {
        guard delivery.markHaltedLocally(halt.provider, reason: halt.reason.rawValue) else { return }
        context.log.error("provider halted for app", fields([
            "app_id": .string(appID), "provider": .string(halt.provider.rawValue), "reason": .string(halt.reason.rawValue),
            "detail": .string(String(halt.detail.prefix(300))),
        ]))
        state.haltToRecord(halt.provider, reason: halt.reason.rawValue)
    }

    /// Re-reads the app (halts set or lifted elsewhere) and the job's state (cancellation).
    private func refresh() async throws {
        lastRefresh = ContinuousClock.now
        if let latest = try await context.directory.delivery(appID: appID) {
            delivery = latest
        }
        if !state.cancelled, try await context.jobs.state(jobID: job.id) == .cancelled {
            state.cancel()
            context.log.info("job cancelled; dropping the rest of the shard", fields())
        }
    }

    // MARK: - Checkpoints

    var checkpointDue: Bool {
        state.checkpointDue(since: ContinuousClock.now - lastCheckpoint, every: context.settings.checkpointEvery,
                            interval: context.settings.checkpointInterval)
    }

    /// Makes progress durable, in this order: halts recorded, receipts acknowledged by Kafka,
    /// then the cursor, counts, parked subscriptions and token invalidations in one transaction
    /// (which also renews the lease). A crash before the last step repeats the work since the
    /// previous checkpoint, with the same receipt ids. (Invalidating before that transaction
    /// lost subscriptions: a takeover resumes with the audience minus the invalidated ones, so
    /// their counts, and their receipts if not yet published, were never made again.)
    func checkpoint() async throws {
        let saving = state.takeCheckpoint(now: .now)
        for (provider, reason) in saving.halts {
            try await context.directory.recordHalt(appID: appID, provider: provider, reason: reason)
        }
        if !saving.tokenInvalidations.isEmpty {
            // Live-activity tokens only (never a subscription): idempotent, safe before the receipts.
            try await source.invalidateTokens(appID: appID, subscriptionIDs: saving.tokenInvalidations)
        }
        if !saving.receipts.isEmpty {
            try await context.publisher.publish(saving.receipts)
        }
        for (key, count) in saving.tally {
            context.metrics.notification(provider: key.provider, outcome: key.outcome, reason: key.reason, count: count)
        }
        var current = lease
        let result: Result<Void, PostgresError>
        do throws(PostgresError) {
            try await context.jobs.checkpoint(&current, cursor: saving.cursor, counts: saving.counts, park: saving.park, resolved: saving.resolved,
                                              invalidations: saving.invalidations.isEmpty ? nil : (appID, saving.invalidations))
            result = .success(())
        } catch {
            result = .failure(error)
        }
        if case .failure(let error) = result {
            if error.code == .leaseLost { throw LeaseLost() }
            throw error
        }
        lease = current
        state.checkpointed(saving)
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
        state.restore(rows, members: members, cursor: lease.cursor, halts: delivery.haltReasons, now: .now)
        context.log.info("resuming parked subscriptions", fields(["parked": .int(state.parked.count)]))
    }
}
