import Synchronization

/// A stop request shared by every part of a worker (SIGTERM): stop taking work, checkpoint,
/// give leases back.
public final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    /// Not stopping.
    public init() {}
    /// Whether a stop was requested.
    public var isSet: Bool { flag.load(ordering: .acquiring) }
    /// Requests the stop.
    public func set() { flag.store(true, ordering: .releasing) }

    /// Sleeps for `duration`, or less when the stop is requested meanwhile (checked every
    /// 100 ms), so a long backoff never holds a stopping worker.
    public func sleep(for duration: Duration) async {
        let end = ContinuousClock.now + duration
        while !isSet {
            let left = end - ContinuousClock.now
            if left <= .zero { return }
            try? await Task.sleep(for: min(left, .milliseconds(100)))
        }
    }
}
