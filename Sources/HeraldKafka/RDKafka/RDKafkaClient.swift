internal import CRdKafka

/// Owns an `rd_kafka_t` and destroys it.
///
/// `@unchecked Sendable`: librdkafka's `rd_kafka_t` is thread-safe for the calls Herald makes
/// on it (poll, produce, commit, pause from any thread), and the pointer never changes.
final class RDKafkaClient: @unchecked Sendable {
    let pointer: OpaquePointer
    /// An object librdkafka callbacks point at (as their opaque), kept alive until the handle is destroyed.
    private let callbackContext: AnyObject?

    /// Which kind of client librdkafka makes.
    enum Kind {
        /// A producer (also the handle for the Admin API and the mock cluster).
        case producer
        /// A consumer-group member.
        case consumer
    }

    /// Creates the client, which takes `configuration` over (it stays the caller's on failure).
    init(_ kind: Kind, configuration: RDKafkaConfiguration, callbackContext: AnyObject? = nil) throws(KafkaError) {
        var errorText = [CChar](repeating: 0, count: 512)
        let type = kind == .producer ? RD_KAFKA_PRODUCER : RD_KAFKA_CONSUMER
        guard let client = rd_kafka_new(type, configuration.pointer, &errorText, errorText.count) else {
            throw KafkaError(.clientCreation, rdkafkaString(errorText))
        }
        configuration.markTaken()
        pointer = client
        self.callbackContext = callbackContext
    }

    /// The group's committed offsets for `partitions` (those without a commit left out).
    /// Blocks for up to `timeoutMilliseconds`: call it off the cooperative pool.
    func committedOffsets(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) -> Result<[KafkaTopicPartition: Int64], KafkaError> {
        guard let list = PartitionList(partitions) else {
            return .failure(KafkaError(.consume, "cannot allocate a partition list"))
        }
        let error = rd_kafka_committed(pointer, list.pointer, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
            return .failure(KafkaError(.commit, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: true))
        }
        var offsets: [KafkaTopicPartition: Int64] = [:]
        for (partition, offset) in list.entries where offset >= 0 { offsets[partition] = offset }
        return .success(offsets)
    }

    /// The low and high watermarks of each of `partitions`, asked of their leaders. Blocks for
    /// up to `timeoutMilliseconds` per partition: call it off the cooperative pool.
    func watermarks(for partitions: [KafkaTopicPartition], timeoutMilliseconds: Int32) -> Result<[KafkaTopicPartition: PartitionWatermarks], KafkaError> {
        var marks: [KafkaTopicPartition: PartitionWatermarks] = [:]
        for partition in partitions {
            var low: Int64 = -1
            var high: Int64 = -1
            let error = rd_kafka_query_watermark_offsets(pointer, partition.topic, partition.partition, &low, &high, timeoutMilliseconds)
            guard error == RD_KAFKA_RESP_ERR_NO_ERROR else {
                return .failure(KafkaError(.consume, "watermarks of \(partition): \(rdkafkaErrorText(error))",
                                           rdkafkaCode: error.rawValue, isRetryable: true))
            }
            marks[partition] = PartitionWatermarks(low: low, high: high)
        }
        return .success(marks)
    }

    deinit {
        rd_kafka_destroy(pointer)
    }
}
