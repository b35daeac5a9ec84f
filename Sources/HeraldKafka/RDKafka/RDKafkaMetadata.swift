internal import CRdKafka

/// A metadata answer of the cluster, copied out of librdkafka.
struct RDKafkaMetadata: Sendable {
    /// The ids of the cluster's brokers.
    var brokerIDs: [Int32]
    /// The topics the request covered, without those in error, with their partition counts.
    var topics: [String: Int]
}

extension RDKafkaClient {
    /// Asks the cluster for its brokers, and every topic's metadata when `allTopics` is true.
    /// The error carries librdkafka's text. Blocks for up to `timeoutMilliseconds`: call it off
    /// the cooperative pool.
    func metadata(allTopics: Bool, timeoutMilliseconds: Int32) -> Result<RDKafkaMetadata, KafkaError> {
        metadata(nil, allTopics: allTopics, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// Asks the cluster for the metadata of `topic` (a broker that auto-creates topics creates
    /// it); nil when librdkafka cannot make a handle for the name. Blocks like the above.
    func metadata(of topic: String, timeoutMilliseconds: Int32) -> Result<RDKafkaMetadata, KafkaError>? {
        guard let handle = rd_kafka_topic_new(pointer, topic, nil) else { return nil }
        defer { rd_kafka_topic_destroy(handle) }
        return metadata(handle, allTopics: false, timeoutMilliseconds: timeoutMilliseconds)
    }

    private func metadata(_ topic: OpaquePointer?, allTopics: Bool, timeoutMilliseconds: Int32) -> Result<RDKafkaMetadata, KafkaError> {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let error = rd_kafka_metadata(pointer, allTopics ? 1 : 0, topic, &metadata, timeoutMilliseconds)
        guard error == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else {
            return .failure(KafkaError(.cluster, rdkafkaErrorText(error), rdkafkaCode: error.rawValue, isRetryable: true))
        }
        defer { rd_kafka_metadata_destroy(metadata) }
        var topics: [String: Int] = [:]
        for topic in UnsafeBufferPointer(start: metadata.pointee.topics, count: Int(metadata.pointee.topic_cnt))
        where topic.err == RD_KAFKA_RESP_ERR_NO_ERROR {
            guard let name = topic.topic else { continue }
            topics[String(cString: name)] = Int(topic.partition_cnt)
        }
        let brokers = UnsafeBufferPointer(start: metadata.pointee.brokers, count: Int(metadata.pointee.broker_cnt)).map(\.id)
        return .success(RDKafkaMetadata(brokerIDs: brokers, topics: topics))
    }
}
