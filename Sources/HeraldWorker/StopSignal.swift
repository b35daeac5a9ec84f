import Synchronization

/// A stop request shared by every part of a worker (SIGTERM): stop taking work, checkpoint,
/// give leases back. Parts wait for it (``wait()``, ``sleep(for:)``) rather than poll it.
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    /// When the stop was requested; nil before.
    private let requested = AsyncCondition<ContinuousClock.Instant?>(nil)

    /// Not stopping.
    public init() {}

    /// Whether a stop was requested.
    public var isSet: Bool { flag.load(ordering: .acquiring) }

    /// When the stop was first requested (the start of the shutdown bound).
    var requestedAt: ContinuousClock.Instant? { requested.value }

    /// How long ago the stop was requested (zero before).
    var elapsed: Duration { requestedAt.map { ContinuousClock.now - $0 } ?? .zero }

    /// Requests the stop (the first request counts; later ones change nothing).
    public func set() {
        requested.update { instant in
            guard instant == nil else { return }
            instant = .now
            flag.store(true, ordering: .releasing)
        }
    }

    /// Returns once the stop is requested (at once if it was), or when the task is cancelled.
    public func wait() async {
        await requested.wait { $0 != nil }
    }

    /// Sleeps for `duration`, or less when the stop is requested meanwhile, so a long backoff
    /// never holds a stopping worker.
    public func sleep(for duration: Duration) async {
        guard !isSet else { return }
        _ = await returnsWithin(duration) { await self.wait() }
    }
}

/// A value that tasks can wait on until it satisfies a condition, without polling.
final class AsyncCondition<Value: Sendable>: Sendable {
    private struct State {
        var value: Value
        var waiters: [UInt64: (predicate: @Sendable (Value) -> Bool, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter: UInt64 = 0
    }

    private let state: Mutex<State>

    init(_ value: Value) { state = Mutex(State(value: value)) }

    var value: Value { state.withLock { $0.value } }

    /// Changes the value; waiters whose condition now holds resume.
    func update(_ body: (inout Value) -> Void) {
        let ready = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            body(&state.value)
            let value = state.value
            let ready = state.waiters.filter { $0.value.predicate(value) }
            for id in ready.keys { state.waiters[id] = nil }
            return ready.values.map(\.continuation)
        }
        for continuation in ready { continuation.resume() }
    }

    /// Returns once `predicate` holds for the value (at once if it does), or when the task is
    /// cancelled.
    func wait(until predicate: @escaping @Sendable (Value) -> Bool) async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state -> Bool in
                    if predicate(state.value) || Task.isCancelled { return true }
                    state.waiters[id] = (predicate, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }
}

/// Runs `body` for at most `duration`; true when it returned by itself, false when the time ran
/// out first. `body` is then cancelled but not waited for: a part that ignores cancellation (a
/// socket call against a peer that went away) cannot hold the caller past `duration`.
func returnsWithin(_ duration: Duration, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    await firstReturns(body, before: { try? await Task.sleep(for: duration) })
}

/// Runs `first` and `second` side by side; true when `first` returned before `second`. The
/// other one is cancelled, and not waited for. When the caller's task is cancelled, both are,
/// and the answer is false at once.
func firstReturns(_ first: @escaping @Sendable () async -> Void, before second: @escaping @Sendable () async -> Void) async -> Bool {
    let decision = Shared<CheckedContinuation<Bool, Never>?>(nil)
    let racers = Shared<[Task<Void, Never>]>([])
    let finish: @Sendable (Bool) -> Void = { outcome in
        decision.withLock { pending in
            pending?.resume(returning: outcome)
            pending = nil
        }
    }
    let outcome = await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            decision.withLock { $0 = continuation }
            racers.withLock {
                $0 = [
                    Task {
                        await first()
                        finish(true)
                    },
                    Task {
                        await second()
                        finish(false)
                    },
                ]
            }
            if Task.isCancelled { finish(false) }
        }
    } onCancel: {
        finish(false)
    }
    racers.withLock { $0.forEach { $0.cancel() } }
    return outcome
}

/// A value behind a lock, shared by reference between tasks.
final class Shared<Value: Sendable>: Sendable {
    private let value: Mutex<Value>

    init(_ value: Value) { self.value = Mutex(value) }

    func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result { value.withLock { body(&$0) } }
}
