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
/// is there now" and then stops): which messages are inside those ends, and when every
/// partition has been read to its end. Messages that arrive later are beyond the ends.
public struct PartitionEnds: Sendable {
    /// The watermarks taken at the start.
    public let ends: [KafkaTopicPartition: PartitionWatermarks]
    /// The offset after the last message read, per partition.
    private var next: [KafkaTopicPartition: Int64] = [:]

    /// Reading up to `ends`; `reached`: the offset after the last message already read, per
    /// partition (what was read before the ends were known).
    public init(_ ends: [KafkaTopicPartition: PartitionWatermarks], reached: [KafkaTopicPartition: Int64] = [:]) {
        self.ends = ends
        next = reached
    }

    /// Whether `message` was in its partition when the ends were taken. A message of a partition
    /// the ends do not know is outside them.
    public func contains(_ message: KafkaMessage) -> Bool {
        guard let end = ends[message.topicPartition] else { return false }
        return message.offset < end.high
    }

    /// Notes that `message` was read.
    public mutating func read(_ message: KafkaMessage) {
        let partition = message.topicPartition
        next[partition] = max(next[partition] ?? 0, message.offset + 1)
    }

    /// The partitions not yet read to their end, with the offset reached (nil: nothing read) and the end.
    public var unfinished: [(partition: KafkaTopicPartition, reached: Int64?, end: Int64)] {
        ends.compactMap { partition, marks in
            // Empty (or emptied by retention) partitions have nothing to read.
            guard marks.high > marks.low else { return nil }
            let reached = next[partition]
            return (reached ?? marks.low) >= marks.high ? nil : (partition, reached, marks.high)
        }.sorted { ($0.partition.topic, $0.partition.partition) < ($1.partition.topic, $1.partition.partition) }
    }

    /// Whether every partition has been read to its end.
    public var isComplete: Bool { unfinished.isEmpty }
}
