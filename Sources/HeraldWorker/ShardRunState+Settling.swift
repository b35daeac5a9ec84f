import HeraldCore
import HeraldPostgres

/// How ``ShardRunState`` settles a subscription: the receipt, the counts held for the cursor,
/// parks and halts. Called only by the state's own methods.
extension ShardRunState {
    // MARK: - Settling

    /// Runs `body`, which settles subscription `id` (true: a receipt, a park, a drop) or leaves it
    /// as it was (false), and lets what it counted and invalidated wait for the cursor: the
    /// watermark hands it back when the cursor passes the subscription. Counting an answer
    /// beyond the cursor at once counted it twice when a takeover resent from the cursor;
    /// invalidating one beyond it left it out of the resumed audience, never counted.
    /// `firstAttempt`: the subscription's first resolution in this run (it moves the cursor);
    /// otherwise a parked one settling later, held the same way until the cursor passes.
    @discardableResult
    mutating func settling(_ id: String, firstAttempt: Bool, _ body: (inout ShardRunState) -> Bool) -> Bool {
        let (before, invalidationsBefore) = (counts, invalidations.count)
        guard body(&self) else { return false }
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

    func deviceReceipt(_ member: AudienceMember, _ stage: Receipt.Stage, reason: Receipt.Reason?, attempts: Int,
                               now: Timestamp) -> Receipt {
        // An id of no subscription has no platform to report.
        let platform = member.unavailable == .unknownSubscription ? nil : member.platform
        var receipt = Receipt(jobID: facts.job.id, appID: facts.job.appID, stage: stage, subscriptionID: member.id, platform: platform,
                              reason: reason, at: now)
        if attempts > 0 { receipt.attempts = attempts }
        return receipt
    }

    /// Records a terminal receipt and takes the subscription off the parked list.
    /// (`consuming`: the receipt is moved into the list, not copied with a retain of each string.)
    mutating func settle(_ member: AudienceMember, _ receipt: consuming Receipt) {
        receipts.append(receipt)
        // Most runs park nothing: no hash of the id then.
        if !parked.isEmpty, let entry = parked.removeValue(forKey: member.id), entry.persisted {
            resolvedParked.insert(member.id)
        }
    }

    mutating func drop(_ member: AudienceMember, _ reason: Receipt.Reason, attempts: Int, now: Timestamp) {
        settle(member, deviceReceipt(member, .dropped, reason: reason, attempts: attempts, now: now))
        counts.dropped += 1
        tally.count(provider(of: member), "dropped", reason)
    }

    mutating func fail(_ member: AudienceMember, _ reason: Receipt.Reason, providerReason: String, attempts: Int, now: Timestamp) {
        var receipt = deviceReceipt(member, .failed, reason: reason, attempts: attempts, now: now)
        receipt.providerReason = String(providerReason.prefix(200))
        settle(member, receipt)
        counts.failed += 1
        tally.count(provider(of: member), "failed", reason)
    }

    mutating func unregister(_ member: AudienceMember, reason: Receipt.Reason, providerReason: String, timestamp: Timestamp?,
                                     attempts: Int, now: Timestamp) {
        var receipt = deviceReceipt(member, .unregistered, reason: reason, attempts: attempts, now: now)
        receipt.providerReason = String(providerReason.prefix(200))
        settle(member, receipt)
        if facts.sendsToOwnTokens && member.platform == .ios {
            tokenInvalidations.append(member.id)
        } else {
            invalidations.append(TokenInvalidation(subscriptionID: member.id, reason: String(providerReason.prefix(200)), providerTimestamp: timestamp))
        }
        counts.unregistered += 1
        tally.count(provider(of: member), "unregistered", reason)
    }

    mutating func park(_ member: AudienceMember, kind: ParkedSubscription.Kind, attempts: Int, due: Timestamp, reason: String,
                               firstAttemptAt: Timestamp) {
        var entry = parked[member.id] ?? ParkedSubscription(member: member, kind: kind, attempts: attempts, due: due,
                                                            lastReason: reason, firstAttemptAt: firstAttemptAt)
        entry.kind = kind
        entry.attempts = attempts
        entry.due = due
        entry.lastReason = reason
        entry.dirty = true
        entry.inFlight = false
        parked[member.id] = entry
        if case .halted(let provider) = kind { tally.count(provider, "halted") }
    }

    // MARK: - Halts

    /// Halts the app on `provider` and reports it once per run. Subscriptions waiting for a
    /// verdict on that provider are parked behind the halt: their invalidations are discarded.
    mutating func halt(_ provider: Receipt.Provider, reason: Receipt.Reason, detail: String, now: Timestamp) -> Halt {
        announceHalt(provider, reason: reason.rawValue, now: now)
        for (id, entry) in parked where !entry.inFlight {
            if case .awaitingVerdict = entry.kind, self.provider(of: entry.member) == provider {
                parked[id]?.kind = .halted(provider)
                parked[id]?.dirty = true
            }
        }
        return Halt(provider: provider, reason: reason, detail: detail)
    }

    mutating func announceHalt(_ provider: Receipt.Provider, reason: String, now: Timestamp) {
        guard announcedHalts.insert(provider).inserted else { return }
        var receipt = Receipt(jobID: facts.job.id, appID: facts.job.appID, stage: .halted,
                              reason: Receipt.Reason(rawValue: reason) ?? .credentials, at: now)
        receipt.provider = provider
        receipts.append(receipt)
    }
}
