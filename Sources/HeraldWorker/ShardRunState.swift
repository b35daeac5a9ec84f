import HeraldCore
import HeraldPostgres

/// The decisions of one shard run, with no I/O and no clock of its own: whether a subscription
/// is sent, what an answer becomes (a receipt, a park, a halt), what waits, and what a
/// checkpoint saves. ``ShardRun`` drives it — it pages the audience, sends, reads the time and
/// the shared halt and guard state, and performs what this returns — and the model-based tests
/// drive the same type with random audiences, answers and crashes.
///
/// The counting rule (``DeliveryWatermark``): what a subscription's outcome counts and
/// invalidates waits until the cursor passes the subscription, so a checkpoint saves the cursor
/// with the counts and invalidations of exactly the subscriptions up to it.
struct ShardRunState {
    let facts: Facts
    // The state below is changed only by this type's methods (here and in
    // ShardRunState+Settling.swift); the driver and the tests read it.
    var counts: ShardCounts
    var watermark = DeliveryWatermark()
    var parked: [String: ParkedSubscription] = [:]
    /// Parked rows resolved since the last checkpoint (deleted with it).
    var resolvedParked: Set<String> = []
    var receipts: [Receipt] = []
    var invalidations: [TokenInvalidation] = []
    var tokenInvalidations: [String] = []
    var haltsToRecord: [(provider: Receipt.Provider, reason: String)] = []
    var announcedHalts: Set<Receipt.Provider> = []
    var tally = ShardRunTally()
    /// The job was cancelled: everything not yet sent is dropped as `cancelled`.
    private(set) var cancelled = false
    /// Sends made and not yet answered.
    private(set) var inFlight = 0
    /// First attempts since the last checkpoint.
    private(set) var sinceCheckpoint = 0

    /// A run resuming from `counts` (the lease's, as the last checkpoint saved them).
    init(facts: Facts, counts: ShardCounts) {
        self.facts = facts
        self.counts = counts
    }

    /// Receipts waiting for the next checkpoint.
    var pendingReceipts: Int { receipts.count }

    /// Parked subscriptions that will be sent or settled again (not behind a halt).
    var waiting: [ParkedSubscription] {
        parked.values.filter { if case .halted = $0.kind { return false } else { return true } }
    }

    // MARK: - Sending

    /// Decides whether `member`, next in id order, is sent; `haltReason`: why its provider is
    /// halted for the app now, nil when sending.
    mutating func admit(_ member: AudienceMember, haltReason: String?, now: Timestamp) -> Admission {
        watermark.dispatched(member.id)
        if settling(member.id, firstAttempt: true, { state in
            state.resolveWithoutSending(member, attempts: 0, firstAttemptAt: now, haltReason: haltReason, now: now)
        }) {
            return .settled
        }
        counts.sent += 1
        sinceCheckpoint += 1
        inFlight += 1
        return .send(Send(member: member, token: token(for: member) ?? member.token, attempts: 1, firstAttemptAt: now, isRetry: false))
    }

    /// Parked retries due at `now`, earliest first (in id order at the same time, so a run is
    /// the same whatever the dictionary's order).
    func dueRetries(now: Timestamp) -> [ParkedSubscription] {
        parked.values.filter { $0.kind == .retry && !$0.inFlight && $0.due <= now }
            .sorted { $0.due == $1.due ? $0.member.id < $1.member.id : $0.due < $1.due }
    }

    /// Decides whether the parked retry `id` is sent now (it may have settled meanwhile).
    mutating func admitRetry(_ id: String, haltReason: String?, now: Timestamp) -> Admission {
        guard let entry = parked[id], entry.kind == .retry, !entry.inFlight else { return .settled }
        if settling(id, firstAttempt: false, { state in
            state.resolveWithoutSending(entry.member, attempts: entry.attempts, firstAttemptAt: entry.firstAttemptAt, haltReason: haltReason, now: now)
        }) {
            return .settled
        }
        parked[id]?.inFlight = true
        inFlight += 1
        return .send(Send(member: entry.member, token: token(for: entry.member) ?? entry.member.token, attempts: entry.attempts + 1,
                          firstAttemptAt: entry.firstAttemptAt, isRetry: true))
    }

