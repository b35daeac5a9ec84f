import HeraldCore
import Synchronization

/// Where a shard run's answers arrive: sends complete on the providers' event loops and post here,
/// and the run takes everything that arrived in one batch. Only a run that waits on an empty inbox
/// is woken; answers posted while it works are picked up with the next batch, so a busy run costs
/// one wake-up per batch of answers rather than one task and one wake-up per send.
final class SendInbox: Sendable {
    enum Item: Sendable {
        /// A send's outcome and how long it took.
        case sent(ShardRunState.Send, outcome: DeliveryOutcome, seconds: Double)
        /// The run's timer: re-read the app and the job, take a checkpoint that is due.
        case tick
    }

    private struct State {
        var items: [Item] = []
        var waiter: CheckedContinuation<[Item], Never>?
    }

    private let state = Mutex(State())

    init() {}

    /// Adds `item`, from any thread; wakes the run if it is waiting.
    func post(_ item: Item) {
        let wake: (CheckedContinuation<[Item], Never>, [Item])? = state.withLock { state in
            state.items.append(item)
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            defer { state.items = [] }
            return (waiter, state.items)
        }
        if let (waiter, items) = wake { waiter.resume(returning: items) }
    }

    /// Everything posted since the last take, waiting for the next post when nothing was.
    /// One caller at a time (the run).
    func next() async -> [Item] {
        let ready = take()
        if !ready.isEmpty { return ready }
        return await withCheckedContinuation { continuation in
            let items: [Item]? = state.withLock { state in
                guard !state.items.isEmpty else {
                    state.waiter = continuation
                    return nil
                }
                defer { state.items = [] }
                return state.items
            }
            if let items { continuation.resume(returning: items) }
        }
    }

    /// Everything posted since the last take, without waiting (possibly nothing).
    func take() -> [Item] {
        state.withLock { state in
            defer { state.items = [] }
            return state.items
        }
    }
}
