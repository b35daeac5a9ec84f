import HeraldCore
import HeraldHTTP2
import HeraldPostgres

/// One run of one shard: the driver of ``ShardRunState``. It pages the audience, starts each send
/// on the provider's client (no task per send: the answer is posted to the run's ``SendInbox`` and
/// taken in batches), reads the time, the app's halts and the invalidation guard, and performs what
/// the state decides — receipts, parks, halts and checkpoints. Used by a single task; every
/// decision is in the state.
final class ShardRun {
    struct LeaseLost: Error {}

    /// Paced sends wait in the run itself, and only once they are this far behind their slot: the
    /// bucket's own burst (a tenth of a second of its rate) is larger, so pacing holds while a
    /// run at thousands of sends a second sleeps once per batch rather than once per send.
    static let pacingSlackSeconds = 0.01

    /// A page re-reads the app and the job (halts, a cancellation) at most this often: a
    /// campaign's pages come tens of times a second, and a run has just read both when it starts
    /// (an urgent one-device job would otherwise read its job's state twice before its send).
    static let pageRefreshInterval = Duration.milliseconds(250)

    let context: PipelineContext
    let job: Job
    let range: SubscriptionRange
    var lease: ShardLease
    var delivery: AppDelivery
    var state: ShardRunState
    var lastCheckpoint = ContinuousClock.now
    /// When the app and the job were last read (the runner reads the app, and ``run()`` the
    /// job's state, as the run starts).
    var lastRefresh = ContinuousClock.now
    /// Where answers and ticks arrive.
    let inbox = SendInbox()
    /// The run's half of the inbox's two alternating buffers (``SendInbox/next(into:)``), empty
    /// between batches.
    var batch: [SendInbox.Item] = []
    /// Metrics of the sends, added to the worker's at each tick and checkpoint.
    var tally = SendTally()
    /// The retries' jitter: not a secret, so no system call per answer.
    var jitter = SplitMix64(seed: UInt64.random(in: .min ... .max))
    /// The job rendered once per shape of device.
    let templates = PushTemplates()
    /// Requests started since the run last waited: handed to the providers' event loops together
    /// by ``submit()``, which every wait of the run calls first.
    let submissions = HTTP2Submissions()
    /// `delivery.throttle_per_minute`: one token per send, from the job's shared bucket.
    var throttle: JobThrottle?
    /// Provider ceilings: one slot per send, this worker's share.
    var rateLimits: ProviderRateLimits?
    /// Throttled runs send one request per provider and wait for its answer before the rest:
    /// sends paced while the connection and its token were still being set up would otherwise
    /// all reach the provider at once when it is ready.
    /// (Two providers at most: an array, so the answer path hashes nothing for it.)
    var warmedProviders: [Receipt.Provider] = []
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
            await rateLimits?.refreshOverrides(appID: appID)
            // Ticks go on while finishing too, so a stop's drain deadline is checked even while
            // every answer in flight is late.
            let inbox = self.inbox
            let ticker = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(250))
                    inbox.post(.tick)
                }
            }
            defer {
                submit()
                ticker.cancel()
                context.metrics.add(&tally)
            }
            return try await sweep()
        } catch is LeaseLost {
            context.log.warning("shard taken over by another worker; stopping", fields())
            return .leaseLost
        }
    }

    private func sweep() async throws -> ShardRunOutcome {
        let query = AudienceQuery(appID: appID, audience: job.audience ?? .all)
        var pages = ShardPages(source: source, appID: appID, audience: context.audience,
                               iterator: context.audience.pages(query, in: range, after: lease.cursor, pageSize: context.settings.pageSize).makeAsyncIterator(),
                               cursor: lease.cursor, pageSize: context.settings.pageSize, listed: ShardPages.listedIDs(job.audience))
        // 1. The audience, in id order, from the checkpoint.
        sweeping: while !context.stop.isSet {
            submit()
            guard let page = try await pages.next() else { break }
            if ContinuousClock.now - lastRefresh >= Self.pageRefreshInterval { try await refresh() }
            for member in page {
                if context.stop.isSet { break sweeping }
                let provider = AppDelivery.provider(for: member, kind: job.kind)
                guard case .send(let send) = state.admit(member, haltReason: delivery.haltReason(provider), now: .now) else { continue }
                try await self.send(send, provider: provider)
            }
            try await dispatchDueRetries()
            if checkpointDue { try await checkpoint() }
        }
        // 2. What is parked: retries as they fall due, verdicts, halts lifted meanwhile.
        var waitingUntil: Timestamp?
        while !context.stop.isSet {
            settleParked(final: false)
            try await dispatchDueRetries()
            if state.inFlight == 0 {
                settleParked(final: true)
                if state.waiting.isEmpty { break }
                if let until = state.handOverTime(now: .now) {
                    waitingUntil = until
                    break
                }
            }
            try await handleNext()
            if checkpointDue { try await checkpoint() }
        }
        // 3. Answers still in flight (bounded on a stop), then the last checkpoint.
        while state.inFlight > 0 {
            if let requested = context.stop.requestedAt, ContinuousClock.now > requested + context.settings.drainDeadline { break }
            try await handleNext()
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
    /// throttled run's first answer from the provider, after the job's throttle and in the
    /// provider ceiling's pace.
    private func send(_ send: consuming ShardRunState.Send, provider: Receipt.Provider) async throws {
        // The admitted send is counted in flight already.
        while state.inFlight > context.settings.window {
            try await handleNext()
        }
        if throttle != nil {
            while !warmedProviders.contains(provider) && state.inFlight > 1 {
                try await handleNext()
            }
        }
        if throttle != nil {
            submit()
            try await throttle?.acquire()
        }
        try await pace(provider)
        dispatch(send, provider: provider)
        if checkpointDue { try await checkpoint() }
    }

    /// Takes the send's slot under the provider ceiling and waits until it is due, handling answers
    /// meanwhile. An urgent job takes its slot but never waits behind the campaigns.
    private func pace(_ provider: Receipt.Provider) async throws {
        guard let rateLimits else { return }
        var wait = rateLimits.reserve(appID: appID, provider: provider)
        guard !job.delivery.urgent else { return }
        if wait > Self.pacingSlackSeconds { submit() }
        while wait > Self.pacingSlackSeconds {
            let step = min(wait, 0.25)
            try? await Task.sleep(for: .microseconds(Int64(step * 1_000_000)))
            wait -= step
            inbox.take(into: &batch)
            try await handleBatch()
        }
    }

    /// Renders and starts the send; its answer is posted to the inbox from the provider's event
    /// loop (at once when nothing is sent) through the send's ``SentRequest``, the one object the
    /// send allocates for its completion.
    private func dispatch(_ send: consuming ShardRunState.Send, provider: Receipt.Provider) {
        tally.started()
        let started = ContinuousClock.now
        let prepared = delivery.prepare(job, to: send.member, token: send.token, now: .now, validateOnly: false, templates: templates)
        let request = SentRequest(send, inbox: inbox, started: started)
        switch prepared {
        case .decided(let outcome): request.answer(outcome)
        case .apns(let client, let notification): client.execute(notification, submissions: submissions) { request.answer(DeliveryOutcome($0)) }
        case .fcm(let client, let body): client.execute(body: body, submissions: submissions) { request.answer(DeliveryOutcome($0)) }
        }
    }

    private func dispatchDueRetries() async throws {
        for entry in state.dueRetries(now: .now) {
            if context.stop.isSet { return }
            let provider = AppDelivery.provider(for: entry.member, kind: job.kind)
            guard case .send(let send) = state.admitRetry(entry.member.id, haltReason: delivery.haltReason(provider), now: .now) else { continue }
            try await self.send(send, provider: provider)
        }
    }

    // MARK: - Answers

    /// Waits for the next batch of answers (a tick arrives every 250 ms) and handles it.
    private func handleNext() async throws {
        submit()
        var items: [SendInbox.Item] = []  // swapped, not assigned: a second reference makes `handleBatch` copy the batch
        swap(&items, &batch)
        await inbox.next(into: &items)
        swap(&items, &batch)
        try await handleBatch()
    }

    /// Sends the requests started since the run last waited.
    private func submit() {
        submissions.submit()
    }

    /// Handles ``batch`` and leaves it empty, its capacity kept. Items are moved out, not copied
    /// (a copy retains every string of the member and the outcome).
    private func handleBatch() async throws {
        submit()
        defer { batch.removeAll(keepingCapacity: true) }
        var ticked = false
        batch.reverse()
        while let item = batch.popLast() {
            switch item {
            case .tick:
                ticked = true
            case .sent(let request, let outcome, let seconds):
                answered(request, outcome, seconds: seconds)
            }
        }
        if ticked {
            context.metrics.add(&tally)
            if ContinuousClock.now - lastRefresh >= .seconds(2) { try await refresh() }
            if checkpointDue { try await checkpoint() }
        }
    }

    /// Handles a send's answer. The send is read from its ``SentRequest`` where it is used, not
    /// taken out first (a copy of a send retains each of its member's strings).
    private func answered(_ request: SentRequest, _ outcome: DeliveryOutcome, seconds: Double) {
        let provider = AppDelivery.provider(for: request.send.member, kind: job.kind)
        if !warmedProviders.contains(provider) { warmedProviders.append(provider) }
        tally.answered(provider: provider, result: outcome.attemptResult, seconds: seconds)
        var verdict: InvalidationGuard.Verdict?
        if outcome.isVerdictOnToken {
            var invalid = false
            if case .unregistered = outcome { invalid = true }
            verdict = context.directory.guards.record(appID: appID, provider: provider.rawValue, invalid: invalid)
        }
        let effects = state.answered(request.send, outcome, verdict: verdict, now: .now, random: Double.random(in: 0..<1, using: &jitter))
        switch effects.rate {
        case .succeeded: rateLimits?.succeeded(appID: appID, provider: provider)
        case .quotaExceeded: rateLimits?.quotaExceeded(appID: appID, provider: provider)
        case nil: break
        }
        if let halt = effects.halt { record(halt) }
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
        submit()
        lastRefresh = ContinuousClock.now
        await rateLimits?.refreshOverrides(appID: appID)
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
        ShardRunState.checkpointDue(firstAttempts: state.sinceCheckpoint, receiptsWaiting: !state.receipts.isEmpty,
                                    since: ContinuousClock.now - lastCheckpoint, every: context.settings.checkpointEvery,
                                    interval: context.settings.checkpointInterval)
    }

    /// Makes progress durable, in this order: halts recorded, receipts acknowledged by Kafka,
    /// then the cursor, counts, parked subscriptions and token invalidations in one transaction
    /// (which also renews the lease). A crash before the last step repeats the work since the
    /// previous checkpoint, with the same receipt ids. (Invalidating before that transaction
    /// lost subscriptions: a takeover resumes with the audience minus the invalidated ones, so
    /// their counts, and their receipts if not yet published, were never made again.)
    func checkpoint() async throws {
        submit()
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
        context.metrics.add(&tally)
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
