internal import CRdKafka
import Synchronization

/// Consumer lag (`herald_consumer_lag`), apart from the consumer's poll loop: read on demand from
/// librdkafka's cached watermarks and this consumer's own commits, never with a request.
extension KafkaConsumer {
    /// Messages on the partitions held now that this consumer has not committed: for each, the
    /// high watermark librdkafka last saw (no request is made) minus the offset this consumer
    /// last committed, or, before its first commit, its fetch position (which runs ahead of the
    /// committed offset, so the figure is then a floor). Partitions whose watermark is not
    /// known yet count 0.
    public var lag: Int64 { runtime.lag }
}

extension ConsumerRuntime {
    var lag: Int64 {
        let (partitions, committed) = state.withLock { (Array($0.assignment.keys), $0.lastCommitted) }
        guard !partitions.isEmpty else { return 0 }
        var positions: [KafkaTopicPartition: Int64] = [:]
        if partitions.contains(where: { committed[$0] == nil }), let list = PartitionList(partitions),
           rd_kafka_position(client.pointer, list.pointer) == RD_KAFKA_RESP_ERR_NO_ERROR {
            for (partition, offset) in list.entries where offset >= 0 { positions[partition] = offset }
        }
        var total: Int64 = 0
        for partition in partitions {
            var low: Int64 = -1
            var high: Int64 = -1
            guard rd_kafka_get_watermark_offsets(client.pointer, partition.topic, partition.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR,
                  high >= 0, let done = committed[partition] ?? positions[partition] ?? (low >= 0 ? low : nil) else { continue }
            total += max(0, high - done)
        }
        return total
    }
}
