/// How the one shutdown bound, `HERALD_DRAIN_SECONDS`, is shared by the steps of a shutdown.
///
/// The bound is the whole time from the stop request (SIGTERM) to the process's exit; every step
/// has a deadline measured from the request, as a fraction of it:
///
/// | from the request | what |
/// |---|---|
/// | 0 … 40% | sends in flight may finish; then shards checkpoint without them |
/// | … 60% | work in hand (checkpoints, messages finishing) may end; then each lane closes its consumer, committing what is done |
/// | … 80% | services still running are cancelled and left behind |
/// | … 95% | the producer flushes receipts still queued |
/// | 100% | the process exits, whatever is still running (non-zero) |
struct ShutdownBudget: Sendable, Equatable {
    /// The bound.
    let total: Duration

    /// Sends in flight may finish this long after the request.
    var sendsInFlight: Duration { total * 4 / 10 }
    /// Work in hand may end this long after the request; then the consumers close.
    var workInHand: Duration { total * 6 / 10 }
    /// Services still running this long after the request are cancelled.
    var cancelServices: Duration { total * 8 / 10 }
    /// The producer's flush ends this long after the request.
    var flushUntil: Duration { total * 95 / 100 }

    /// How long the flush may take when `elapsed` has passed since the request (at least 0).
    func flushTimeout(elapsed: Duration) -> Duration {
        max(.zero, flushUntil - elapsed)
    }

    /// How long is left of the bound when `elapsed` has passed since the request (at least 0).
    func remaining(elapsed: Duration) -> Duration {
        max(.zero, total - elapsed)
    }
}