    /// The token this job uses for `member`: the VoIP token for VoIP jobs on iOS.
    private func token(for member: AudienceMember) -> String? {
        if facts.job.kind == .voip && member.platform == .ios { return member.voipToken }
        return member.token
    }

    func provider(of member: AudienceMember) -> Receipt.Provider {
        AppDelivery.provider(for: member, kind: facts.job.kind)
    }

    /// Settles a subscription without a send when the job no longer wants one: unavailable,
    /// cancelled, dropping, expired, its provider halted (parked), no VoIP token. The one place
    /// that decides whether a member is sent. True when settled or parked.
    private mutating func resolveWithoutSending(_ member: AudienceMember, attempts: Int, firstAttemptAt: Timestamp,
                                                haltReason: String?, now: Timestamp) -> Bool {
        if let reason = member.unavailable {
            drop(member, reason, attempts: attempts, now: now)
        } else if cancelled {
            drop(member, .cancelled, attempts: attempts, now: now)
        } else if let dropping = facts.dropping {
            drop(member, dropping, attempts: attempts, now: now)
        } else if facts.job.isExpired(at: now) {
            drop(member, .expired, attempts: attempts, now: now)
        } else if let haltReason {
            let provider = provider(of: member)
            park(member, kind: .halted(provider), attempts: attempts, due: now, reason: haltReason, firstAttemptAt: firstAttemptAt)
            announceHalt(provider, reason: haltReason, now: now)
        } else if token(for: member) == nil {
            drop(member, .noVoIPToken, attempts: attempts, now: now)
        } else {
            return false
        }
        return true
    }

    // MARK: - Answers

    /// Applies the answer to `send`. `verdict`: the invalidation guard's, for the send's
    /// provider, after the answer was recorded (the driver records it; nil when the answer says
    /// nothing about the token). `random` is uniform in [0, 1), for the retry's jitter.
    mutating func answered(_ send: Send, _ outcome: DeliveryOutcome, verdict: InvalidationGuard.Verdict?, now: Timestamp,
                           random: Double) -> AnswerEffects {
        inFlight -= 1
        if send.isRetry { parked[send.member.id]?.inFlight = false }
        var effects = AnswerEffects()
        settling(send.member.id, firstAttempt: !send.isRetry) { state in
            effects = state.apply(outcome, to: send, verdict: verdict ?? .apply, now: now, random: random)
            return true
        }
        return effects
    }

    private mutating func apply(_ outcome: DeliveryOutcome, to send: Send, verdict: InvalidationGuard.Verdict, now: Timestamp,
                                random: Double) -> AnswerEffects {
        let member = send.member
        let provider = provider(of: member)
        var effects = AnswerEffects()
        switch outcome {
        case .accepted(let providerID):
            effects.rate = .succeeded
            var receipt = deviceReceipt(member, .accepted, reason: nil, attempts: send.attempts, now: now)
            receipt.providerID = providerID
            settle(member, receipt)
            counts.accepted += 1
            tally.count(provider, "accepted")
        case .unregistered(let reason, let providerReason, let timestamp):
            switch verdict {
            case .apply:
                unregister(member, reason: reason, providerReason: providerReason, timestamp: timestamp, attempts: send.attempts, now: now)
            case .undecided:
                park(member, kind: .awaitingVerdict(reason: reason, providerReason: providerReason, timestamp: timestamp),
                     attempts: send.attempts, due: now, reason: providerReason, firstAttemptAt: send.firstAttemptAt)
            case .misconfigured:
                effects.halt = halt(provider, reason: .suspectedMisconfiguration,
                                    detail: "the share of unregistered answers is above the threshold", now: now)
                park(member, kind: .halted(provider), attempts: send.attempts, due: now, reason: "suspected-misconfiguration",
                     firstAttemptAt: send.firstAttemptAt)
            }
        case .retryable(let providerReason, let retryAfter, let quota):
            if quota { effects.rate = .quotaExceeded }
            tally.count(provider, "retried")
            if let next = facts.retry.nextAttempt(attempts: send.attempts, firstAttemptAt: send.firstAttemptAt, now: now,
                                                  expiresAt: facts.job.expiresAt, retryAfterSeconds: retryAfter, quotaExceeded: quota,
                                                  random: random) {
                park(member, kind: .retry, attempts: send.attempts, due: next, reason: providerReason, firstAttemptAt: send.firstAttemptAt)
            } else {
                fail(member, .retriesExhausted, providerReason: providerReason, attempts: send.attempts, now: now)
            }
        case .failed(let reason, let providerReason):
            fail(member, reason, providerReason: providerReason, attempts: send.attempts, now: now)
        case .credentialFault(let providerReason, let haltReason):
            effects.halt = halt(provider, reason: haltReason, detail: providerReason, now: now)
            park(member, kind: .halted(provider), attempts: send.attempts, due: now, reason: providerReason, firstAttemptAt: send.firstAttemptAt)
        }
        return effects
    }

