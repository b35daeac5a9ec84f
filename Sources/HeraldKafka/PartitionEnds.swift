/// A partition's oldest offset still stored (`low`) and the offset the next message will get
/// (`high`): the partition holds `low..<high`.
public struct PartitionWatermarks: Sendable, Hashable {
    public var low: Int64
    public var high: Int64

    /// Watermarks.
    public init(low: Int64, high: Int64) {
        self.low = low
        self.high = high
    }
}

/// Reading a set of partitions up to the ends they had at one moment (a tool that replays "what
/// is there now" and then stops). Every message read is noted, also before the ends are known;
/// once they are, messages beyond them (arrived later) are outside, and the reading is complete
/// when every partition has been read to its end.
public struct PartitionEnds: Sendable {
    /// The watermarks taken, once known.
    public private(set) var ends: [KafkaTopicPartition: PartitionWatermarks]?
    /// The offset after the last message read, per partition.
    private var next: [KafkaTopicPartition: Int64] = [:]

    /// Nothing read, the ends not yet known.
    public init() {}

    /// Sets the ends (once; later calls change nothing).
    public mutating func setEnds(_ ends: [KafkaTopicPartition: PartitionWatermarks]) {
        if self.ends == nil { self.ends = ends }
    }

    /// Whether `message` is inside the ends: any message while they are not known; else one that
    /// was in its partition when they were taken (a partition they do not know is outside).
    public func contains(_ message: KafkaMessage) -> Bool {
        guard let ends else { return true }
        guard let end = ends[message.topicPartition] else { return false }
        return message.offset < end.high
    }

    /// Notes that `message` was read.
    public mutating func read(_ message: KafkaMessage) {
        let partition = message.topicPartition
        next[partition] = max(next[partition] ?? 0, message.offset + 1)
    }

    /// Whether `partition` (with `marks`) has been read to its end; an empty partition (or one
    /// emptied by retention) has nothing to read.
    private func isRead(_ partition: KafkaTopicPartition, _ marks: PartitionWatermarks) -> Bool {
        (next[partition] ?? marks.low) >= marks.high
    }

    /// The partitions not yet read to their end, with the offset reached (nil: nothing read) and
    /// the end; empty while the ends are not known.
    public var unfinished: [(partition: KafkaTopicPartition, reached: Int64?, end: Int64)] {
        (ends ?? [:]).filter { !isRead($0.key, $0.value) }
            .map { (partition: $0.key, reached: next[$0.key], end: $0.value.high) }
            .sorted { ($0.partition.topic, $0.partition.partition) < ($1.partition.topic, $1.partition.partition) }
    }

    /// Whether the ends are known and every partition has been read to its end.
    public var isComplete: Bool {
        guard let ends else { return false }
        return ends.allSatisfy { isRead($0.key, $0.value) }
    }
}
