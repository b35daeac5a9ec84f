import Dispatch
import HeraldCore
import Synchronization

/// Wakes a thread waiting for room in librdkafka's queue once the poll thread has served
/// delivery reports. A signal nobody waits for is dropped, so a wait never returns early on a
/// stale one by more than one turn.
final class RoomSignal: Sendable {
    private let waiting = Atomic<Bool>(false)
    private let semaphore = DispatchSemaphore(value: 0)

    func signal() {
        if waiting.exchange(false, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    /// Waits for the next signal, or for `limit`.
    func wait(atMost limit: Duration) {
        waiting.store(true, ordering: .releasing)
        if semaphore.wait(timeout: .now() + .nanoseconds(Int(clamping: limit.nanoseconds))) == .timedOut,
           !waiting.exchange(false, ordering: .acquiringAndReleasing) {
            // A signal raced the timeout: take it, so the next wait does not end on it.
            semaphore.wait()
        }
    }
}