    // MARK: - Parked subscriptions

    /// Applies the guard's `verdicts` to subscriptions waiting for one, turns halted ones whose
    /// provider is no longer in `halts` back into retries, drops what expired behind a halt, and
    /// drops everything parked on a cancellation. Returns the halts a verdict made.
    mutating func settleParked(verdicts: [Receipt.Provider: InvalidationGuard.Verdict], halts: [Receipt.Provider: String],
                               now: Timestamp) -> [Halt] {
        var made: [Halt] = []
        for (id, entry) in parked where !entry.inFlight {
            settling(id, firstAttempt: false) { state in
                if let halt = state.settleParked(entry, verdict: verdicts[state.provider(of: entry.member)] ?? .undecided, halts: halts, now: now) {
                    made.append(halt)
                }
                return true
            }
        }
        return made
    }

    private mutating func settleParked(_ entry: ParkedSubscription, verdict: InvalidationGuard.Verdict,
                                       halts: [Receipt.Provider: String], now: Timestamp) -> Halt? {
        if cancelled {
            drop(entry.member, .cancelled, attempts: entry.attempts, now: now)
            return nil
        }
        switch entry.kind {
        case .awaitingVerdict(let reason, let providerReason, let timestamp):
            switch verdict {
            case .apply:
                unregister(entry.member, reason: reason, providerReason: providerReason, timestamp: timestamp, attempts: entry.attempts, now: now)
            case .misconfigured:
                return halt(provider(of: entry.member), reason: .suspectedMisconfiguration,
                            detail: "the share of unregistered answers is above the threshold", now: now)
            case .undecided:
                break
            }
        case .halted(let provider):
            // Expired behind the halt (HaltedJobSweeper ran the shard again): nothing will send it.
            if facts.job.isExpired(at: now) {
                drop(entry.member, .expired, attempts: entry.attempts, now: now)
            } else if halts[provider] == nil {
                parked[entry.member.id]?.kind = .retry
                parked[entry.member.id]?.due = now
                parked[entry.member.id]?.dirty = true
            }
        case .retry:
            break
        }
        return nil
    }

    /// The job was cancelled: nothing more is sent, everything parked is dropped at the next
    /// ``settleParked(verdicts:halts:now:)``.
    mutating func cancel() {
        cancelled = true
    }

    /// With nothing in flight and only retries left (none in flight, none waiting for a
    /// verdict), the due time of the first when it is further away than the hold: the run hands
    /// the wait over. Nil to keep waiting in the slot.
    func handOverTime(now: Timestamp) -> Timestamp? {
        let waiting = self.waiting
        guard let hold = facts.handOverAfterSeconds, inFlight == 0,
              waiting.allSatisfy({ $0.kind == .retry && !$0.inFlight }),
              let first = waiting.map(\.due).min() else { return nil }
        return Double(first.unixMilliseconds - now.unixMilliseconds) / 1000 > hold ? first : nil
    }

    // MARK: - Checkpoints

    /// Whether a checkpoint is due: `every` first attempts since the last, or `interval` passed
    /// with something to save (or 10 s with nothing, to renew the lease).
    func checkpointDue(since elapsed: Duration, every: Int, interval: Duration) -> Bool {
        Self.checkpointDue(firstAttempts: sinceCheckpoint, receiptsWaiting: !receipts.isEmpty, since: elapsed, every: every, interval: interval)
    }

