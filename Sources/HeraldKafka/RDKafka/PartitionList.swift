internal import CRdKafka

/// Owns an `rd_kafka_topic_partition_list_t`.
final class PartitionList {
    let pointer: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>

    init?(_ partitions: [KafkaTopicPartition]) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(max(1, partitions.count))) else { return nil }
        pointer = list
        for partition in partitions { rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition) }
    }

    init?(_ offsets: [(KafkaTopicPartition, Int64)]) {
        guard let list = rd_kafka_topic_partition_list_new(Int32(max(1, offsets.count))) else { return nil }
        pointer = list
        for (partition, offset) in offsets {
            rd_kafka_topic_partition_list_add(list, partition.topic, partition.partition)?.pointee.offset = offset
        }
    }

    var entries: [(KafkaTopicPartition, Int64)] { PartitionList.entries(of: pointer) }

    static func entries(of list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) -> [(KafkaTopicPartition, Int64)] {
        guard let elements = list.pointee.elems else { return [] }
        return (0..<Int(list.pointee.cnt)).map { index in
            let element = elements[index]
            return (KafkaTopicPartition(topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition), element.offset)
        }
    }

    /// Sets the offset of each entry of `list` that `offsets` names (a list librdkafka owns,
    /// such as a rebalance callback's).
    static func setOffsets(_ offsets: [KafkaTopicPartition: Int64], in list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>) {
        guard !offsets.isEmpty, let elements = list.pointee.elems else { return }
        for index in 0..<Int(list.pointee.cnt) {
            let element = elements[index]
            let partition = KafkaTopicPartition(topic: element.topic.map { String(cString: $0) } ?? "", partition: element.partition)
            if let offset = offsets[partition] { elements[index].offset = offset }
        }
    }

    deinit { rd_kafka_topic_partition_list_destroy(pointer) }
}

/// Owns an `rd_kafka_queue_t` reference. `@unchecked Sendable`: `rd_kafka_queue_yield` is
/// thread-safe and the pointer never changes. Holds the client so the queue is released first.
final class RDKafkaQueue: @unchecked Sendable {
    let pointer: OpaquePointer
    let client: RDKafkaClient

    init(pointer: OpaquePointer, client: RDKafkaClient) {
        self.pointer = pointer
        self.client = client
    }

    /// Makes a blocked `rd_kafka_consumer_poll` return at once.
    func wake() { rd_kafka_queue_yield(pointer) }

    deinit { rd_kafka_queue_destroy(pointer) }
}
