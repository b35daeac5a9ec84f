import Synchronization

/// Runs work items so that items sharing a key run one after another, in the order they came,
/// while items with different keys run concurrently, at most `maximumConcurrency` at once.
///
/// The pipeline uses it for live activities: one activity's updates (one key) must be handled in
/// order, but thousands of activities go on in parallel. Items without a key run unordered.
/// Waiting items are bounded too (`maximumWaiting`): when they are full, reading the next
/// element waits, so the source (a paused Kafka consumer) holds the backlog, not memory.
public enum KeyOrderedRunner {
    /// Takes every element of `elements` and runs `body` on it, keeping per-key order; returns
    /// when the sequence ended and all work finished. Throws what the sequence throws.
    public static func run<Elements: AsyncSequence, Key: Hashable & Sendable>(
        _ elements: Elements,
        maximumConcurrency: Int,
        maximumWaiting: Int = 10_000,
        key: @escaping @Sendable (Elements.Element) -> Key?,
        body: @escaping @Sendable (Elements.Element) async -> Void
    ) async throws where Elements.Element: Sendable {
        let lanes = Lanes<Key, Elements.Element>()
        let concurrency = max(1, maximumConcurrency)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var running = 0
            for try await element in elements {
                let elementKey = key(element)
                // A busy key takes the element into its lane; its running chain will get to it.
                if let elementKey, lanes.enqueueIfBusy(elementKey, element) {
                    while lanes.waitingCount >= maximumWaiting, running > 0 {
                        _ = try await group.next()
                        running -= 1
                    }
                    continue
                }
                while running >= concurrency {
                    _ = try await group.next()
                    running -= 1
                }
                if let elementKey { lanes.markBusy(elementKey) }
                running += 1
                group.addTask {
                    var current = element
                    while true {
                        await body(current)
                        guard let elementKey, let next = lanes.nextOrIdle(elementKey) else { return }
                        current = next
                    }
                }
            }
            try await group.waitForAll()
        }
    }
}

/// Per-key queues of waiting elements. A key is "busy" while a chain runs its elements.
private final class Lanes<Key: Hashable & Sendable, Element: Sendable>: Sendable {
    private struct State {
        var waiting: [Key: [Element]] = [:]
        var busy: Set<Key> = []
        var waitingCount = 0
    }
    private let state = Mutex(State())

    var waitingCount: Int { state.withLock { $0.waitingCount } }

    /// Queues `element` behind its key's running chain; false when the key is idle.
    func enqueueIfBusy(_ key: Key, _ element: Element) -> Bool {
        state.withLock { state in
            guard state.busy.contains(key) else { return false }
            state.waiting[key, default: []].append(element)
            state.waitingCount += 1
            return true
        }
    }

    func markBusy(_ key: Key) {
        _ = state.withLock { $0.busy.insert(key) }
    }

    /// The key's next waiting element, or nil after marking the key idle.
    func nextOrIdle(_ key: Key) -> Element? {
        state.withLock { state in
            if var queue = state.waiting[key], !queue.isEmpty {
                let next = queue.removeFirst()
                state.waiting[key] = queue.isEmpty ? nil : queue
                state.waitingCount -= 1
                return next
            }
            state.busy.remove(key)
            return nil
        }
    }
}
