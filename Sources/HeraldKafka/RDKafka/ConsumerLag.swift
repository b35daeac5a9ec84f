internal import CRdKafka
import Synchronization

extension ConsumerRuntime {
    /// See ``KafkaConsumer/lag``.
    var lag: Int64 {
        let (partitions, committed) = state.withLock { (Array($0.machine.assignment.keys), $0.machine.lastCommitted) }
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
