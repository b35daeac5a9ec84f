import HeraldPostgres

/// The shard cursor that is safe to checkpoint: the last subscription id (in the id order they
/// were handed out) such that it and every one before it is resolved — its receipt ready or its
/// retry parked. Sends finish out of order; the cursor only ever moves over a finished prefix,
/// so a crash resends what was in flight, never skips it.
///
/// The counts and token invalidation of an outcome (also of a parked retry settling later)
/// travel with it and are handed back only when the cursor passes it: a checkpoint saves the
/// cursor with counts and invalidations of exactly the subscriptions up to it, so what a
/// takeover resends after the cursor is neither counted twice nor, invalidated already, left
/// out of the resumed audience and never counted.
struct DeliveryWatermark {
    private var ids: [String] = []
    private var done: [Bool] = []
    private var pending: [Settled] = []

    /// What resolved subscriptions leave for the checkpoint.
    struct Settled: Equatable {
        var counts = ShardCounts()
        var invalidations: [TokenInvalidation] = []

        mutating func add(_ other: Settled) {
            counts.add(other.counts)
            invalidations += other.invalidations
        }
    }
    private var head = 0
    /// Where each id the cursor has not passed yet is.
    private var positions: [String: Int] = [:]
    /// The safe cursor; nil until the first subscription is resolved.
    private(set) var cursor: String?

    /// Subscriptions handed out and not yet passed by the cursor.
    var outstanding: Int { ids.count - head }

    /// Records that `id` was handed out (ids come in increasing order).
    mutating func dispatched(_ id: String) {
        positions[id] = ids.count
        ids.append(id)
        done.append(false)
        pending.append(Settled())
    }

    /// Records that `id` is resolved, leaving `settled` (its outcome counts, its token
    /// invalidation), and moves the cursor over the finished prefix. Returns what the
    /// subscriptions the cursor passed now left.
    @discardableResult
    mutating func resolved(_ id: String, leaving settled: Settled = Settled()) -> Settled {
        var passed = Settled()
        guard let position = positions[id], !done[position] else { return settled }
        done[position] = true
        pending[position] = settled
        while head < ids.count, done[head] {
            cursor = ids[head]
            positions.removeValue(forKey: ids[head])
            passed.add(pending[head])
            head += 1
        }
        // Drop the passed prefix now and then, so the arrays stay as small as the window.
        if head > 4096, head * 2 > ids.count {
            ids.removeFirst(head)
            done.removeFirst(head)
            pending.removeFirst(head)
            for (key, value) in positions { positions[key] = value - head }
            head = 0
        }
        return passed
    }

    /// Adds what a subscription left later, once its first attempt was resolved (a parked retry
    /// or verdict settling), to what it leaves for the checkpoint that passes it. Returns
    /// `settled` itself when the cursor has passed it already (or it is not this run's): those
    /// counts belong to the next checkpoint. Counted at once while it was still beyond the
    /// cursor, a takeover resent it from the cursor and counted it twice.
    mutating func settledLater(_ id: String, leaving settled: Settled) -> Settled {
        guard let position = positions[id], done[position] else { return settled }
        pending[position].add(settled)
        return Settled()
    }
}

extension ShardCounts {
    /// Adds `other`'s outcome counts (not `sent`) to these.
    mutating func add(_ other: ShardCounts) {
        accepted += other.accepted
        unregistered += other.unregistered
        failed += other.failed
        dropped += other.dropped
    }

    /// The outcome counts (not `sent`) added since `earlier`.
    func outcomes(since earlier: ShardCounts) -> ShardCounts {
        ShardCounts(accepted: accepted - earlier.accepted, unregistered: unregistered - earlier.unregistered,
                    failed: failed - earlier.failed, dropped: dropped - earlier.dropped)
    }

    /// These counts with the outcome counts of `delta` taken off.
    func removing(_ delta: ShardCounts) -> ShardCounts {
        ShardCounts(sent: sent, accepted: accepted - delta.accepted, unregistered: unregistered - delta.unregistered,
                    failed: failed - delta.failed, dropped: dropped - delta.dropped)
    }
}
