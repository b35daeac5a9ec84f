/// In-order offset bookkeeping for one partition: which delivered messages are still being
/// worked on, and how far the committed offset may move.
///
/// Messages of a partition are delivered in offset order but may finish in any order. The
/// committable position only moves over a run of finished messages that starts at the oldest
/// unfinished one, so a later message finishing first never lets a commit skip unfinished work.
/// Offsets need not be contiguous (compaction and transaction markers leave gaps).
public struct PartitionOffsetTracker: Sendable, Equatable {
    /// Delivered offsets not yet released, in delivery order, from `head`.
    private var pending: [Int64] = []
    private var head = 0
    /// Offsets in `pending` whose work is done but which wait behind an unfinished one.
    private var finishedEarly: Set<Int64> = []

    /// The offset to commit (the next one to read, Kafka's convention): one past the last message
    /// of the leading run of finished work. Nil until some work finished.
    public private(set) var committable: Int64?

    /// Creates an empty tracker.
    public init() {}

    /// A tracker for a partition read on from `offset`, where everything before is known to be
    /// processed: `offset` is committable at once.
    public init(resumingAt offset: Int64) {
        committable = offset
    }

    /// Messages delivered and not yet finished.
    public var unfinishedCount: Int { pending.count - head - finishedEarly.count }

    /// Messages delivered whose offsets are not yet committable (unfinished, or finished behind an unfinished one).
    public var outstandingCount: Int { pending.count - head }

    /// Records that the message at `offset` was handed to the application.
    /// Returns false (and records nothing) when `offset` is not beyond everything delivered so
    /// far, which would mean librdkafka re-delivered without a new assignment.
    @discardableResult
    public mutating func delivered(_ offset: Int64) -> Bool {
        if let last = pending.last, head < pending.count, offset <= last { return false }
        if let committable, offset < committable { return false }
        pending.append(offset)
        return true
    }

    /// Records that the work of the message at `offset` is done. Returns the new committable
    /// offset when it moved, nil otherwise (also for an offset that was never delivered or was
    /// already finished, which is ignored).
    public mutating func finished(_ offset: Int64) -> Int64? {
        guard head < pending.count else { return nil }
        if pending[head] != offset {
            // Finished out of order: remember it if it is waiting in the window.
            guard offset > pending[head], let last = pending.last, offset <= last, !finishedEarly.contains(offset),
                  contains(offset) else { return nil }
            finishedEarly.insert(offset)
            return nil
        }
        var released = offset
        head += 1
        while head < pending.count, finishedEarly.remove(pending[head]) != nil {
            released = pending[head]
            head += 1
        }
        compactIfWorthIt()
        committable = released + 1
        return released + 1
    }

    private func contains(_ offset: Int64) -> Bool {
        // `pending[head...]` is sorted: binary search.
        var low = head
        var high = pending.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if pending[middle] == offset { return true }
            if pending[middle] < offset { low = middle + 1 } else { high = middle - 1 }
        }
        return false
    }

    private mutating func compactIfWorthIt() {
        if head == pending.count {
            pending.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 && head * 2 > pending.count {
            pending.removeFirst(head)
            head = 0
        }
    }
}

/// ``PartitionOffsetTracker``s for every partition a consumer holds.
public struct OffsetTracker: Sendable {
    private var partitions: [KafkaTopicPartition: PartitionOffsetTracker] = [:]

    /// Creates an empty tracker.
    public init() {}

    /// Records a delivery (see ``PartitionOffsetTracker/delivered(_:)``).
    @discardableResult
    public mutating func delivered(_ partition: KafkaTopicPartition, offset: Int64) -> Bool {
        partitions[partition, default: PartitionOffsetTracker()].delivered(offset)
    }

    /// Starts `partition` afresh at `offset`, with everything before it processed.
    public mutating func resume(_ partition: KafkaTopicPartition, after offset: Int64) {
        partitions[partition] = PartitionOffsetTracker(resumingAt: offset)
    }

    /// Records finished work (see ``PartitionOffsetTracker/finished(_:)``); nil for a partition
    /// the tracker does not hold (revoked meanwhile).
    public mutating func finished(_ partition: KafkaTopicPartition, offset: Int64) -> Int64? {
        guard partitions[partition] != nil else { return nil }
        return partitions[partition]?.finished(offset)
    }

    /// The committable offset of every partition where some work finished.
    public var committable: [KafkaTopicPartition: Int64] {
        partitions.compactMapValues(\.committable)
    }

    /// Messages delivered and not yet committable, over all partitions.
    public var outstandingCount: Int { partitions.values.reduce(0) { $0 + $1.outstandingCount } }

    /// Messages delivered and not yet finished, over all partitions.
    public var unfinishedCount: Int { partitions.values.reduce(0) { $0 + $1.unfinishedCount } }

    /// Messages of `selected` partitions delivered and not yet finished.
    public func unfinishedCount(in selected: some Sequence<KafkaTopicPartition>) -> Int {
        selected.reduce(0) { $0 + (partitions[$1]?.unfinishedCount ?? 0) }
    }

    /// Forgets partitions (after a revocation): late finishes for them are ignored.
    public mutating func remove(_ removed: some Sequence<KafkaTopicPartition>) {
        for partition in removed { partitions.removeValue(forKey: partition) }
    }

    /// The tracker of one partition, if held.
    public subscript(partition: KafkaTopicPartition) -> PartitionOffsetTracker? { partitions[partition] }
}
