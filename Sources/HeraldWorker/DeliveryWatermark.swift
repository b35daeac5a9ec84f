/// The shard cursor that is safe to checkpoint: the last subscription id (in the id order they
/// were handed out) such that it and every one before it is resolved — its receipt ready or its
/// retry parked. Sends finish out of order; the cursor only ever moves over a finished prefix,
/// so a crash resends what was in flight, never skips it.
struct DeliveryWatermark {
    private var ids: [String] = []
    private var done: [Bool] = []
    private var head = 0
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
    }

    /// Records that `id` is resolved, and moves the cursor over the finished prefix.
    mutating func resolved(_ id: String) {
        guard let position = positions.removeValue(forKey: id) else { return }
        done[position] = true
        while head < ids.count, done[head] {
            cursor = ids[head]
            head += 1
        }
        // Drop the passed prefix now and then, so the arrays stay as small as the window.
        if head > 4096, head * 2 > ids.count {
            ids.removeFirst(head)
            done.removeFirst(head)
            for (key, value) in positions { positions[key] = value - head }
            head = 0
        }
    }
}
