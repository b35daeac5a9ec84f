import HeraldCore
import HeraldHTTP2
import Synchronization

/// Where a shard run's answers arrive: sends complete on the providers' event loops and post here,
/// and the run takes everything that arrived in one batch. Only a run that waits on an empty inbox
/// is woken, and the wake-up carries no answers: the run takes them when it runs. A post on an
/// event loop's thread wakes the run once that loop has handled the whole read it came from
/// (``EventLoop/runAtEndOfIteration(_:)``), so the answers of one read arrive as one batch. A
/// busy run costs one wake-up per batch of answers rather than one task and one wake-up per send.
final class SendInbox: Sendable {
    enum Item: Sendable {
        /// A send's outcome and how long it took. The send travels by reference: an item is
        /// copied into the inbox and out of it, and a send's member holds half a dozen strings.
        case sent(SentRequest, outcome: DeliveryOutcome, seconds: Double)
        /// The run's timer: re-read the app and the job, take a checkpoint that is due.
        case tick
    }

    private struct State {
        var items: [Item] = []
        var waiter: CheckedContinuation<Void, Never>?
        /// A wake-up of the waiter is scheduled at the end of a loop's iteration.
        var wakeScheduled = false
    }

    private let state = Mutex(State())

    init() {}

    /// Adds `item`, from any thread; wakes the run if it is waiting (on an event loop's thread,
    /// at the end of the loop's iteration).
    func post(_ item: Item) {
        let wake = state.withLock { state in
            state.items.append(item)
            guard state.waiter != nil, !state.wakeScheduled else { return false }
            state.wakeScheduled = true
            return true
        }
        guard wake else { return }
        if !EventLoop.runAtEndOfIteration({ self.wakeWaiter() }) { wakeWaiter() }
    }

    private func wakeWaiter() {
        let waiter = state.withLock { state in
            state.wakeScheduled = false
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Whether the run waits on an empty inbox (for tests).
    var isWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Everything posted since the last take, waiting for the next post when nothing was.
    /// One caller at a time (the run).
    func next() async -> [Item] {
        var batch: [Item] = []
        await next(into: &batch)
        return batch
    }

    /// ``next()`` into `batch`, which should be empty: the posted items are swapped into it, and
    /// its storage takes the next posts. A run that hands back the same emptied array each time (its
    /// capacity kept) makes two buffers alternate, so no batch allocates on one thread and frees
    /// on another.
    func next(into batch: inout [Item]) async {
        while true {
            take(into: &batch)
            if !batch.isEmpty { return }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let posted = state.withLock { state in
                    guard state.items.isEmpty else { return true }
                    state.waiter = continuation
                    return false
                }
                if posted { continuation.resume() }
            }
        }
    }

    /// Everything posted since the last take, without waiting (possibly nothing).
    func take() -> [Item] {
        var batch: [Item] = []
        take(into: &batch)
        return batch
    }

    /// ``take()`` into `batch`: swapped in when `batch` is empty, as ``next(into:)`` expects, else
    /// appended to it.
    func take(into batch: inout [Item]) {
        state.withLock { state in
            if batch.isEmpty {
                swap(&state.items, &batch)
            } else {
                batch.append(contentsOf: state.items)
                state.items.removeAll(keepingCapacity: true)
            }
        }
    }
}

/// A send in flight: made by the run as it starts the send, and posted back to the run's inbox
/// with its outcome by the provider's event loop. The completion a client keeps captures only
/// this object (so it needs no context of its own), and the answer carries it by reference.
final class SentRequest: Sendable {
    let send: ShardRunState.Send
    private let inbox: SendInbox
    private let started: ContinuousClock.Instant

    init(_ send: ShardRunState.Send, inbox: SendInbox, started: ContinuousClock.Instant) {
        self.send = send
        self.inbox = inbox
        self.started = started
    }

    /// Posts the send's outcome, with the time since it started, to the run's inbox.
    func answer(_ outcome: DeliveryOutcome) {
        let elapsed = ContinuousClock.now - started
        inbox.post(.sent(self, outcome: outcome, seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
    }
}