    /// ``checkpointDue(since:every:interval:)`` from the two fields it reads. The driver asks
    /// before every send with this one: a method called on the state it keeps in a property
    /// copies the whole state first (a retain and a release of each collection in it).
    static func checkpointDue(firstAttempts: Int, receiptsWaiting: Bool, since elapsed: Duration, every: Int, interval: Duration) -> Bool {
        firstAttempts >= every || (elapsed >= interval && (firstAttempts > 0 || receiptsWaiting || elapsed >= .seconds(10)))
    }

    /// Takes what the next checkpoint saves. Once the driver saved all of it, it calls
    /// ``checkpointed(_:)``; when saving fails the run ends and a new one resumes from the last
    /// saved checkpoint, so what was taken is not needed again.
    mutating func takeCheckpoint(now: Timestamp) -> Checkpoint {
        let dirty = parked.values.filter(\.dirty)
        let checkpoint = Checkpoint(halts: haltsToRecord, tokenInvalidations: tokenInvalidations, receipts: receipts,
                                    cursor: watermark.cursor, counts: counts, park: dirty.map { $0.row(now: now) },
                                    resolved: Array(resolvedParked), invalidations: invalidations, tally: tally.counts)
        haltsToRecord.removeAll()
        tokenInvalidations.removeAll()
        receipts.removeAll()
        tally = ShardRunTally()
        return checkpoint
    }

    /// Records that `checkpoint` is saved: its parked rows are persisted and clean.
    mutating func checkpointed(_ checkpoint: Checkpoint) {
        invalidations.removeAll()
        for row in checkpoint.park {
            parked[row.subscriptionID]?.dirty = false
            parked[row.subscriptionID]?.persisted = true
        }
        resolvedParked.subtract(checkpoint.resolved)
        sinceCheckpoint = 0
    }

    /// Queues `provider`'s halt to be written to PostgreSQL at the next checkpoint.
    mutating func haltToRecord(_ provider: Receipt.Provider, reason: String) {
        haltsToRecord.append((provider, reason))
    }

    // MARK: - Resuming

    /// Takes back the shard's parked rows after a crash, a takeover or a resume. `members`: the
    /// rows' subscriptions that still exist, with the tokens this source sends to; `cursor`:
    /// the saved cursor; `halts`: the app's halted providers now.
    mutating func restore(_ rows: [ParkedRetry], members: [String: AudienceMember], cursor: String?,
                          halts: [Receipt.Provider: String], now: Timestamp) {
        for row in rows {
            // Parked beyond the saved cursor: the sweep from the cursor sends it again as a first
            // attempt, so the parked copy goes (a second copy would be sent and counted twice).
            if cursor.map({ row.subscriptionID.lowercased() > $0.lowercased() }) ?? true {
                resolvedParked.insert(row.subscriptionID)
                continue
            }
            guard let member = members[row.subscriptionID] else {
                // Deleted meanwhile: nothing to send to.
                let ghost = AudienceMember(id: row.subscriptionID, platform: .android, token: "", sandbox: false, sdk: false,
                                           language: nil, timeZone: nil, voipToken: nil)
                settle(ghost, deviceReceipt(ghost, .dropped, reason: .optedOut, attempts: row.attempts, now: now))
                resolvedParked.insert(row.subscriptionID)
                counts.dropped += 1
                continue
            }
            var entry = ParkedSubscription(member: member, kind: .retry, attempts: row.attempts, due: row.nextAttemptAt,
                                           lastReason: row.lastReason ?? "", firstAttemptAt: row.firstAttemptAt ?? now)
            entry.persisted = true
            entry.dirty = false
            switch ParkReason(stored: row.lastReason) {
            case .halted(_, let detail):
                entry.lastReason = detail
                let provider = provider(of: member)
                if let haltReason = halts[provider] {
                    entry.kind = .halted(provider)
                    entry.lastReason = haltReason
                } else {
                    entry.due = now
                    entry.dirty = true
                }
            case .awaitingVerdict:
                entry.due = now
            case .retry:
                break
            }
            parked[member.id] = entry
        }
    }
}
