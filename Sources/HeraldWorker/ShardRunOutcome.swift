import HeraldCore

/// How a shard run ended, which decides whether its Kafka message is committed.
enum ShardRunOutcome: Sendable, Equatable {
    /// Every subscription has its terminal receipt; the shard is finished.
    case finished
    /// It was finished (or cancelled) before: nothing to do.
    case alreadyDone
    /// The rest waits behind a halted provider; resumable with `herald jobs resume`.
    case halted
    /// Only retries are left, the first due at `until`: the shard is checkpointed and released,
    /// and its message waits in `scheduled_jobs` to be produced again then (the slot is free).
    case waiting(until: Timestamp)
    /// Another worker took the shard over.
    case leaseLost
    /// The worker is stopping: the shard is checkpointed and released, its message not committed.
    case interrupted
    /// Its work failed for good (``MessageRetryBudget``): the shard is marked dead-lettered and
    /// its message must be dead-lettered before it is committed.
    case abandoned(DeadLetter.Cause, attempts: Int, detail: String)

    /// Whether the shard message may be committed.
    var commitsMessage: Bool { self != .interrupted }

    /// Whether the message may be committed; throws ``AbandonedShard`` for an abandoned shard,
    /// so a handler running the shard inline dead-letters its message.
    func committingMessage() throws(AbandonedShard) -> Bool {
        if case .abandoned(let cause, let attempts, let detail) = self { throw AbandonedShard(cause: cause, attempts: attempts, detail: detail) }
        return commitsMessage
    }
}

/// A shard run that failed for good, thrown to the handler whose message ran it.
struct AbandonedShard: PermanentMessageError {
    let cause: DeadLetter.Cause
    let attempts: Int
    let detail: String
    var description: String { "the shard run failed for good after \(attempts) attempts: \(detail)" }
}
